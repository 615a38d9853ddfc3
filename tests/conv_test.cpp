// CONV2D beyond the parity and gradient tables: the generated kernels really run for the forward
// pass and both gradient products at every JIT level, and the shell function's errors.
#include <cmath>
#include <functional>

#include <gtest/gtest.h>

#include "engine/executor.h"
#include "engine/optimizer.h"
#include "shell/shell.h"
#include "tests/jit_levels.h"

namespace nnasm {
namespace {

// At every JIT level: records a model whose output is "loss", makes it trainable (SGD),
// prepares it, hands the executor to `check`, then runs a training step to a finite loss.
void at_every_level(const std::function<void(Graph&)>& record, const std::function<void(Isa, const Executor&)>& check) {
  for (Isa isa : jit_levels()) {
    SCOPED_TRACE(isa_name(isa));
    Context ctx;
    ctx.set_jit(JitConfig{true, isa});
    Program p(ctx);
    Graph g(p);
    record(g);
    ASSERT_TRUE(g.status()) << g.status().message();
    ASSERT_TRUE(make_trainable(p, p.find("loss"), sgd(0.01)));
    auto ex = Executor::prepare(p);
    ASSERT_TRUE(ex) << ex.status().message();
    check(isa, *ex.value());
    ex.value()->train_step();
    EXPECT_TRUE(std::isfinite(ex.value()->tensor("loss")->f32()[0]));
  }
}

// The kernels the instructions with opcode `op` of the executor's program run, in order.
std::vector<std::string> kernels_of(const Executor& ex, Opcode op) {
  std::vector<std::string> k;
  for (size_t i = 0; i < ex.program().code().size(); ++i)
    if (ex.program().code()[i].op == op) k.push_back(ex.kernel_name(i));
  return k;
}

TEST(Conv2d, GeneratedKernelsRunForwardAndBackward) {
  at_every_level(
      [](Graph& g) {
        Var x = g.input("x", {2, 1, 28, 28});
        Var labels = g.input("labels", {2}, DType::I32);
        Conv2dOptions o;
        o.pad = {2, 2};
        o.act = Activation::RELU;
        Var c1 = conv2d(x, 6, {5, 5}, o);
        o.pad = {0, 0};
        o.stride = {2, 2};
        Var c2 = conv2d(c1, 16, {5, 5}, o);
        g.output(softmax_ce(linear(reshape(c2, {2, 16 * 12 * 12}), 10), labels), "loss");
      },
      [](Isa isa, const Executor& ex) {
        int conv = 0;
        const Program& run = ex.program();
        for (size_t i = 0; i < run.code().size(); ++i) {
          const Opcode op = run.code()[i].op;
          if (op != Opcode::CONV2D && op != Opcode::CONV2D_BWD_DATA && op != Opcode::CONV2D_BWD_WEIGHT) continue;
          ++conv;
          const std::string k = ex.kernel_name(i);
          EXPECT_NE(k.find("conv2d"), std::string::npos) << run.code()[i].info().mnemonic << ": " << k;
          // Generated for this level or, for the direct weight gradient (ymm code at both levels,
          // see ops/conv/conv_direct.h), for AVX2 under an AVX-512 cap; never above the cap.
          EXPECT_TRUE(k.find(isa_name(isa)) != std::string::npos ||
                      (isa == Isa::AVX512 && k.find("bwd_weight_direct__avx2") != std::string::npos))
              << k;
        }
        // Two forward convolutions, two weight gradients, one data gradient (x needs none).
        EXPECT_EQ(conv, 5);
      });
}

// A depthwise convolution runs its own kernel forward at strides 1 and 2 and, at stride 1, for
// the data gradient, at every level; the strided data gradient and the weight gradients take the
// general path.
TEST(Conv2d, DepthwiseRunsItsOwnKernel) {
  at_every_level(
      [](Graph& g) {
        Conv2dOptions o;
        o.pad = {1, 1};
        o.act = Activation::RELU;
        // The first layer gives the depthwise ones an input gradient to compute.
        Var c1 = conv2d(g.input("x", {2, 8, 13, 13}), 8, {3, 3}, o);
        o.groups = 8;
        Var c2 = conv2d(c1, 8, {3, 3}, o);
        o.stride = {2, 2};
        g.output(reduce_mean(reshape(conv2d(c2, 8, {3, 3}, o), {2 * 8 * 7 * 7}), 0), "loss");
      },
      [](Isa, const Executor& ex) {
        std::vector<std::string> depthwise, strided;
        for (size_t i = 0; i < ex.program().code().size(); ++i) {
          const std::string k = ex.kernel_name(i);
          if (k.find("depthwise") == std::string::npos) continue;
          depthwise.push_back(ex.program().code()[i].info().mnemonic);
          if (k.find("_s2x2_") != std::string::npos) strided.push_back(depthwise.back());
        }
        EXPECT_EQ(depthwise, (std::vector<std::string>{"CONV2D", "CONV2D", "CONV2D_BWD_DATA"}));
        EXPECT_EQ(strided, (std::vector<std::string>{"CONV2D"}));
      });
}

// A 3×3 stride-1 convolution over enough tiles and channels runs Winograd's F(2×2, 3×3) forward at
// every JIT level (its gradients keep their kernels); one of few output channels does not; a 7×7
// stride-2 stem on 3 channels runs the direct kernel at stride 2.
TEST(Conv2d, WinogradAndStridedStemRun) {
  at_every_level(
      [](Graph& g) {
        Conv2dOptions o;
        o.pad = {1, 1};
        o.act = Activation::RELU;
        Var c1 = conv2d(g.input("x", {1, 8, 13, 11}), 12, {3, 3}, o);
        Var c2 = conv2d(c1, 4, {3, 3}, o);
        o.stride = {2, 2};
        o.pad = {3, 3};
        Var c3 = conv2d(g.input("x2", {1, 3, 20, 18}), 6, {7, 7}, o);
        g.output(add(reduce_mean(reshape(c2, {4 * 13 * 11}), 0), reduce_mean(reshape(c3, {6 * 10 * 9}), 0)), "loss");
      },
      [](Isa, const Executor& ex) {
        const std::vector<std::string> fwd = kernels_of(ex, Opcode::CONV2D);
        ASSERT_EQ(fwd.size(), 3u);
        EXPECT_EQ(fwd[0].rfind("f32_conv2d_winograd__", 0), 0u) << fwd[0];
        EXPECT_EQ(fwd[1].find("winograd"), std::string::npos) << fwd[1];
        EXPECT_EQ(fwd[2].rfind("f32_conv2d_direct_bias_relu__", 0), 0u) << fwd[2];
        EXPECT_NE(fwd[2].find("_s2x2_"), std::string::npos) << fwd[2];
      });
}

// Maps of one vector a row take the direct kernel's flat mode: 3×3 over many channels (where
// im2col + GEMM ran before it) and over few (row mode before), at both levels; a 12-wide map on
// AVX-512 only (AVX2 has two vectors a row: row mode); a 1×1 on 7×7 within one column block on
// AVX-512 (seven vectors on AVX2: GEMM), and on 14×14 the GEMM at both levels. Their gradients
// keep their direct kernels.
TEST(Conv2d, SmallMapsRunTheFlatDirectKernel) {
  at_every_level(
      [](Graph& g) {
        Conv2dOptions o;
        o.pad = {1, 1};
        o.act = Activation::RELU;
        Var c1 = conv2d(g.input("x", {1, 33, 7, 7}), 17, {3, 3}, o);
        Var c2 = conv2d(c1, 9, {1, 1});
        Var c3 = conv2d(g.input("x2", {1, 31, 12, 12}), 5, {3, 3}, o);
        Var c4 = conv2d(g.input("x3", {1, 17, 7, 7}), 3, {3, 3}, o);
        Var c5 = conv2d(g.input("x4", {1, 20, 14, 14}), 6, {1, 1});
        g.output(add(add(add(reduce_mean(reshape(c2, {9 * 7 * 7}), 0), reduce_mean(reshape(c3, {5 * 12 * 12}), 0)),
                         reduce_mean(reshape(c4, {3 * 7 * 7}), 0)),
                     reduce_mean(reshape(c5, {6 * 14 * 14}), 0)),
                 "loss");
      },
      [](Isa isa, const Executor& ex) {
        std::vector<std::string> fwd, bwd;
        for (size_t i = 0; i < ex.program().code().size(); ++i) {
          const Instruction& ins = ex.program().code()[i];
          if (ins.op == Opcode::CONV2D) fwd.push_back(ex.kernel_name(i));
          if (ins.op == Opcode::CONV2D_BWD_DATA || ins.op == Opcode::CONV2D_BWD_WEIGHT) bwd.push_back(ex.kernel_name(i));
        }
        ASSERT_EQ(fwd.size(), 5u);
        const bool avx512 = isa == Isa::AVX512;
        const std::string gemm = std::string("f32_conv2d__") + isa_name(isa) + "_";
        const std::string flat = "f32_conv2d_direct_flat_", row = "f32_conv2d_direct_bias";
        const std::string level = std::string("__") + isa_name(isa) + "_";
        EXPECT_EQ(fwd[0].rfind(flat, 0), 0u) << fwd[0];
        EXPECT_EQ(fwd[1].rfind(avx512 ? flat : gemm, 0), 0u) << fwd[1];
        EXPECT_EQ(fwd[2].rfind(avx512 ? flat : row, 0), 0u) << fwd[2];
        EXPECT_EQ(fwd[3].rfind(flat, 0), 0u) << fwd[3];
        EXPECT_EQ(fwd[4].rfind(gemm, 0), 0u) << fwd[4];
        for (const std::string& k : fwd) EXPECT_NE(k.find(level), std::string::npos) << k;
        // Five weight gradients and c2's data gradient (the inputs need none), all direct.
        EXPECT_EQ(bwd.size(), 6u);
        for (const std::string& k : bwd) EXPECT_NE(k.find("direct"), std::string::npos) << k;
      });
}

TEST(Conv2d, ShellAndShapeErrorsNameTheProblem) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {1, 3, 8, 8});
  Conv2dOptions o;
  o.groups = 2;
  EXPECT_FALSE(conv2d(x, 4, {3, 3}, o).valid());
  EXPECT_NE(g.status().message().find("groups=2 must divide the 3 input channels"), std::string::npos)
      << g.status().message();

