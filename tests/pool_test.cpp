// Pooling beyond the parity and gradient tables: what the shell functions record (the default
// stride is the kernel), the listing of a pooling program round-trips, the generated forward
// kernels run (by name) and are bitwise the reference kernels on special values at every JIT
// level, a LeNet-5 shaped network trains through MAXPOOL2D_BWD, and autodiff refuses to
// differentiate the _BWD ops by name.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "engine/autodiff.h"
#include "engine/executor.h"
#include "engine/optimizer.h"
#include "serialize/listing.h"
#include "shell/shell.h"
#include "tests/jit_levels.h"
#include "tests/pool_test_support.h"

namespace nnasm {
namespace {

TEST(Pool, ShellRecordsTheKernelAsTheDefaultStride) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {2, 3, 7, 7});
  g.output(max_pool2d(x, {2, 2}), "m");
  g.output(avg_pool2d(x, {3, 3}, {2, 2}, {1, 1}, false), "a");
  g.output(avg_pool2d(x, {3, 2}, {1, 1}), "b");
  ASSERT_TRUE(g.status()) << g.status().message();
  const std::string text = program_print(p);
  EXPECT_NE(text.find("MAXPOOL2D    %x -> %m  kernel=[2,2] stride=[2,2] pad=[0,0] ceil_mode=0  ; f32[2,3,3,3]"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("AVGPOOL2D    %x -> %a  kernel=[3,3] stride=[2,2] pad=[1,1] count_include_pad=0 ceil_mode=0  ; "
                      "f32[2,3,4,4]"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("kernel=[3,2] stride=[1,1] pad=[0,0] count_include_pad=1 ceil_mode=0  ; f32[2,3,5,6]"),
            std::string::npos)
      << text;
  // The listing parses back to itself.
  Context ctx2;
  Program q(ctx2);
  ASSERT_TRUE(program_parse(text, "pool.nnasm", &q));
  EXPECT_EQ(program_print(q), text);
}

// ceil_mode came last in each schema with default 0, so a listing written before it (and a model
// file, which stores its listing) means what it meant: the floor of the output size.
TEST(Pool, ListingsWithoutCeilModeKeepTheirMeaning) {
  const char* old = R"(
input  %x : f32[1,2,7,7]
output %m
output %a

forward:
  MAXPOOL2D  %x -> %m  kernel=[2,2] stride=[2,2] pad=[0,0]
  AVGPOOL2D  %x -> %a  kernel=[3,3] stride=[2,2] pad=[1,1] count_include_pad=1
)";
  Context ctx;
  Program p(ctx);
  ASSERT_TRUE(program_parse(old, "old.nnasm", &p));
  EXPECT_EQ(p.desc(p.find("m")).type.str(), "f32[1,2,3,3]");
  EXPECT_EQ(p.desc(p.find("a")).type.str(), "f32[1,2,4,4]");
  // The same with ceil_mode=1: PyTorch's sizes, the window that would start in the padding dropped.
  Context ctx2;
  Program q(ctx2);
  Graph g(q);
  Var x = g.input("x", {1, 2, 7, 7});
  g.output(max_pool2d(x, {2, 2}, {}, {0, 0}, true), "m");
  g.output(avg_pool2d(x, {3, 3}, {2, 2}, {1, 1}, true, true), "a");
  g.output(max_pool2d(g.input("y", {1, 1, 5, 9}), {2, 2}, {2, 2}, {1, 1}, true), "d");
  ASSERT_TRUE(g.status()) << g.status().message();
  EXPECT_EQ(q.desc(q.find("m")).type.str(), "f32[1,2,4,4]");
  EXPECT_EQ(q.desc(q.find("a")).type.str(), "f32[1,2,4,4]");  // (7 + 2 − 3) / 2 is exact
  EXPECT_EQ(q.desc(q.find("d")).type.str(), "f32[1,1,3,5]");
}

TEST(Pool, ShellErrorsNameTheCallerAndTheProblem) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {1, 3, 4, 4});
  const int line = __LINE__ + 1;
  EXPECT_FALSE(max_pool2d(x, {5, 5}).valid());
  const std::string& m = g.status().message();
  EXPECT_NE(m.find("pool_test.cpp:" + std::to_string(line) + ": error: MAXPOOL2D: a 5x5 kernel does not fit input"),
            std::string::npos)
      << m;

  Program q(ctx);
  Graph h(q);
  Var y = h.input("y", {1, 3, 8, 8});
  EXPECT_FALSE(avg_pool2d(y, {2, 2}, {}, {2, 2}).valid());
  EXPECT_NE(h.status().message().find("AVGPOOL2D: pad [2,2] must be at most half the kernel [2,2]"), std::string::npos)
      << h.status().message();
}

