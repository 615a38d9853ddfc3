// Pooling beyond the parity and gradient tables: what the shell functions record (the default
// stride is the kernel), the listing of a pooling program round-trips, the generated forward
// kernels run (by name) and are bitwise the reference kernels on special values at every JIT
// level, a LeNet-5 shaped network trains through MAXPOOL2D_BWD, and autodiff refuses to
// differentiate the _BWD ops by name.
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

// A pooling geometry for the generated kernels' bitwise checks.
struct PoolGeometry {
  std::vector<int64_t> x, kernel, stride, pad;
  bool ceil;
  const char* what;
};

const std::vector<PoolGeometry>& pool_geometries() {
  static const std::vector<PoolGeometry> g = {
      {{1, 3, 17, 23}, {3, 3}, {2, 2}, {1, 1}, false, "ResNet's stem: padded 3x3/2"},
      {{2, 3, 15, 16}, {3, 3}, {2, 2}, {1, 1}, true, "ceil_mode: a partial last column"},
      {{1, 2, 14, 29}, {3, 3}, {2, 2}, {0, 0}, true, "ceil_mode unpadded: a partial last row and column"},
      {{1, 2, 7, 9}, {2, 2}, {2, 2}, {1, 1}, true, "ceil_mode 2x2, padded"},
      {{1, 2, 9, 35}, {3, 3}, {1, 1}, {1, 1}, false, "Inception's 3x3/1 pad 1"},
      {{1, 2, 20, 50}, {3, 3}, {3, 3}, {1, 1}, false, "stride 3"},
      {{1, 2, 21, 80}, {3, 2}, {1, 3}, {1, 1}, true, "3x2 at column stride 3"},
      {{1, 2, 11, 40}, {2, 3}, {3, 5}, {1, 1}, true, "column stride 5"},
      {{1, 1, 6, 70}, {3, 2}, {1, 2}, {1, 1}, false, "3x2 at column stride 2"},
      {{1, 2, 5, 300}, {3, 3}, {1, 1}, {1, 1}, false, "a wide row: the clean vectors in a loop"},
      {{1, 2, 5, 301}, {2, 2}, {2, 2}, {1, 1}, true, "a wide row at stride 2"},
      {{1, 1, 4, 500}, {1, 3}, {1, 3}, {0, 1}, false, "a wide row at stride 3"},
      {{2, 3, 10, 9}, {8, 8}, {1, 1}, {4, 4}, false, "64 taps, four clipped rows each side"},
      {{1, 3, 7, 7}, {7, 7}, {1, 1}, {0, 0}, false, "one window: the whole image"},
      {{1, 2, 1, 1}, {2, 2}, {1, 1}, {1, 1}, true, "a one-element image"},
      {{1, 64, 56, 56}, {3, 3}, {2, 2}, {1, 1}, false, "enough to split over threads"},
  };
  return g;
}

// x for the bitwise checks: small whole numbers (ties), both zeros, NaNs with different payloads
// and signs (the max keeps the window's last one), ±inf, and plain random values.
std::vector<float> special_input(int64_t n, std::mt19937& rng) {
  const uint32_t nans[] = {0x7fc00001u, 0x7fc00002u, 0xffc00003u, 0x7f800005u};
  std::uniform_int_distribution<int> pick(0, 99), small(-3, 3), which(0, 3);
  std::uniform_real_distribution<float> u(-2, 2);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) {
    const int p = pick(rng);
    if (p < 30) v = static_cast<float>(small(rng));
    else if (p < 40) v = p % 2 ? 0.f : -0.f;
    else if (p < 43) std::memcpy(&v, &nans[which(rng)], 4);
    else if (p < 45) v = p % 2 ? INFINITY : -INFINITY;
    else v = u(rng);
  }
  return x;
}

// MAXPOOL2D, AVGPOOL2D counting padding and AVGPOOL2D not counting it, on `pg` at `jit`
// (threads as given): the three outputs and each instruction's kernel name.
struct PoolRun {
  std::vector<std::vector<float>> y;
  std::vector<std::string> kernels;
  int max_parts = 1;
};

