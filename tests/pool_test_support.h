// What the pooling tests share (tests/pool_test.cpp for NCHW, tests/pool_nchwc_test.cpp for the
// blocked ops): the geometries of the generated kernels' bitwise checks, an input full of
// special values, a run of the pooling ops, the comparison of two outputs bit for bit, and the
// check that autodiff refuses an op without a backward rule by name.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/autodiff.h"
#include "engine/executor.h"
#include "shell/shell.h"

namespace nnasm {

// A pooling geometry for the generated kernels' bitwise checks.
struct PoolGeometry {
  std::vector<int64_t> x, kernel, stride, pad;
  bool ceil;
  const char* what;
};

inline const std::vector<PoolGeometry>& pool_geometries() {
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
inline std::vector<float> special_input(int64_t n, std::mt19937& rng) {
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

// MAXPOOL2D, AVGPOOL2D counting padding and not, and with `global` GLOBAL_AVGPOOL: the NCHW ops
// on x of `shape` [N, C, H, W], or their _NCHWC ops on x [N, Cb, H, W, b], with pg's window, at
// `jit` on `threads` threads. The outputs in that order, and each instruction's kernel name and
// parallel parts.
struct PoolRun {
  std::vector<std::vector<float>> y;
  std::vector<std::string> kernels;
  std::vector<int> parts;
};

inline PoolRun run_pools(const PoolGeometry& pg, const std::vector<int64_t>& shape, const std::vector<float>& x,
                         const JitConfig& jit, int threads, bool global = false) {
  const bool blocked = shape.size() == 5;
  PoolRun r;
  Context ctx;
  ctx.set_jit(jit);
  ctx.set_threads(threads);
  ctx.set_flush_denormals(false);
  Program p(ctx);
  Graph g(p);
  Var in = g.input("x", Shape::of(shape.data(), static_cast<int>(shape.size())));
  std::vector<std::pair<std::string, Imm>> imms = {{"kernel", imm_ints(pg.kernel)},
                                                   {"stride", imm_ints(pg.stride)},
                                                   {"pad", imm_ints(pg.pad)},
                                                   {"ceil_mode", imm_i(pg.ceil)}};
  std::vector<std::string> names = {"max", "avg", "avg_nopad"};
  g.output(g.record(blocked ? Opcode::MAXPOOL2D_NCHWC : Opcode::MAXPOOL2D, {in}, imms, Loc::here()), names[0]);
  imms.push_back({"count_include_pad", imm_i(1)});
  g.output(g.record(blocked ? Opcode::AVGPOOL2D_NCHWC : Opcode::AVGPOOL2D, {in}, imms, Loc::here()), names[1]);
  imms.back().second = imm_i(0);
  g.output(g.record(blocked ? Opcode::AVGPOOL2D_NCHWC : Opcode::AVGPOOL2D, {in}, imms, Loc::here()), names[2]);
  if (global) {
    names.push_back("mean");
    g.output(g.record(blocked ? Opcode::GLOBAL_AVGPOOL_NCHWC : Opcode::GLOBAL_AVGPOOL, {in}, {}, Loc::here()), "mean");
  }
  EXPECT_TRUE(g.status()) << g.status().message();
  auto ex = Executor::prepare(p);
  EXPECT_TRUE(ex) << ex.status().message();
  if (!ex) return r;
  std::memcpy(ex.value()->tensor("x")->f32(), x.data(), x.size() * sizeof(float));
  ex.value()->run();
  for (const std::string& name : names) {
    const Tensor* t = ex.value()->tensor(name);
    r.y.emplace_back(t->f32(), t->f32() + t->numel());
  }
  for (size_t i = 0; i < ex.value()->program().code().size(); ++i) {
    r.kernels.push_back(ex.value()->kernel_name(i));
    r.parts.push_back(ex.value()->parts(i));
  }
  return r;
}

// Whether `got` holds the bits of `want`, element by element. For a sum (`sum`), where `want` is
// NaN `got` need only be NaN: a sum of two NaNs keeps the payload of the add's first operand,
// which the compiler picks for a reference kernel (x first in its vector loop, the sum in its
// scalar one).
inline ::testing::AssertionResult same_pool_bits(const std::vector<float>& want, const std::vector<float>& got,
                                                  bool sum) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << got.size() << " elements, expected " << want.size();
  for (size_t i = 0; i < want.size(); ++i) {
    uint32_t w, g;
    std::memcpy(&w, &want[i], 4);
    std::memcpy(&g, &got[i], 4);
    const bool ok = sum && std::isnan(want[i]) ? std::isnan(got[i]) : w == g;
    if (!ok) return ::testing::AssertionFailure() << "element " << i << ": " << got[i] << " against " << want[i];
  }
  return ::testing::AssertionSuccess();
}

// Whether two runs of the pooling ops gave the same bits (the sums' NaN payloads aside).
inline ::testing::AssertionResult same_bits(const PoolRun& want, const PoolRun& got) {
  if (got.y.size() != want.y.size()) return ::testing::AssertionFailure() << "the run failed";
  for (size_t k = 0; k < want.y.size(); ++k)
    if (auto r = same_pool_bits(want.y[k], got.y[k], k > 0); !r) return r << " (output " << k << ")";
  return ::testing::AssertionSuccess();
}

// Whether grad() of y (the only use of the output of `op`) with respect to `wrt` fails, naming
// the instruction of `op` and saying it has no backward rule.
inline ::testing::AssertionResult refuses_gradient(Program& p, Opcode op, Var y, Var wrt) {
  const Result<std::vector<TensorId>> r = grad(p, y.id(), {wrt.id()});
  if (r.is_ok()) return ::testing::AssertionFailure() << "grad() succeeded";
  const std::string m = r.status().message();
  if (m.find(std::string("(") + op_info(op).mnemonic + " -> ") == std::string::npos ||
      m.find("has no backward rule") == std::string::npos)
    return ::testing::AssertionFailure() << m;
  return ::testing::AssertionSuccess();
}

}  // namespace nnasm