// The generated kernels at AVX2 and AVX-512, on padded windows, ceil_mode partial windows,
// strides 1 to 5, the clean-vector loop and edge rows, give every output bit the reference
// kernels give (the max's NaN payloads and the sign of zero included), and they are what ran.
TEST(Pool, GeneratedKernelsAreBitwiseTheReference) {
  std::mt19937 rng(11);
  for (const PoolGeometry& pg : pool_geometries()) {
    SCOPED_TRACE(pg.what);
    int64_t n = 1;
    for (int64_t d : pg.x) n *= d;
    const std::vector<float> x = special_input(n, rng);
    const PoolRun ref = run_pools(pg, pg.x, x, JitConfig{false, Isa::AVX512}, 1);
    for (Isa isa : jit_levels()) {
      SCOPED_TRACE(isa_name(isa));
      const bool split = n >= 64 * 56 * 56;
      const PoolRun got = run_pools(pg, pg.x, x, JitConfig{true, isa}, split ? 2 : 1);
      ASSERT_EQ(got.kernels.size(), 3u);
      const std::string shape = fmt::format("_{}x{}s{}", pg.kernel[0], pg.kernel[1], pg.stride[1]);
      EXPECT_EQ(got.kernels[0], std::string("f32_maxpool2d__") + isa_name(isa) + shape);
      EXPECT_EQ(got.kernels[1], std::string("f32_avgpool2d__") + isa_name(isa) + shape);
      EXPECT_EQ(got.kernels[2], got.kernels[1]);
      if (split) {
        EXPECT_GT(*std::max_element(got.parts.begin(), got.parts.end()), 1);
      }
      EXPECT_TRUE(same_bits(ref, got));
    }
  }
}

// Past the limits of pool_jit_applies (a side of 17, over 64 taps) the reference runs.
TEST(Pool, WindowsPastTheGeneratorsLimitsRunTheReference) {
  const PoolGeometry pg{{1, 2, 20, 20}, {9, 9}, {1, 1}, {1, 1}, false, "81 taps"};
  for (Isa isa : jit_levels()) {
    const PoolRun got = run_pools(pg, pg.x, std::vector<float>(800, 1.f), JitConfig{true, isa}, 1);
    for (const std::string& k : got.kernels) EXPECT_EQ(k, "ref");
  }
}

// LeNet-5 as the Fashion-MNIST sample builds it: two convolutions, each followed by 2x2 max
// pooling, then three linear layers. Twenty Adam steps on one batch cut its loss by far more
// than half (it falls smoothly: the pooling gradients point the right way).
TEST(Pool, LeNetShapedNetworkTrainsThroughMaxPooling) {
  Context ctx(7);
  Program p(ctx);
  Graph g(p);
  const int64_t n = 8;
  Var x = g.input("x", {n, 1, 28, 28});
  Var labels = g.input("labels", {n}, DType::I32);
  Conv2dOptions c1;
  c1.pad = {2, 2};
  c1.act = Activation::RELU;
  Conv2dOptions c2;
  c2.act = Activation::RELU;
  Var h = max_pool2d(conv2d(x, 6, {5, 5}, c1), {2, 2});  // [n,6,14,14]
  h = max_pool2d(conv2d(h, 16, {5, 5}, c2), {2, 2});     // [n,16,5,5]
  LinearOptions relu_opt;
  relu_opt.act = Activation::RELU;
  Var z = linear(linear(linear(reshape(h, {n, 400}), 120, relu_opt), 84, relu_opt), 10);
  g.output(softmax_ce(z, labels), "loss");
  ASSERT_TRUE(g.status()) << g.status().message();
  ASSERT_TRUE(make_trainable(p, p.find("loss"), adam(2e-3)));
  auto ex = Executor::prepare(p);
  ASSERT_TRUE(ex) << ex.status().message();

  const Program& run = ex.value()->program();
  int fwd = 0, bwd = 0;
  for (size_t i = 0; i < run.code().size(); ++i) {
    const Opcode op = run.code()[i].op;
    if (op == Opcode::MAXPOOL2D || op == Opcode::MAXPOOL2D_BWD) {
      (op == Opcode::MAXPOOL2D ? fwd : bwd)++;
      // Both passes are generated (2x2, stride 2, unpadded, even sizes) whenever the JIT is on.
      const bool jit = ctx.jit().enabled && ctx.jit().isa() != Isa::REF;
      const std::string fwd_name = std::string("f32_maxpool2d__") + isa_name(ctx.jit().isa()) + "_2x2s2";
      EXPECT_EQ(ex.value()->kernel_name(i), !jit                      ? "ref"
                                            : op == Opcode::MAXPOOL2D ? fwd_name
                                                                      : "f32_maxpool2d_bwd__avx2_2x2s2");
    }
  }
  EXPECT_EQ(fwd, 2);
  EXPECT_EQ(bwd, 2);

  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0, 1);
  Tensor* xt = ex.value()->tensor("x");
  for (int64_t i = 0; i < xt->numel(); ++i) xt->f32()[i] = u(rng);
  for (int64_t i = 0; i < n; ++i) ex.value()->tensor("labels")->i32()[i] = static_cast<int32_t>(i % 10);
  ex.value()->train_step();
  const float first = ex.value()->tensor("loss")->f32()[0];
  float last = first;
  for (int step = 0; step < 20; ++step) {
    ex.value()->train_step();
    last = ex.value()->tensor("loss")->f32()[0];
  }
  ASSERT_TRUE(std::isfinite(first));
  EXPECT_LT(last, 0.25f * first) << "first " << first << ", last " << last;
}

TEST(Pool, BackwardOpsHaveNoGradientAndSaySo) {
  for (Opcode op : {Opcode::MAXPOOL2D_BWD, Opcode::AVGPOOL2D_BWD}) {
    Context ctx;
    Program p(ctx);
    Graph g(p);
    Var dy = g.input("dy", {1, 2, 2, 2}), x = g.input("x", {1, 2, 4, 4});
    Var dx = g.record(op, {dy, x}, {{"kernel", imm_ints({2, 2})}}, Loc::here());
    Var y = reduce_sum(reshape(dx, {32}));
    ASSERT_TRUE(g.status()) << g.status().message();
    EXPECT_TRUE(refuses_gradient(p, op, y, dy));
  }
}

}  // namespace
}  // namespace nnasm
