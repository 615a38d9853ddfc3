// LSTM_BWD, GRU_BWD and RNN_BWD beyond the parity table (tests/parity_cases_recurrent_bwd.h) and
// the finite-difference checks (tests/gradcheck_test.cpp): their shape errors name the
// instruction and the operand; the gradient rule emits one *_BWD and zeros for the outputs the
// loss does not read; and a small classifier trains through each layer with an optimizer
// unchanged, its generated kernel running at every JIT level and ending where the reference does.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/autodiff.h"
#include "engine/executor.h"
#include "engine/optimizer.h"
#include "shell/shell.h"
#include "tests/jit_levels.h"
#include "tests/op_harness.h"

namespace nnasm::test {
namespace {

TensorType f32(Shape s) { return TensorType{DType::F32, s}; }
TensorType i32(Shape s) { return TensorType{DType::I32, s}; }

// LSTM_BWD of an LSTM over x [5, 2, 3] with hidden size 4, one direction: the forward's
// operands, then y [5,1,2,4], dy, d(last h), d(last c) [1,2,4].
std::vector<TensorType> lstm_bwd_operands() {
  return {f32({5, 2, 3}), f32({1, 16, 3}), f32({1, 16, 4}), f32({1, 32}), f32({5, 1, 2, 4}), f32({5, 1, 2, 4}),
          f32({1, 2, 4}), f32({1, 2, 4})};
}

TEST(RecurrentBwdShapes, TheValidCaseGivesTheGradientsShapes) {
  Context ctx;
  Program p(ctx);
  std::vector<TensorId> ids, outs;
  TensorId out = NO_TENSOR;
  ASSERT_TRUE(build_op(p, Opcode::LSTM_BWD, lstm_bwd_operands(), {}, &ids, &out, &outs).is_ok());
  ASSERT_EQ(outs.size(), 7u);
  const std::vector<TensorType> want = {f32({5, 2, 3}), f32({1, 16, 3}), f32({1, 16, 4}), f32({1, 32}),
                                        f32({1, 2, 4}),  f32({1, 2, 4}),  f32({1, 12})};
  for (size_t k = 0; k < want.size(); ++k) EXPECT_EQ(p.desc(outs[k]).type, want[k]) << k;
}

TEST(RecurrentBwdShapes, AHiddenSizeThatDoesNotMatch) {
  std::vector<TensorType> in = lstm_bwd_operands();
  in[2] = f32({1, 16, 5});  // R not [4H, H]
  EXPECT_TRUE(append_fails(Opcode::LSTM_BWD, in, {}, {"LSTM_BWD", "R", "operand 3 (f32[1,16,5])"}));
  in = lstm_bwd_operands();
  in[1] = f32({1, 20, 3});  // W for hidden 5
  EXPECT_TRUE(append_fails(Opcode::LSTM_BWD, in, {}, {"LSTM_BWD", "W", "f32[1,16,3]"}));
  in = lstm_bwd_operands();
  in[4] = f32({5, 1, 2, 5});  // y of hidden 5
  EXPECT_TRUE(append_fails(Opcode::LSTM_BWD, in, {}, {"LSTM_BWD", "y", "operand 5 (f32[5,1,2,5])", "f32[5,1,2,4]", "LSTM"}));
  in = lstm_bwd_operands();
  in[5] = f32({5, 2, 4});  // dy not shaped as y
  EXPECT_TRUE(append_fails(Opcode::LSTM_BWD, in, {}, {"LSTM_BWD", "dy", "operand 6", "f32[5,1,2,4]"}));
  in = lstm_bwd_operands();
  in[6] = f32({1, 3, 4});  // d(last h) for a batch of 3
  EXPECT_TRUE(append_fails(Opcode::LSTM_BWD, in, {}, {"LSTM_BWD", "dh", "f32[1,2,4]"}));
  in = lstm_bwd_operands();
  in[7] = i32({1, 2, 4});
  EXPECT_TRUE(append_fails(Opcode::LSTM_BWD, in, {}, {"LSTM_BWD", "dc", "f32[1,2,4]"}));
  // GRU_BWD and RNN_BWD: R's rows a multiple of the gates' count, y in x's layout.
  const std::vector<TensorType> gru = {f32({5, 2, 3}), f32({1, 12, 3}), f32({1, 12, 4}), f32({1, 24}),
                                       f32({5, 1, 2, 4}), f32({5, 1, 2, 4}), f32({1, 2, 4})};
  std::vector<TensorType> bad = gru;
  bad[2] = f32({1, 16, 4});
  EXPECT_TRUE(append_fails(Opcode::GRU_BWD, bad, {}, {"GRU_BWD", "R", "3·H"}));
  std::vector<TensorType> rnn = gru;
  rnn[1] = f32({1, 4, 3});
  rnn[2] = f32({1, 4, 4});
  rnn[3] = f32({1, 8});
  rnn[4] = rnn[5] = f32({5, 2, 1, 4});  // batch_first's y for a time-major x
  EXPECT_TRUE(append_fails(Opcode::RNN_BWD, rnn, {}, {"RNN_BWD", "y", "f32[5,1,2,4]"}));
}

TEST(RecurrentBwdShapes, TheImmediatesSayWhichInputsFollow) {
  // initial=1 announces h0 and c0 before y: two operands short.
  EXPECT_TRUE(append_fails(Opcode::LSTM_BWD, lstm_bwd_operands(), {imm_b("initial", true)},
                           {"LSTM_BWD", "takes 10 inputs", "h0, c0", "y, dy, dh, dc"}));
  std::vector<TensorType> in = lstm_bwd_operands();
  in.pop_back();  // no d(last c)
  EXPECT_TRUE(append_fails(Opcode::LSTM_BWD, in, {}, {"LSTM_BWD", "takes 8 inputs"}));
  EXPECT_TRUE(append_fails(Opcode::GRU_BWD, lstm_bwd_operands(), {}, {"GRU_BWD", "takes 7 inputs", "y, dy, dh)"}));
}

// ---------------------------------------------------------------------------------------------
// The rule

// An LSTM (or GRU, RNN) over x [6, 3, 5], hidden 7; the loss reads the outputs `reads` names
// (bit 0 y, 1 the last h, 2 the last c).
struct Layer {
  Layer(Opcode op, unsigned reads) : ctx(3), p(ctx) {
    Graph g(p);
    const int64_t G = op == Opcode::LSTM ? 4 : op == Opcode::GRU ? 3 : 1, H = 7;
    Var x = g.input("x", {6, 3, 5});
    Var w = g.param("w", {1, G * H, 5}, {InitKind::UNIFORM, -0.4, 0.4});
    Var r = g.param("r", {1, G * H, H}, {InitKind::UNIFORM, -0.4, 0.4});
    Var b = g.param("b", {1, 2 * G * H}, {InitKind::UNIFORM, -0.4, 0.4});
    g.record(op, {x, w, r, b}, {}, Loc::here());
    if (!g.status()) return;
    const std::vector<TensorId> outs = p.code().back().out;
    std::vector<Var> read;
    for (size_t k = 0; k < outs.size(); ++k)
      if (reads >> k & 1) read.push_back(reshape(Var(&g, outs[k]), {-1}));
    loss = reduce_sum(read.size() == 1 ? read[0] : concat(read, 0), 0).id();
    ok = g.status().is_ok();
  }
  Context ctx;
  Program p;
  TensorId loss = NO_TENSOR;
  bool ok = false;
};

int count_ops(const Program& p, Opcode op, Section s) {
  int n = 0;
  for (const Instruction& ins : p.code()) n += ins.op == op && ins.section == s;
  return n;
}

TEST(RecurrentGradRule, OneBackwardInstructionAndZerosForUnreadOutputs) {
  const std::pair<Opcode, Opcode> ops[] = {
      {Opcode::LSTM, Opcode::LSTM_BWD}, {Opcode::GRU, Opcode::GRU_BWD}, {Opcode::RNN, Opcode::RNN_BWD}};
  for (const auto& [op, bwd] : ops) {
    SCOPED_TRACE(op_info(op).mnemonic);
    const unsigned all = op == Opcode::LSTM ? 7 : 3;
    for (unsigned reads : {all, 1u, 2u}) {
      Layer l(op, reads);
      ASSERT_TRUE(l.ok);
      const Result<std::vector<TensorId>> gr = grad(l.p, l.loss, {l.p.find("w"), l.p.find("r"), l.p.find("x")});
      ASSERT_TRUE(gr.is_ok()) << gr.status().message();
      EXPECT_EQ(count_ops(l.p, bwd, Section::BACKWARD), 1) << reads;
      // One FILL seeds the loss's gradient; one more per output the loss does not read.
      const int unread = __builtin_popcount(all & ~reads);
      EXPECT_EQ(count_ops(l.p, Opcode::FILL, Section::BACKWARD), 1 + unread) << reads;
      for (TensorId d : gr.value()) EXPECT_NE(d, NO_TENSOR);
    }
  }
}

TEST(RecurrentGradRule, NoGradientWithRespectToLengths) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {4, 2, 3});
  Var lens = g.input("lens", {2}, DType::I32);
  Var w = g.param("w", {1, 3, 3}), r = g.param("r", {1, 3, 3}), b = g.param("b", {1, 6});
  Var y = g.record(Opcode::RNN, {x, w, r, b, lens}, {{"lens", nnasm::imm_i(1)}}, Loc::here());
  Var loss = reduce_sum(reshape(y, {-1}), 0);
  ASSERT_TRUE(g.status()) << g.status().message();
  const Result<std::vector<TensorId>> gr = grad(p, loss.id(), {x.id(), lens.id()});
  ASSERT_TRUE(gr.is_ok()) << gr.status().message();
  EXPECT_EQ(count_ops(p, Opcode::RNN_BWD, Section::BACKWARD), 1);
  // The lengths' gradient is zero (integers): autodiff's FILL, not an output of RNN_BWD.
  const TensorId dl = gr.value()[1];
  ASSERT_NE(dl, NO_TENSOR);
  for (const Instruction& ins : p.code()) {
    if (std::find(ins.out.begin(), ins.out.end(), dl) != ins.out.end()) {
      EXPECT_EQ(ins.op, Opcode::FILL);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Training through the layer

// A sequence classifier: the layer over x [7, 6, 5] (hidden 9; bidirectional and batch-first
// for GRU, lengths for RNN), its last h through LINEAR to 3 classes, SOFTMAX_CE, Adam.
struct Classifier {
  Classifier(Opcode op, Isa isa) : ctx(5), p(ctx) {
    ctx.set_jit(JitConfig{isa != Isa::REF, isa});
    Graph g(p);
    const bool gru = op == Opcode::GRU, rnn = op == Opcode::RNN;
    const int64_t G = op == Opcode::LSTM ? 4 : gru ? 3 : 1, H = 9, D = gru ? 2 : 1;
    Var x = g.input("x", gru ? Shape{6, 7, 5} : Shape{7, 6, 5});
    Var labels = g.input("labels", {6}, DType::I32);
    std::vector<Var> in = {x, g.param("w", {D, G * H, 5}, {InitKind::UNIFORM, -0.3, 0.3}),
                           g.param("r", {D, G * H, H}, {InitKind::UNIFORM, -0.3, 0.3}),
                           g.param("b", {D, 2 * G * H}, {InitKind::UNIFORM, -0.3, 0.3})};
    std::vector<std::pair<std::string, Imm>> imms;
    if (gru) imms = {{"direction", nnasm::imm_i(imm_choice(op, "direction", "bidirectional"))}, {"batch_first", nnasm::imm_i(1)}};
    if (rnn) {
      in.push_back(g.input("lens", {6}, DType::I32));
      imms = {{"lens", nnasm::imm_i(1)}};
    }
    g.record(op, in, imms, Loc::here());
    if (!g.status()) return;
    Var last(&g, p.code().back().out[1]);
    Var logits = linear(reshape(last, {gru ? 6 : D * 6, gru ? D * H : H}), 3);
    g.output(softmax_ce(logits, labels), "loss");
    ok = g.status() && make_trainable(p, p.find("loss"), adam(0.02));
    if (!ok) return;
    auto made = Executor::prepare(p);
    ok = static_cast<bool>(made);
    if (!ok) return;
    ex = std::move(made.value());
    Tensor* xt = ex->tensor("x");
    for (int64_t i = 0; i < xt->numel(); ++i) xt->f32()[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)));
    for (int32_t i = 0; i < 6; ++i) ex->tensor("labels")->i32()[i] = i % 3;
    if (rnn)
      for (int32_t i = 0; i < 6; ++i) ex->tensor("lens")->i32()[i] = 7 - i;
  }
  float loss() const { return ex->tensor("loss")->f32()[0]; }
  Context ctx;
  Program p;
  std::unique_ptr<Executor> ex;
  bool ok = false;
};

TEST(RecurrentBwdJit, TrainsAsTheReferenceAtEveryLevel) {
  for (Opcode op : {Opcode::LSTM, Opcode::GRU, Opcode::RNN}) {
    SCOPED_TRACE(op_info(op).mnemonic);
    Classifier ref(op, Isa::REF);
    ASSERT_TRUE(ref.ok);
    ref.ex->train_step();
    const float first = ref.loss();
    for (int step = 0; step < 30; ++step) ref.ex->train_step();
    EXPECT_LT(ref.loss(), 0.5f * first) << "the loss should fall: " << first << " -> " << ref.loss();
    const std::string bwd = fmt::format("f32_{}_bwd__", op == Opcode::LSTM ? "lstm" : op == Opcode::GRU ? "gru" : "rnn");
    for (Isa isa : jit_levels()) {
      SCOPED_TRACE(isa_name(isa));
      Classifier m(op, isa);
      ASSERT_TRUE(m.ok);
      int found = 0;
      for (size_t i = 0; i < m.p.code().size(); ++i) {
        if (m.p.code()[i].op != Opcode::LSTM_BWD && m.p.code()[i].op != Opcode::GRU_BWD &&
            m.p.code()[i].op != Opcode::RNN_BWD)
          continue;
        ++found;
        EXPECT_EQ(m.ex->kernel_name(i), bwd + isa_name(isa) + "_gemm");
      }
      EXPECT_EQ(found, 1);
      for (int step = 0; step < 31; ++step) m.ex->train_step();
      EXPECT_NEAR(m.loss(), ref.loss(), 1e-3 + 1e-2 * ref.loss());
      for (const char* name : {"w", "r", "b"}) {
        const Tensor* a = m.ex->tensor(name);
        const Tensor* e = ref.ex->tensor(name);
        double worst = 0;
        for (int64_t i = 0; i < a->numel(); ++i) worst = std::max(worst, std::fabs(double(a->f32()[i]) - e->f32()[i]));
        EXPECT_LT(worst, 2e-3) << name;
      }
    }
  }
}

}  // namespace
}  // namespace nnasm::test
