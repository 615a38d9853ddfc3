// Shell functions: what they record, the listing of the expression sample, and shape errors
// that point at the user's call.
#include <gtest/gtest.h>

#include "serialize/listing.h"
#include "shell/shell.h"

namespace nnasm {
namespace {

const char* const EXPECTED_EXPRESSION_LISTING = R"(input  %x1 : f32[2,4]
input  %x2 : f32[2,4]
input  %x3 : f32[2,4]
output %y

forward:
  SCALE        %x3 -> %t0  alpha=3                    ; f32[2,4]
  ADD          %x2, %t0 -> %t1  alpha=1 beta=1        ; f32[2,4]
  RELU         %t1 -> %t2                             ; f32[2,4]
  SOFTMAX      %t2 -> %t3  axis=-1                    ; f32[2,4]
  ADD          %x1, %t3 -> %y  alpha=1 beta=1         ; f32[2,4]
)";

std::vector<Opcode> opcodes(const Program& p) {
  std::vector<Opcode> v;
  for (const Instruction& ins : p.code()) v.push_back(ins.op);
  return v;
}

TEST(Shell, ExpressionSampleRecordsTheExpectedListing) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x1 = g.input("x1", {2, 4});
  Var x2 = g.input("x2", {2, 4});
  Var x3 = g.input("x3", {2, 4});
  g.output(x1 + softmax(relu(x2 + 3.f * x3)), "y");
  ASSERT_TRUE(g.status()) << g.status().message();
  EXPECT_EQ(program_print(p), EXPECTED_EXPRESSION_LISTING);
}

TEST(Shell, OperatorsRecordTheirOpcodes) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var a = g.input("a", {3}), b = g.input("b", {3});
  // One operator per statement: C++ leaves the order of evaluating operands unspecified.
  Var s = a + b;
  Var n = -s;
  Var m = a * b;
  Var k = 2.f * a;
  Var q = m / k;
  Var d = n - q;
  Var h = a * 0.5f;
  Var y = d + h;
  ASSERT_TRUE(y.valid());
  EXPECT_EQ(opcodes(p), (std::vector<Opcode>{Opcode::ADD, Opcode::NEG, Opcode::MUL, Opcode::SCALE, Opcode::DIV,
                                             Opcode::SUB, Opcode::SCALE, Opcode::ADD}));
  EXPECT_EQ(p.code()[3].f(0), 2.0);
  EXPECT_EQ(p.code()[6].f(0), 0.5);
  // Every op writes a new tensor; inputs are never outputs.
  for (const Instruction& ins : p.code()) {
    EXPECT_NE(ins.out[0], a.id());
    EXPECT_NE(ins.out[0], b.id());
  }
}

TEST(Shell, LinearInfersItsWeightShapes) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {8, 784});
  Var h = linear(x, 256);
  Var y = linear(h, 10, {"head"});
  ASSERT_TRUE(g.status()) << g.status().message();
  EXPECT_EQ(p.desc(p.find("w0")).type.str(), "f32[784,256]");
  EXPECT_EQ(p.desc(p.find("w0")).init.kind, InitKind::HE_NORMAL);
  EXPECT_EQ(p.desc(p.find("b0")).type.str(), "f32[256]");
  EXPECT_EQ(p.desc(p.find("head.w")).type.str(), "f32[256,10]");
  EXPECT_EQ(p.desc(p.find("head.b")).init.kind, InitKind::ZEROS);
  EXPECT_EQ(y.type().str(), "f32[8,10]");
}