  Program q(ctx);
  Graph h(q);
  Var y = h.input("y", {1, 3, 4, 4});
  EXPECT_FALSE(conv2d(y, 4, {7, 7}).valid());
  EXPECT_NE(h.status().message().find("does not fit input"), std::string::npos) << h.status().message();

  Program r(ctx);
  Graph k(r);
  Var z = k.input("z", {1, 3, 4, 4});
  Conv2dOptions bad;
  bad.stride = {0, 1};
  EXPECT_FALSE(conv2d(z, 4, {3, 3}, bad).valid());
  EXPECT_NE(k.status().message().find("stride must be at least 1"), std::string::npos) << k.status().message();
}

}  // namespace
}  // namespace nnasm

namespace nnasm {
namespace {

// In an inference program at each JIT level, the winograd and nchwc passes hand their
// convolutions to generated kernels (never the reference), the weights' transforms run in the
// derive section, and the results are the plain program's.
TEST(Conv2d, InferencePassesRunGeneratedKernels) {
  for (Isa isa : jit_levels()) {
    if (isa == Isa::REF) continue;
    SCOPED_TRACE(isa_name(isa));
    std::vector<float> y[2];
    for (int opt : {0, 1}) {
      Context ctx;
      ctx.set_jit(JitConfig{true, isa});
      ctx.set_opt_level(opt);
      Program p(ctx);
      Graph g(p);
      Conv2dOptions o;
      o.pad = {1, 1};
      o.act = Activation::RELU;
      Var a = conv2d(g.input("x", {1, 16, 14, 14}), 16, {3, 3}, o);  // Winograd: 49 tiles
      o.stride = {2, 2};
      Var b = conv2d(a, 32, {3, 3}, o);  // strided: blocked
      o.stride = {1, 1};
      o.groups = 32;
      Var c = conv2d(b, 32, {3, 3}, o);  // depthwise, on a blocked input
      g.output(add(c, b), "y");
      ASSERT_TRUE(g.status()) << g.status().message();
      auto made = Executor::prepare(p);
      ASSERT_TRUE(made) << made.status().message();
      Executor& ex = *made.value();
      for (int64_t i = 0; i < 16 * 14 * 14; ++i) ex.tensor("x")->f32()[i] = std::sin(0.37f * static_cast<float>(i));
      ex.run();
      const Tensor* t = ex.tensor("y");
      y[opt].assign(t->f32(), t->f32() + t->numel());
      if (!opt) continue;
      const std::string level = isa == Isa::AVX512 ? "__avx512" : "__avx2";
      for (Opcode op : {Opcode::CONV2D_WINOGRAD, Opcode::CONV2D_NCHWC, Opcode::DWCONV2D_NCHWC, Opcode::TO_NCHWC, Opcode::TO_NCHW}) {
        const std::vector<std::string> k = kernels_of(ex, op);
        ASSERT_EQ(k.size(), 1u) << op_info(op).mnemonic;
        EXPECT_NE(k[0].find(level), std::string::npos) << k[0];
      }
      const auto [db, de] = ex.program().section_range(Section::DERIVE);
      EXPECT_EQ(de - db, 3u);  // one transform and two packings
    }
    ASSERT_EQ(y[0].size(), y[1].size());
    for (size_t i = 0; i < y[0].size(); ++i) EXPECT_NEAR(y[0][i], y[1][i], 1e-4 + 1e-4 * std::fabs(y[0][i])) << i;
  }
}

}  // namespace
}  // namespace nnasm
