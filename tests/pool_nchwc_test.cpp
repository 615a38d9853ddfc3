// The blocked pooling ops beyond the parity table: each lane gives the bits the NCHW op gives its
// channel; the generated kernels (blocks of 16 at AVX-512, of 8 at AVX2 and AVX-512) run, by
// name, and are bitwise the reference kernels on special values; the parts over images and
// channel blocks give the bits one part gives; what has no kernel runs the reference; the
// listing round-trips; and autodiff refuses the ops by name.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "serialize/listing.h"
#include "shell/shell.h"
#include "tests/jit_levels.h"
#include "tests/nchwc_blocking.h"
#include "tests/pool_test_support.h"

namespace nnasm {
namespace {

constexpr int64_t CHANNELS[] = {1, 7, 8, 9, 17};
constexpr int64_t BLOCKS[] = {8, 16};

int64_t count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// The shape of pg's x with C channels in blocks of b.
std::vector<int64_t> blocked_shape(const PoolGeometry& pg, int64_t c, int64_t b) {
  return {pg.x[0], (c + b - 1) / b, pg.x[2], pg.x[3], b};
}

// The kernels the blocked ops run at `isa` with blocks of b: AVX-512 code for 16, AVX2 code for 8.
std::vector<std::string> expected_kernels(const PoolGeometry& pg, int64_t b, Isa isa) {
  if (b == 16 && isa < Isa::AVX512) return {"ref", "ref", "ref", "ref"};
  const char* code = b == 16 ? "avx512" : "avx2";
  const std::string window = fmt::format("nchwc{}__{}_{}x{}s{}", b, code, pg.kernel[0], pg.kernel[1], pg.stride[1]);
  return {"f32_maxpool2d_" + window, "f32_avgpool2d_" + window, "f32_avgpool2d_" + window,
          fmt::format("f32_global_avgpool_nchwc{}__{}", b, code)};
}

// On x [N, C, H, W] with C in {1, 7, 8, 9, 17}, blocked with zeros past C: the blocked ops'
// lanes of the channels are the bits the NCHW ops' reference kernels give (GLOBAL_AVGPOOL's
// generated kernel sums in another order, so the reference is the oracle), with the JIT off and
// at every level, where the generated kernel runs.
TEST(PoolNchwc, EachLaneIsTheNchwOp) {
  std::mt19937 rng(5);
  for (const PoolGeometry& pg : pool_geometries())
    for (int64_t c : CHANNELS) {
      SCOPED_TRACE(fmt::format("{}, C = {}", pg.what, c));
      const std::vector<int64_t> shape = {pg.x[0], c, pg.x[2], pg.x[3]};
      const std::vector<float> x = special_input(count(shape), rng);
      const PoolRun nchw = run_pools(pg, shape, x, JitConfig{false, Isa::AVX512}, 1, true);
      ASSERT_EQ(nchw.y.size(), 4u);
      for (int64_t b : BLOCKS) {
        SCOPED_TRACE(fmt::format("b = {}", b));
        const std::vector<float> xb = nchw_to_blocked(x, shape[0], c, shape[2] * shape[3], b);
        std::vector<std::pair<JitConfig, Isa>> configs = {{JitConfig{false, Isa::AVX512}, Isa::REF}};
        for (Isa isa : jit_levels()) configs.push_back({JitConfig{true, isa}, isa});
        for (const auto& [jit, isa] : configs) {
          SCOPED_TRACE(jit.enabled ? isa_name(isa) : "JIT off");
          const PoolRun got = run_pools(pg, blocked_shape(pg, c, b), xb, jit, 1, true);
          ASSERT_EQ(got.y.size(), 4u);
          if (jit.enabled) {
            EXPECT_EQ(got.kernels, expected_kernels(pg, b, isa));
          }
          PoolRun lanes;
          for (size_t k = 0; k < 4; ++k) {
            const int64_t pixels = k == 3 ? 1 : static_cast<int64_t>(nchw.y[k].size()) / (shape[0] * c);
            lanes.y.push_back(blocked_to_nchw(got.y[k], shape[0], c, pixels, b));
          }
          EXPECT_TRUE(same_bits(nchw, lanes));
        }
      }
    }
}

// Special values in every lane (the padding lanes are lanes like the others), with NaNs and
// without: the generated kernels give every bit the reference kernels give, the max's NaN
// payloads and the sign of zero included, and a case large enough splits into parts over images
// and channel blocks.
TEST(PoolNchwc, GeneratedKernelsAreBitwiseTheReference) {
  std::mt19937 rng(13);
  for (const PoolGeometry& pg : pool_geometries())
    for (int64_t b : BLOCKS)
      for (bool nans : {true, false}) {
        SCOPED_TRACE(fmt::format("{}, b = {}{}", pg.what, b, nans ? ", NaNs" : ""));
        const std::vector<int64_t> shape = blocked_shape(pg, pg.x[1], b);
        std::vector<float> x = special_input(count(shape), rng);
        if (!nans) std::replace_if(x.begin(), x.end(), [](float v) { return std::isnan(v); }, -0.f);
        const PoolRun ref = run_pools(pg, shape, x, JitConfig{false, Isa::AVX512}, 1, true);
        const bool split = count(shape) >= 64 * 56 * 56;
        for (Isa isa : jit_levels()) {
          SCOPED_TRACE(isa_name(isa));
          const PoolRun got = run_pools(pg, shape, x, JitConfig{true, isa}, split ? 2 : 1, true);
          EXPECT_EQ(got.kernels, expected_kernels(pg, b, isa));
          if (split && got.kernels[0] != "ref") {
            EXPECT_GT(got.parts[0], 1);
          }
          EXPECT_TRUE(same_bits(ref, got));
        }
      }
}

// Two threads split the planes (images × channel blocks) of every op, and the results are the
// bits one thread gives, at every level.
TEST(PoolNchwc, TwoThreadsAreBitwiseOneThread) {
  const PoolGeometry pg{{2, 256, 28, 28}, {3, 3}, {2, 2}, {1, 1}, true, "ResNet-like, two images"};
  std::mt19937 rng(17);
  for (int64_t b : BLOCKS) {
    const std::vector<int64_t> shape = blocked_shape(pg, pg.x[1], b);
    const std::vector<float> x = special_input(count(shape), rng);
    for (Isa isa : jit_levels()) {
      if (b == 16 && isa < Isa::AVX512) continue;
      SCOPED_TRACE(fmt::format("b = {}, {}", b, isa_name(isa)));
      const PoolRun one = run_pools(pg, shape, x, JitConfig{true, isa}, 1, true);
      const PoolRun two = run_pools(pg, shape, x, JitConfig{true, isa}, 2, true);
      EXPECT_EQ(one.parts, std::vector<int>(4, 1));
      EXPECT_EQ(two.parts, std::vector<int>(4, 2));
      EXPECT_EQ(two.kernels, expected_kernels(pg, b, isa));
      EXPECT_TRUE(same_bits(one, two));
    }
  }
}

// Windows past the generators' limits (a side of 17, over 64 taps) run the reference.
TEST(PoolNchwc, WindowsPastTheGeneratorsLimitsRunTheReference) {
  const PoolGeometry pg{{1, 16, 20, 20}, {9, 9}, {1, 1}, {0, 0}, false, "81 taps"};
  for (Isa isa : jit_levels()) {
    const PoolRun got = run_pools(pg, blocked_shape(pg, 16, 8), std::vector<float>(20 * 20 * 16, 1.f),
                                  JitConfig{true, isa}, 1, true);
    ASSERT_EQ(got.kernels.size(), 4u);
    for (size_t k = 0; k < 3; ++k) EXPECT_EQ(got.kernels[k], "ref");
    EXPECT_EQ(got.kernels[3], "f32_global_avgpool_nchwc8__avx2");
    for (size_t k = 0; k < 4; ++k)
      for (float v : got.y[k]) ASSERT_EQ(v, 1.f);
  }
}

TEST(PoolNchwc, ListingRoundTrips) {
  const char* text = R"(
input  %x : f32[1,2,7,7,16]
output %m
output %a
output %g

forward:
  MAXPOOL2D_NCHWC  %x -> %m  kernel=[3,3] stride=[2,2] pad=[1,1] ceil_mode=1
  AVGPOOL2D_NCHWC  %x -> %a  kernel=[2,2] count_include_pad=0
  GLOBAL_AVGPOOL_NCHWC  %x -> %g
)";
  Context ctx;
  Program p(ctx);
  ASSERT_TRUE(program_parse(text, "nchwc.nnasm", &p));
  EXPECT_EQ(p.desc(p.find("m")).type.str(), "f32[1,2,4,4,16]");
  EXPECT_EQ(p.desc(p.find("a")).type.str(), "f32[1,2,3,3,16]");
  EXPECT_EQ(p.desc(p.find("g")).type.str(), "f32[1,2,1,1,16]");
  const std::string printed = program_print(p);
  Context ctx2;
  Program q(ctx2);
  ASSERT_TRUE(program_parse(printed, "printed.nnasm", &q));
  EXPECT_EQ(program_print(q), printed);
}

// The layout pass leaves training programs in NCHW, so the blocked ops have no backward rule, and
// autodiff says which instruction stops it.
TEST(PoolNchwc, HaveNoGradientAndSaySo) {
  for (Opcode op : {Opcode::MAXPOOL2D_NCHWC, Opcode::AVGPOOL2D_NCHWC, Opcode::GLOBAL_AVGPOOL_NCHWC}) {
    Context ctx;
    Program p(ctx);
    Graph g(p);
    Var x = g.input("x", {1, 1, 4, 4, 8});
    std::vector<std::pair<std::string, Imm>> imms;
    if (op != Opcode::GLOBAL_AVGPOOL_NCHWC) imms.push_back({"kernel", imm_ints({2, 2})});
    Var y = g.record(op, {x}, imms, Loc::here());
    Var loss = reduce_sum(reshape(y, {op == Opcode::GLOBAL_AVGPOOL_NCHWC ? 8 : 32}));
    ASSERT_TRUE(g.status()) << g.status().message();
    EXPECT_TRUE(refuses_gradient(p, op, loss, x)) << op_info(op).mnemonic;
  }
}

}  // namespace
}  // namespace nnasm