// A decoder step of a U-Net: upsample, concatenate the skip connection along channels, then pool
// and flatten into a classifier's rows; the listing reads back to the same program.
TEST(Shell, NchwShapeOpsRecordTheirShapes) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var low = g.input("low", {2, 4, 3, 5}), skip = g.input("skip", {2, 3, 6, 10});
  Var up = upsample_nearest(low, {2, 2});
  Var cat = concat({up, skip}, 1);
  Var pooled = global_avg_pool(cat);
  Var rows = flatten(pooled);
  Var cols = flatten(cat, -2);
  g.output(rows, "rows");
  g.output(cols, "cols");
  ASSERT_TRUE(g.status()) << g.status().message();
  EXPECT_EQ(up.type().str(), "f32[2,4,6,10]");
  EXPECT_EQ(cat.type().str(), "f32[2,7,6,10]");
  EXPECT_EQ(pooled.type().str(), "f32[2,7,1,1]");
  EXPECT_EQ(rows.type().str(), "f32[2,7]");
  EXPECT_EQ(cols.type().str(), "f32[14,60]");
  EXPECT_EQ(opcodes(p), (std::vector<Opcode>{Opcode::UPSAMPLE_NEAREST, Opcode::CONCAT, Opcode::GLOBAL_AVGPOOL,
                                             Opcode::FLATTEN, Opcode::FLATTEN}));
  Context ctx2;
  Program q(ctx2);
  const Status st = program_parse(program_print(p), "unet.nnasm", &q);
  ASSERT_TRUE(st) << st.message();
  EXPECT_EQ(program_print(q), program_print(p));
  // A shape error names the op, the operand and the call.
  const int line = __LINE__ + 1;
  Var bad = upsample_nearest(rows, {2, 2});
  EXPECT_FALSE(bad.valid());
  EXPECT_NE(g.status().message().find(fmt::format("shell_test.cpp:{}: error: UPSAMPLE_NEAREST: input operand 1 "
                                                  "(f32[2,7]) must be NCHW (rank 4)",
                                                  line)),
            std::string::npos)
      << g.status().message();
}

TEST(Shell, ShapeErrorNamesOpOperandsAndTheCall) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var a = g.input("a", {3, 4}), b = g.input("b", {5});
  const int line = __LINE__ + 1;
  Var y = a + b;
  EXPECT_FALSE(y.valid());
  ASSERT_FALSE(g.status());
  const std::string& m = g.status().message();
  EXPECT_NE(m.find(fmt::format("shell_test.cpp:{}: error: ADD:", line)), std::string::npos) << m;
  EXPECT_NE(m.find("f32[3,4]"), std::string::npos) << m;
  EXPECT_NE(m.find("f32[5]"), std::string::npos) << m;
}

TEST(Shell, FunctionCallErrorPointsAtTheCall) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var a = g.input("a", {2, 3}), b = g.input("b", {4, 5});
  const int line = __LINE__ + 1;
  Var y = matmul(a, b);
  EXPECT_FALSE(y.valid());
  EXPECT_NE(g.status().message().find(fmt::format("shell_test.cpp:{}: error: MATMUL: inner dimensions", line)),
            std::string::npos)
      << g.status().message();
}

TEST(Shell, ErrorsAreStickyAndLaterCallsAreNoOps) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var a = g.input("a", {2});
  Var bad = reshape(a, {3});
  const std::string first = g.status().message();
  Var more = relu(exp(bad)) + a;
  EXPECT_FALSE(more.valid());
  EXPECT_EQ(g.status().message(), first);
  EXPECT_NE(first.find("RESHAPE"), std::string::npos);
  EXPECT_EQ(p.code().size(), 0u);
  // A failed instruction leaves no half-declared temporary behind.
  EXPECT_EQ(p.tensors().size(), 1u);
}

TEST(Shell, DuplicateNamesAreErrors) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  g.input("x", {2});
  Var again = g.input("x", {2});
  EXPECT_FALSE(again.valid());
  EXPECT_NE(g.status().message().find("redefinition of tensor 'x'"), std::string::npos);
}

TEST(Shell, NamesMustBeListingIdentifiers) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  EXPECT_FALSE(g.input("a-b", {2}).valid());
  EXPECT_NE(g.status().message().find("'a-b' is not a valid tensor name"), std::string::npos) << g.status().message();
  Context ctx2;
  Program p2(ctx2);
  Graph g2(p2);
  Var x = g2.input("x", {2});
  g2.output(relu(x), "9y");
  EXPECT_FALSE(g2.status());
  Context ctx3;
  Program p3(ctx3);
  Graph g3(p3);
  EXPECT_TRUE(g3.input("layer1.w_0", {2}).valid()) << g3.status().message();
}

}  // namespace
}  // namespace nnasm
