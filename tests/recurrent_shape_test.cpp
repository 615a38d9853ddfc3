// Shape errors of the recurrent layers LSTM, GRU and RNN: each names the instruction and the
// operand that does not fit, and says what it should be.
#include <gtest/gtest.h>

#include "tests/op_harness.h"

namespace nnasm::test {
namespace {

TensorType f32(Shape s) { return TensorType{DType::F32, s}; }
TensorType i32(Shape s) { return TensorType{DType::I32, s}; }

// An LSTM over x [5, 2, 3] with hidden size 4, one direction.
std::vector<TensorType> lstm_operands() { return {f32({5, 2, 3}), f32({1, 16, 3}), f32({1, 16, 4}), f32({1, 32})}; }

TEST(RecurrentShapes, TheValidCaseIsAccepted) {
  Context ctx;
  Program p(ctx);
  std::vector<TensorId> ids;
  TensorId out = NO_TENSOR;
  ASSERT_TRUE(build_op(p, Opcode::LSTM, lstm_operands(), {}, &ids, &out).is_ok());
  EXPECT_EQ(p.desc(out).type, f32({5, 1, 2, 4}));
}

TEST(RecurrentShapes, AHiddenSizeThatDoesNotMatchTheWeights) {
  std::vector<TensorType> in = lstm_operands();
  in[1] = f32({1, 20, 3});  // W for hidden 5, R for hidden 4
  EXPECT_TRUE(append_fails(Opcode::LSTM, in, {}, {"LSTM", "W", "operand 2 (f32[1,20,3])", "f32[1,16,3]"}));
  in = lstm_operands();
  in[2] = f32({1, 16, 5});  // R not [4H, H]
  EXPECT_TRUE(append_fails(Opcode::LSTM, in, {}, {"LSTM", "R", "operand 3 (f32[1,16,5])", "H,H"}));
  in = lstm_operands();
  in[3] = f32({1, 16});  // one bias set instead of two
  EXPECT_TRUE(append_fails(Opcode::LSTM, in, {}, {"LSTM", "B", "f32[1,32]"}));
  EXPECT_TRUE(append_fails(Opcode::GRU, lstm_operands(), {}, {"GRU", "R", "3·H"}));
}

TEST(RecurrentShapes, DirectionsMustMatchTheWeights) {
  EXPECT_TRUE(append_fails(Opcode::LSTM, lstm_operands(), {imm_enum("direction", "bidirectional")},
                           {"LSTM", "R", "f32[2,"}));
}

TEST(RecurrentShapes, TheImmediatesSayWhichInputsFollow) {
  EXPECT_TRUE(append_fails(Opcode::LSTM, lstm_operands(), {imm_b("initial", true)}, {"LSTM", "6 inputs", "h0, c0"}));
  std::vector<TensorType> in = lstm_operands();
  in.push_back(f32({1, 2, 4}));
  EXPECT_TRUE(append_fails(Opcode::RNN, in, {}, {"RNN", "4 inputs"}));
}

TEST(RecurrentShapes, InitialStatesAndLengths) {
  std::vector<TensorType> in = lstm_operands();
  in.push_back(f32({1, 2, 4}));
  in.push_back(f32({1, 3, 4}));  // c0 for a batch of 3
  EXPECT_TRUE(append_fails(Opcode::LSTM, in, {imm_b("initial", true)}, {"LSTM", "c0", "f32[1,2,4]"}));
  in = lstm_operands();
  in.push_back(f32({2}));  // lengths as floats
  EXPECT_TRUE(append_fails(Opcode::LSTM, in, {imm_b("lens", true)}, {"LSTM", "lens", "i32[2]"}));
  in.back() = i32({5});  // one length per step instead of per sequence
  EXPECT_TRUE(append_fails(Opcode::LSTM, in, {imm_b("lens", true)}, {"LSTM", "lens", "i32[2]"}));
  in = lstm_operands();
  in.push_back(f32({1, 12}));  // peepholes for hidden 4 are [1, 12]
  in.back() = f32({1, 8});
  EXPECT_TRUE(append_fails(Opcode::LSTM, in, {imm_b("peephole", true)}, {"LSTM", "P", "f32[1,12]"}));
}

TEST(RecurrentShapes, XMustBeASequence) {
  std::vector<TensorType> in = lstm_operands();
  in[0] = f32({5, 3});
  EXPECT_TRUE(append_fails(Opcode::LSTM, in, {}, {"LSTM", "x", "[T,N,I]"}));
  in[0] = f32({2, 5, 4});  // batch_first x with an input size that is not W's
  EXPECT_TRUE(append_fails(Opcode::LSTM, in, {imm_b("batch_first", true)}, {"LSTM", "W", "f32[1,16,4]"}));
}

}  // namespace
}  // namespace nnasm::test