PoolRun run_pools(const PoolGeometry& pg, const std::vector<float>& x, const JitConfig& jit, int threads) {
  PoolRun r;
  Context ctx;
  ctx.set_jit(jit);
  ctx.set_threads(threads);
  ctx.set_flush_denormals(false);
  Program p(ctx);
  Graph g(p);
  Var in = g.input("x", Shape::of(pg.x.data(), static_cast<int>(pg.x.size())));
  g.output(max_pool2d(in, pg.kernel, pg.stride, pg.pad, pg.ceil), "max");
  g.output(avg_pool2d(in, pg.kernel, pg.stride, pg.pad, true, pg.ceil), "avg");
  g.output(avg_pool2d(in, pg.kernel, pg.stride, pg.pad, false, pg.ceil), "avg_nopad");
  EXPECT_TRUE(g.status()) << g.status().message();
  auto ex = Executor::prepare(p);
  EXPECT_TRUE(ex) << ex.status().message();
  if (!ex) return r;
  std::memcpy(ex.value()->tensor("x")->f32(), x.data(), x.size() * sizeof(float));
  ex.value()->run();
  for (const char* name : {"max", "avg", "avg_nopad"}) {
    const Tensor* t = ex.value()->tensor(name);
    r.y.emplace_back(t->f32(), t->f32() + t->numel());
  }
  for (size_t i = 0; i < ex.value()->program().code().size(); ++i) {
    r.kernels.push_back(ex.value()->kernel_name(i));
    r.max_parts = std::max(r.max_parts, ex.value()->parts(i));
  }
  return r;
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
    const PoolRun ref = run_pools(pg, x, JitConfig{false, Isa::AVX512}, 1);
    for (Isa isa : jit_levels()) {
      SCOPED_TRACE(isa_name(isa));
      const bool split = n >= 64 * 56 * 56;
      const PoolRun got = run_pools(pg, x, JitConfig{true, isa}, split ? 2 : 1);
      ASSERT_EQ(got.kernels.size(), 3u);
      const std::string shape = fmt::format("_{}x{}s{}", pg.kernel[0], pg.kernel[1], pg.stride[1]);
      EXPECT_EQ(got.kernels[0], std::string("f32_maxpool2d__") + isa_name(isa) + shape);
      EXPECT_EQ(got.kernels[1], std::string("f32_avgpool2d__") + isa_name(isa) + shape);
      EXPECT_EQ(got.kernels[2], got.kernels[1]);
      if (split) {
        EXPECT_GT(got.max_parts, 1);
      }
      ASSERT_EQ(got.y.size(), ref.y.size());
      for (size_t k = 0; k < ref.y.size(); ++k) {
        ASSERT_EQ(got.y[k].size(), ref.y[k].size());
        for (size_t i = 0; i < ref.y[k].size(); ++i) {
          uint32_t want, have;
          std::memcpy(&want, &ref.y[k][i], 4);
          std::memcpy(&have, &got.y[k][i], 4);
          // A sum of two NaNs keeps the payload of the add's first operand, which the compiler
          // picks for the reference (x first in its vector loop, the sum in its scalar one).
          if (k > 0 && std::isnan(ref.y[k][i])) {
            ASSERT_TRUE(std::isnan(got.y[k][i])) << "output " << k << " element " << i;
            continue;
          }
          ASSERT_EQ(have, want) << "output " << k << " element " << i << ": " << got.y[k][i] << " against "
                                << ref.y[k][i];
        }
      }
    }
  }
}

// Past the limits of pool_jit_applies (a side of 17, over 64 taps) the reference runs.
TEST(Pool, WindowsPastTheGeneratorsLimitsRunTheReference) {
  const PoolGeometry pg{{1, 2, 20, 20}, {9, 9}, {1, 1}, {1, 1}, false, "81 taps"};
  for (Isa isa : jit_levels()) {
    const PoolRun got = run_pools(pg, std::vector<float>(800, 1.f), JitConfig{true, isa}, 1);
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
    const Result<std::vector<TensorId>> r = grad(p, y.id(), {dy.id()});
    ASSERT_FALSE(r.is_ok());
    const std::string m = r.status().message();
    EXPECT_NE(m.find(std::string("(") + op_info(op).mnemonic + " -> "), std::string::npos) << m;
    EXPECT_NE(m.find("has no backward rule"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace nnasm
