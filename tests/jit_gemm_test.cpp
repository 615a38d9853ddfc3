// The generated GEMM/GEMV/dot kernels of MATMUL and LINEAR against the reference kernels, at every
// ISA level this machine has: sizes around the vector width, the tile and the K block, all four
// transpose combinations, batches with broadcasting. Each case runs through Program + Executor
// on a context with the JIT on (at one level) and on one with it off, and checks that the kernel
// that ran is the generated one, that nothing was written past the output (guard band), that two
// runs agree bitwise, and that the result matches: exactly for small-integer inputs (every
// product and partial sum is then exact in fp32), within K·1e-6 of Σ|a·b| for real ones. The
// reference kernels are checked on their own too: a row of their result is bitwise the same in
// any batch, at any place in it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "engine/executor.h"
#include "isa/activation.h"
#include "isa/program.h"
#include "jit/cpu.h"
#include "jit/gemm.h"
#include "tests/jit_levels.h"

namespace nnasm {
namespace {

constexpr uint32_t GUARD = 0x7fa5a5a5u;  // a NaN payload no kernel computes

std::vector<Isa> isa_levels() {
  std::vector<Isa> v;
  for (Isa i : {Isa::AVX2, Isa::AVX512})
    if (i <= cpu_info().best) v.push_back(i);
  return v;
}

Shape shape(std::vector<int64_t> d) {
  Shape s;
  s.rank = static_cast<int>(d.size());
  for (int i = 0; i < s.rank; ++i) s.dims[i] = d[i];
  return s;
}

struct Case {
  Opcode op;
  std::vector<Shape> in;
  bool ta = false, tb = false;
  int64_t k = 0;  // inner dimension, for the tolerance
  Activation act = Activation::NONE;  // LINEAR's fused activation
  double act_alpha = 0;
  std::string str() const {
    std::string s = op == Opcode::MATMUL ? "MATMUL" : "LINEAR";
    for (const Shape& x : in) s += " " + x.str();
    if (act != Activation::NONE) s += fmt::format(" act={} act_alpha={}", activation_name(act), act_alpha);
    if (ta) s += " transA";
    if (tb) s += " transB";
    return s;
  }
};

Case matmul(std::vector<int64_t> a, std::vector<int64_t> b, bool ta, bool tb) {
  const int64_t k = ta ? a[a.size() - 2] : a.back();
  return Case{Opcode::MATMUL, {shape(a), shape(b)}, ta, tb, k};
}
Case linear(std::vector<int64_t> x, int64_t out) {
  const int64_t k = x.back();
  return Case{Opcode::LINEAR, {shape(x), shape({k, out}), shape({out})}, false, false, k};
}

struct Outcome {
  std::string error;   // empty when it ran
  std::string kernel;  // of the one instruction
  std::vector<float> y, y_again;
  bool guard_ok = true;
};

Outcome failed(const std::string& why) {
  Outcome o;
  o.error = why;
  return o;
}

// Builds the one-instruction program on a context with `jit`, fills the inputs, the output and
// its padding (with GUARD), runs twice.
Outcome run(const Case& c, const std::vector<std::vector<float>>& inputs, JitConfig jit) {
  Outcome o;
  Context ctx;
  ctx.set_jit(jit);
  std::string log;
  ctx.set_log([&](const std::string& m) { log += m + "\n"; });
  Program p(ctx);
  std::vector<TensorId> ids;
  for (size_t i = 0; i < c.in.size(); ++i) {
    TensorDesc d;
    d.name = fmt::format("x{}", i);
    d.type = TensorType{DType::F32, c.in[i]};
    d.role = Role::INPUT;
    Result<TensorId> id = p.declare(d);
    if (!id) return failed(id.status().message());
    ids.push_back(id.value());
  }
  Instruction ins = make_instruction(c.op, ids, {});
  if (c.op == Opcode::MATMUL) {
    Imm t;
    t.type = ImmType::BOOL;
    t.i = c.ta;
    EXPECT_TRUE(set_imm(ins, "transA", t));
    t.i = c.tb;
    EXPECT_TRUE(set_imm(ins, "transB", t));
  }
  if (c.act != Activation::NONE) {
    Imm a;
    a.type = ImmType::ENUM;
    a.i = static_cast<int64_t>(c.act);
    EXPECT_TRUE(set_imm(ins, "act", a));
    EXPECT_TRUE(set_imm(ins, "act_alpha", imm_f(c.act_alpha)));
  }
  Result<std::vector<TensorId>> outs = p.append_new(ins);
  if (!outs) return failed(outs.status().message());
  p.mark_output(outs.value()[0]);
  Result<std::unique_ptr<Executor>> ex = Executor::prepare(p);
  if (!ex) return failed(ex.status().message());
  if (!log.empty()) return failed("engine log: " + log);
  o.kernel = ex.value()->kernel_name(0);
  for (size_t i = 0; i < ids.size(); ++i)
    std::memcpy(ctx.at(ids[i]).f32(), inputs[i].data(), inputs[i].size() * 4);
  Tensor& y = ctx.at(outs.value()[0]);
  const size_t n = static_cast<size_t>(y.numel()), words = std::max<size_t>(16, (n + 15) / 16 * 16);
  uint32_t* yw = static_cast<uint32_t*>(y.data.data());
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < words; ++i) yw[i] = GUARD;
    ex.value()->run();
    for (size_t i = n; i < words; ++i) o.guard_ok &= yw[i] == GUARD;
    (pass ? o.y_again : o.y).assign(y.f32(), y.f32() + n);
  }
  return o;
}

std::vector<std::vector<float>> inputs_for(const Case& c, std::mt19937& rng, bool integers) {
  std::uniform_int_distribution<int> small(-4, 4);
  std::uniform_real_distribution<float> real(-1.f, 1.f);
  std::vector<std::vector<float>> in;
  for (const Shape& s : c.in) {
    std::vector<float> v(static_cast<size_t>(s.numel()));
    for (float& x : v) x = integers ? static_cast<float>(small(rng)) : real(rng);
    in.push_back(std::move(v));
  }
  return in;
}

// The kernel name the plan should pick (jit/gemm_plan.cpp): dot products for up to 8 rows
// with transB, GEMV for a few rows without, the tiled GEMM otherwise.
std::string expected_kernel_prefix(const Case& c, Isa isa, int64_t rows) {
  std::string op = c.op == Opcode::MATMUL ? "matmul" : "linear";
  if (c.act != Activation::NONE) op += std::string("_") + activation_name(c.act);
  const std::string pre = fmt::format("f32_{}__{}_", op, isa_name(isa));
  const bool avx512 = isa == Isa::AVX512;
  if (c.tb && rows <= 8) return pre + fmt::format("dot_m{}", rows);
  if (!c.tb && rows <= (avx512 ? 14 : 5)) return pre + fmt::format("gemv_m{}", rows);
  return pre + (avx512 ? "14x32" : "6x16");
}

// Runs `c` at `isa` and against the reference, with integer and with real inputs. `rows` is M
// as the kernel sees it (batch folded in), for the kernel-name check; 0 skips that check.
void check(const Case& c, Isa isa, int64_t rows, std::mt19937& rng) {
  SCOPED_TRACE(fmt::format("{} on {}", c.str(), isa_name(isa)));
  for (bool integers : {true, false}) {
    const std::vector<std::vector<float>> in = inputs_for(c, rng, integers);
    const Outcome jit = run(c, in, JitConfig{true, isa});
    const Outcome ref = run(c, in, JitConfig{false, isa});
    ASSERT_EQ(jit.error, "");
    ASSERT_EQ(ref.error, "");
    ASSERT_EQ(ref.kernel, "ref");
    ASSERT_NE(jit.kernel, "ref");
    if (rows) {
      EXPECT_EQ(jit.kernel.rfind(expected_kernel_prefix(c, isa, rows), 0), 0u) << jit.kernel;
    }
    EXPECT_TRUE(jit.guard_ok) << "guard band overwritten";
    ASSERT_EQ(jit.y.size(), ref.y.size());
    EXPECT_EQ(std::memcmp(jit.y.data(), jit.y_again.data(), jit.y.size() * 4), 0) << "two runs differ";
    std::vector<float> mag;
    if (!integers) {
      std::vector<std::vector<float>> abs_in = in;
      for (auto& v : abs_in)
        for (float& x : v) x = std::fabs(x);
      mag = run(c, abs_in, JitConfig{false, isa}).y;
    }
    int bad = 0;
    for (size_t i = 0; i < jit.y.size(); ++i) {
      // A smooth activation: the sum's error passed on (|f'| ≤ 1.13), and vmath's few ulp
      // against the reference's libm.
      const bool smooth = c.act >= Activation::ELU && c.act != Activation::CLIPPED_RELU;
      const double tol = (integers ? 0 : (smooth ? 1.2e-6 : 1e-6) * static_cast<double>(c.k) * mag[i]) +
                         (smooth ? 1e-6 * std::max(1.0, std::fabs(static_cast<double>(ref.y[i]))) : 0);
      const bool ok = std::fabs(static_cast<double>(jit.y[i]) - ref.y[i]) <= tol;
      if (!ok && bad++ < 5)
        ADD_FAILURE() << fmt::format("{} inputs, element {}: got {}, reference {}", integers ? "integer" : "real", i,
                                     jit.y[i], ref.y[i]);
    }
    if (bad) return;
  }
}

const std::vector<int64_t> SIZES = {1, 2, 3, 4, 5, 7, 15, 16, 17, 31, 33, 64, 65, 127, 200};

// M × N over the size list, K walking through it too; every transpose combination.
TEST(JitGemm, MatmulSizesAndTransposes) {
  std::mt19937 rng(1);
  for (Isa isa : isa_levels())
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      for (size_t i = 0; i < SIZES.size(); ++i)
        for (size_t j = 0; j < SIZES.size(); ++j) {
          const int64_t m = SIZES[i], n = SIZES[j], k = SIZES[(i + 2 * j + t) % SIZES.size()];
          check(matmul(ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k},
                       tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, ta, tb),
                isa, m, rng);
          if (HasFatalFailure()) return;
        }
    }
}

// K across the unroll, vector and K-block boundaries (the K block is 256).
TEST(JitGemm, MatmulInnerDimensions) {
  std::mt19937 rng(2);
  std::vector<int64_t> ks = SIZES;
  for (int64_t k : {8, 9, 255, 256, 257, 300, 520, 784}) ks.push_back(k);
  for (Isa isa : isa_levels())
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      for (int64_t k : ks)
        for (auto [m, n] : {std::pair<int64_t, int64_t>{1, 33}, {3, 17}, {20, 45}}) {
          check(matmul(ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k},
                       tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, ta, tb),
                isa, m, rng);
          if (HasFatalFailure()) return;
        }
    }
}

// Row counts around the GEMV/dot thresholds (AVX2: 5 / 8, AVX-512: 14 / 8) and the L1 ways
// (GEMV packs more than 8 rows of A); wide N (several column chunks).
TEST(JitGemm, FewRows) {
  std::mt19937 rng(6);
  const int64_t ns[] = {1, 17, 100, 300, 513}, ks[] = {1, 3, 9, 64, 129, 784};
  for (Isa isa : isa_levels())
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      int c = 0;
      for (int64_t m : {5, 6, 7, 8, 9, 12, 13, 14, 15})
        for (int64_t n : ns) {
          const int64_t k = ks[c++ % 6];
          check(matmul(ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k},
                       tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, ta, tb),
                isa, m, rng);
          if (HasFatalFailure()) return;
        }
    }
}

// The MLP shapes (batch 1 and 64), and N over the 512-column block.
TEST(JitGemm, LargeShapes) {
  std::mt19937 rng(3);
  for (Isa isa : isa_levels()) {
    for (int64_t m : {1, 64}) {
      check(linear({m, 784}, 256), isa, m, rng);
      check(matmul({m, 784}, {784, 256}, false, false), isa, m, rng);
      check(matmul({784, m}, {256, 784}, true, true), isa, m, rng);
    }
    check(matmul({64, 256}, {784, 256}, false, true), isa, 64, rng);  // dx of the first layer
    check(matmul({64, 784}, {64, 256}, true, false), isa, 784, rng);  // its dW
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      check(matmul(ta ? std::vector<int64_t>{40, 21} : std::vector<int64_t>{21, 40},
                   tb ? std::vector<int64_t>{1100, 40} : std::vector<int64_t>{40, 1100}, ta, tb),
            isa, 21, rng);
    }
    // Operands whose consecutive reads lie a page or more apart are packed (B with N = 1100
    // above): A with a long K, Aᵀ with a long M; the other transposes read them in place.
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      for (auto [m, k] : {std::pair<int64_t, int64_t>{21, 1100}, {1100, 40}}) {
        check(matmul(ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k},
                     tb ? std::vector<int64_t>{37, k} : std::vector<int64_t>{k, 37}, ta, tb),
              isa, m, rng);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// B read in place (rows under a page) and larger than half an L2: the tiled kernel prefetches
// B's rows ahead (its name ends in _pf), with the same results; a column tail too (AVX2 packs B
// there instead). Smaller B is not prefetched.
TEST(JitGemm, LargeBReadInPlaceIsPrefetched) {
  std::mt19937 rng(14);
  const int64_t l2 = cpu_info().l2_bytes > 0 ? cpu_info().l2_bytes : int64_t(1) << 20;
  const int64_t k = std::min<int64_t>(l2 / (512 * 4) + 1, 8192);  // B a whole L2 at 512 columns
  for (Isa isa : isa_levels()) {
    for (auto [rows, n, prefetched] : {std::tuple<int64_t, int64_t, bool>{k, 512, true}, {k, 500, isa == Isa::AVX512},
                                       {64, 512, false}}) {
      const Case c = matmul({37, rows}, {rows, n}, false, false);
      check(c, isa, 37, rng);
      if (HasFatalFailure()) return;
      const Outcome o = run(c, inputs_for(c, rng, true), JitConfig{true, isa});
      const bool pf = o.kernel.size() > 3 && o.kernel.compare(o.kernel.size() - 3, 3, "_pf") == 0;
      EXPECT_EQ(pf, prefetched) << o.kernel << " for " << c.str() << ", L2 " << (l2 >> 10) << " KiB";
    }
  }
}

TEST(JitGemm, LinearSizes) {
  std::mt19937 rng(4);
  for (Isa isa : isa_levels())
    for (size_t i = 0; i < SIZES.size(); ++i)
      for (size_t j = 0; j < SIZES.size(); j += 2) {
        const int64_t m = SIZES[i], n = SIZES[j], k = SIZES[(i + j + 5) % SIZES.size()];
        check(linear({m, k}, n), isa, m, rng);
        if (HasFatalFailure()) return;
      }
  for (Isa isa : isa_levels()) check(linear({2, 3, 17}, 33), isa, 6, rng);  // rows = 2·3
}

// The fused activation: GEMV and tiled shapes, N tails, several K blocks (the activation only
// after the last), at every ISA, for relu and smooth ones, against the reference.
TEST(JitGemm, LinearActivations) {
  std::mt19937 rng(7);
  const std::pair<Activation, double> acts[] = {{Activation::RELU, 0},       {Activation::GELU_TANH, 0},
                                                {Activation::SIGMOID, 0},    {Activation::LEAKYRELU, 0.1},
                                                {Activation::CLIPPED_RELU, 2}, {Activation::SWISH, 1.5},
                                                {Activation::GELU, 0},       {Activation::ELU, 0.7},
                                                {Activation::TANH, 0}};
  const int64_t shapes[][3] = {{1, 7, 33},  {3, 17, 5},   {5, 300, 17},  {13, 64, 200}, {20, 45, 33},
                               {64, 520, 70}, {7, 784, 16}, {33, 257, 1}, {200, 9, 65},
                               {40, 257, 45}};
  for (Isa isa : isa_levels())
    for (const auto& [act, alpha] : acts)
      for (const auto& sh : shapes) {
        Case c = linear({sh[0], sh[1]}, sh[2]);
        c.act = act;
        c.act_alpha = alpha;
        check(c, isa, sh[0], rng);
        if (HasFatalFailure()) return;
      }
}

// Batch dimensions: equal, broadcast on either side, broadcast against each other, folded into
// M (one B under a stack of row-major A).
TEST(JitGemm, BatchedMatmul) {
  std::mt19937 rng(5);
  for (Isa isa : isa_levels())
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      auto a = [&](std::vector<int64_t> batch, int64_t m, int64_t k) {
        batch.push_back(ta ? k : m);
        batch.push_back(ta ? m : k);
        return batch;
      };
      auto b = [&](std::vector<int64_t> batch, int64_t k, int64_t n) {
        batch.push_back(tb ? n : k);
        batch.push_back(tb ? k : n);
        return batch;
      };
      check(matmul(a({3}, 5, 7), b({3}, 7, 9), ta, tb), isa, 0, rng);
      check(matmul(a({2, 3}, 17, 9), b({}, 9, 33), ta, tb), isa, 0, rng);
      check(matmul(a({}, 4, 20), b({4}, 20, 3), ta, tb), isa, 4, rng);
      check(matmul(a({2, 1}, 3, 16), b({1, 3}, 16, 40), ta, tb), isa, 3, rng);
      check(matmul(a({2, 1, 4}, 2, 5), b({3, 1}, 5, 18), ta, tb), isa, 2, rng);
      check(matmul(a({6}, 1, 31), b({1}, 31, 2), ta, tb), isa, 0, rng);
      if (HasFatalFailure()) return;
    }
}

// beta = 1: the kernel adds op(A)·op(B) into what C holds, on every kernel shape that takes it
// (GEMV, tiled with and without transposes, two K blocks), called directly on raw buffers with
// integer values so that the sum is exact; a guard band after C stays untouched.
TEST(JitGemm, AccumulatesIntoC) {
  struct Shape3 {
    int64_t m, n, k;
    bool ta, tb;
  };
  const Shape3 shapes[] = {{1, 37, 19, false, false}, {3, 50, 70, false, true},  {20, 37, 300, false, false},
                           {17, 33, 9, true, false},  {15, 40, 260, true, true}, {64, 100, 150, false, true}};
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-3, 3);
  for (Isa isa : jit_levels()) {
    for (const Shape3& s : shapes) {
      SCOPED_TRACE(fmt::format("m{} n{} k{} ta{} tb{} on {}", s.m, s.n, s.k, s.ta, s.tb, isa_name(isa)));
      GemmJitDesc d;
      d.op = "matmul";
      d.m = s.m, d.n = s.n, d.k = s.k, d.trans_a = s.ta, d.trans_b = s.tb, d.accumulate = true;
      KernelCache cache;
      auto k = jit_gemm(d, isa, cache);
      ASSERT_TRUE(k && k.value()) << (k ? "no kernel" : k.status().message());
      EXPECT_NE(k.value()->name().find("_acc"), std::string::npos) << k.value()->name();
      std::vector<float> a(s.m * s.k), b(s.k * s.n), c(s.m * s.n + 16);
      for (float& x : a) x = static_cast<float>(small(rng));
      for (float& x : b) x = static_cast<float>(small(rng));
      for (float& x : c) x = static_cast<float>(small(rng));
      std::vector<float> want(c.begin(), c.end());
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j)
          for (int64_t p = 0; p < s.k; ++p)
            want[i * s.n + j] += (s.ta ? a[p * s.m + i] : a[i * s.k + p]) * (s.tb ? b[j * s.k + p] : b[p * s.n + j]);
      AlignedBuffer scratch(jit_gemm_scratch_bytes(d) + 64);
      const void* in[] = {a.data(), b.data()};
      void* out[] = {c.data()};
      KernelArgs args{in, out, nullptr, nullptr, nullptr, 2, 1, scratch.data(), nullptr, scratch.data()};
      k.value()->fn()(&args);
      for (size_t i = 0; i < c.size(); ++i) ASSERT_EQ(c[i], want[i]) << "element " << i;
    }
  }
}

// One product for the tests that call kernels and their parts directly: its shape,
// transposes and epilogue, and random operands with C's 16 guard floats past it.
struct DirectCase {
  int64_t m, n, k;
  bool ta, tb, bias, acc;
  Activation act;
  GemmJitDesc desc() const {
    GemmJitDesc d;
    d.op = "matmul";
    d.m = m, d.n = n, d.k = k, d.trans_a = ta, d.trans_b = tb, d.bias = bias, d.accumulate = acc, d.act = act;
    return d;
  }
  std::string str(Isa isa) const {
    return fmt::format("m{} n{} k{} ta{} tb{} bias{} acc{} {} on {}", m, n, k, ta, tb, bias, acc, activation_name(act),
                       isa_name(isa));
  }
};

struct DirectOperands {
  std::vector<float> a, b, bias, c0;
  DirectOperands(const DirectCase& s, std::mt19937& rng)
      : a(s.m * s.k), b(s.k * s.n), bias(s.n), c0(s.m * s.n + 16) {
    std::uniform_real_distribution<float> real(-1.f, 1.f);
    for (auto* v : {&a, &b, &bias, &c0})
      for (float& x : *v) x = real(rng);
  }
  // Runs `k` on these operands into `c`.
  void run(const JitKernel& k, std::vector<float>& c, void* scratch, void* shared, RunState* state) const {
    const void* in[] = {a.data(), b.data(), bias.data()};
    void* out[] = {c.data()};
    KernelArgs args{in, out, nullptr, nullptr, nullptr, 3, 1, scratch, state, shared};
    k.fn()(&args);
  }
};

// A GEMV with a large B sums K in segments; its parallel parts take consecutive segments, and
// the last part to finish adds the others' sums into C (jit/gemm.h). Called directly,
// the parts in either order (so that each part is the last one once) give C bitwise equal to
// the whole kernel's, with a bias, activations, N tails, Aᵀ and beta = 1; the part counter ends
// at 0; and the result matches a double-precision sum.
TEST(JitGemm, KSplitPartsMatchTheWholeKernel) {
  const DirectCase cases[] = {{1, 256, 784, false, false, true, false, Activation::RELU},
                              {3, 37, 2000, false, false, true, false, Activation::GELU},
                              {5, 130, 600, true, false, false, false, Activation::NONE},
                              {2, 100, 1000, false, false, false, true, Activation::NONE},
                              {1, 1000, 300, false, false, true, false, Activation::SIGMOID}};
  std::mt19937 rng(11);
  for (Isa isa : jit_levels()) {
    for (const DirectCase& s : cases) {
      SCOPED_TRACE(s.str(isa));
      const GemmJitDesc d = s.desc();
      KernelCache cache;
      auto whole = jit_gemm(d, isa, cache);
      ASSERT_TRUE(whole && whole.value()) << (whole ? "no kernel" : whole.status().message());
      EXPECT_NE(whole.value()->name().find("gemv_m" + std::to_string(s.m) + "_k"), std::string::npos)
          << whole.value()->name();
      const DirectOperands o(s, rng);
      const size_t scratch_bytes = jit_gemm_scratch_bytes(d);
      std::vector<float> want = o.c0;
      AlignedBuffer scratch(scratch_bytes + 64);
      RunState state;
      o.run(*whole.value(), want, scratch.data(), scratch.data(), &state);
      // Against double precision: C = act(op(A)·B + bias [+ C]).
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j) {
          double sum = s.bias ? o.bias[j] : 0, mag = std::fabs(sum);
          if (s.acc) sum += o.c0[i * s.n + j], mag += std::fabs(o.c0[i * s.n + j]);
          for (int64_t p = 0; p < s.k; ++p) {
            const double x = (s.ta ? o.a[p * s.m + i] : o.a[i * s.k + p]) * double(o.b[p * s.n + j]);
            sum += x;
            mag += std::fabs(x);
          }
          const double ref = s.act == Activation::RELU      ? std::max(sum, 0.0)
                             : s.act == Activation::GELU    ? 0.5 * sum * (1 + std::erf(sum / std::sqrt(2.0)))
                             : s.act == Activation::SIGMOID ? 1 / (1 + std::exp(-sum))
                                                            : sum;
          ASSERT_NEAR(want[i * s.n + j], ref, 2e-6 * s.k * mag + 1e-5 * std::fabs(ref)) << "element " << i << "," << j;
        }
      for (size_t i = s.m * s.n; i < want.size(); ++i) ASSERT_EQ(want[i], o.c0[i]) << "guard " << i;
      const int most = jit_gemm_parts(d, isa, 64);
      ASSERT_GE(most, 2);
      // Along K whatever the shape, then as jit_gemm_parts splits it (K or columns).
      for (auto [n_parts, along_k] : {std::pair{2, true}, {3, true}, {2, false}, {3, false}, {most, false}}) {
        SCOPED_TRACE(along_k ? "along K" : "as jit_gemm_part splits");
        std::vector<std::shared_ptr<const JitKernel>> parts;
        for (int p = 0; p < n_parts; ++p) {
          const GemmJitDesc part = jit_gemm_part(d, isa, p, n_parts, along_k);
          if (along_k) {
            EXPECT_EQ(part.k_parts, n_parts);
          }
          auto k = jit_gemm(part, isa, cache);
          ASSERT_TRUE(k && k.value()) << "part " << p << " of " << n_parts;
          parts.push_back(k.value());
        }
        for (bool reverse : {false, true}) {
          std::vector<float> c = o.c0;
          AlignedBuffer all(((scratch_bytes + 63) / 64 * 64) * n_parts + 64);
          for (int q = 0; q < n_parts; ++q) {
            const int p = reverse ? n_parts - 1 - q : q;
            char* own = static_cast<char*>(all.data()) + p * ((scratch_bytes + 63) / 64 * 64);
            o.run(*parts[p], c, own, all.data(), &state);
          }
          EXPECT_EQ(state.parts_done, 0u);
          ASSERT_EQ(std::memcmp(c.data(), want.data(), c.size() * 4), 0)
              << n_parts << " parts" << (reverse ? ", last to first" : "");
        }
      }
    }
  }
}

// How a GEMV in K segments splits for 2 threads: along K where a column split would not pay
// (one vector wide; a product too small to split its columns; B too large for one thread's L2
// but not for two), by columns otherwise (more rows; B that one L2 holds; B past two L2s).
TEST(JitGemm, GemvSplitsAlongKWhereColumnsWouldNotPay) {
  struct Case {
    int64_t m, n, k;
    bool along_k;
    const char* why;
  };
  std::vector<Case> cases = {{1, 8, 30000, true, "one vector wide"},
                             {1, 128, 784, true, "under 256 KFLOP: no column split"},
                             {4, 128, 256, false, "4 rows: 256 KFLOP, 128 KiB of B"}};
  // B as a share of one thread's L2, 512 columns wide.
  const int64_t l2 = cpu_info().l2_bytes;
  auto rows = [&](double share) { return static_cast<int64_t>(share * static_cast<double>(l2) / (512 * 4)); };
  if (l2 >= (int64_t(1) << 20)) cases.push_back({1, 512, rows(0.5), false, "half an L2"});
  if (l2 >= (int64_t(512) << 10)) {  // smaller, 0.9 of it is too little to split at all
    cases.push_back({1, 512, rows(0.9), true, "0.9 of an L2"});
    cases.push_back({1, 512, rows(1.9), true, "1.9 L2s"});
    cases.push_back({1, 512, rows(3), false, "three L2s"});
  }
  for (Isa isa : jit_levels()) {
    for (const Case& c : cases) {
      SCOPED_TRACE(
          fmt::format("{}x{}·{}x{} on {}, L2 {} KiB: {}", c.m, c.k, c.k, c.n, isa_name(isa), l2 >> 10, c.why));
      const GemmJitDesc d = DirectCase{c.m, c.n, c.k, false, false, false, false, Activation::NONE}.desc();
      ASSERT_EQ(jit_gemm_parts(d, isa, 2), 2);
      for (int p = 0; p < 2; ++p) {
        const GemmJitDesc part = jit_gemm_part(d, isa, p, 2);
        EXPECT_EQ(part.k_parts, c.along_k ? 2 : 1);
        EXPECT_EQ(part.n_end != 0, !c.along_k);
      }
    }
  }
}

// A trained layer's forward product with K under one K block (256 → 128 at batch 64): with
// two_k_blocks its whole kernel sums K in two blocks, so that 2 parts can split along K (each
// reading its own rows of the weight), bitwise as the whole; without, there is no K split.
TEST(JitGemm, TwoKBlocksLetATrainedLayerSplitAlongK) {
  const DirectCase s{64, 128, 256, false, false, true, false, Activation::RELU};
  std::mt19937 rng(13);
  for (Isa isa : jit_levels()) {
    SCOPED_TRACE(s.str(isa));
    GemmJitDesc d = s.desc();
    KernelCache cache;
    EXPECT_FALSE(jit_gemm(jit_gemm_part(d, isa, 0, 2, true), isa, cache).value()) << "one K block: no K split";
    d.two_k_blocks = true;
    auto whole = jit_gemm(d, isa, cache);
    ASSERT_TRUE(whole && whole.value());
    const DirectOperands o(s, rng);
    const size_t stride = (jit_gemm_scratch_bytes(d) + 63) / 64 * 64;
    std::vector<float> want = o.c0;
    AlignedBuffer one(stride + 64);
    RunState state;
    o.run(*whole.value(), want, one.data(), one.data(), &state);
    for (bool reverse : {false, true}) {
      std::vector<float> c = o.c0;
      AlignedBuffer all(stride * 3 + 64);
      for (int q = 0; q < 2; ++q) {
        const int p = reverse ? 1 - q : q;
        auto k = jit_gemm(jit_gemm_part(d, isa, p, 2, true), isa, cache);
        ASSERT_TRUE(k && k.value()) << "part " << p;
        o.run(*k.value(), c, static_cast<char*>(all.data()) + (p + 1) * stride, all.data(), &state);
      }
      EXPECT_EQ(state.parts_done, 0u);
      ASSERT_EQ(std::memcmp(c.data(), want.data(), c.size() * 4), 0) << (reverse ? "last to first" : "first to last");
    }
  }
}

// Tiled products split into parallel parts: rows when M ≥ N (each part its own contiguous rows
// of C), columns otherwise (more slices than threads where each has work enough); from 4 parts, a row split that packs B (Bᵀ, or rows a page or more
// apart) as a grid of row blocks cut into column slices. Called directly, each part on its own
// scratch, the parts together give C bitwise equal to the whole kernel's, for every transpose,
// with a bias and an activation; nothing past C is written.
TEST(JitGemm, TiledPartsMatchTheWholeKernel) {
  const DirectCase cases[] = {{784, 256, 64, true, false, false, false, Activation::NONE},
                              {300, 37, 70, false, false, true, false, Activation::RELU},
                              {97, 45, 300, false, true, false, false, Activation::NONE},
                              {130, 130, 33, true, true, true, false, Activation::TANH},
                              {64, 256, 784, false, false, true, false, Activation::RELU},
                              {40, 1100, 30, false, true, false, false, Activation::NONE},
                              {1100, 1030, 50, false, false, true, false, Activation::RELU},
                              // A packed too (rows a page apart): each grid part packs its rows.
                              {300, 200, 1030, false, true, false, false, Activation::NONE}};
  std::mt19937 rng(12);
  for (Isa isa : jit_levels()) {
    for (const DirectCase& s : cases) {
      SCOPED_TRACE(s.str(isa));
      const GemmJitDesc d = s.desc();
      KernelCache cache;
      auto whole = jit_gemm(d, isa, cache);
      ASSERT_TRUE(whole && whole.value()) << (whole ? "no kernel" : whole.status().message());
      const DirectOperands o(s, rng);
      const size_t scratch_bytes = (jit_gemm_scratch_bytes(d) + 63) / 64 * 64 + 64;
      RunState state;
      auto run = [&](const JitKernel& k, std::vector<float>& c) {
        AlignedBuffer scratch(scratch_bytes);
        o.run(k, c, scratch.data(), scratch.data(), &state);
      };
      std::vector<float> want = o.c0;
      run(*whole.value(), want);
      for (size_t i = s.m * s.n; i < want.size(); ++i) ASSERT_EQ(want[i], o.c0[i]) << "guard " << i;
      for (int threads : {2, 3, 4, 5, 8, 16}) {
        const int n_parts = jit_gemm_parts(d, isa, threads);
        ASSERT_GT(n_parts, 1) << threads << " threads";
        // A column split with 2 MFLOP a slice or more runs as up to 4 slices a thread, which the
        // pool balances; anything else as at most a part a thread.
        if (s.m < s.n) {
          ASSERT_LE(n_parts, 4 * threads);
          if (threads == 2 && 2 * s.m * s.n * s.k >= 8 * (int64_t(2) << 20)) {
            EXPECT_GT(n_parts, threads) << "slices";
          }
        } else {
          ASSERT_LE(n_parts, threads);
        }
        // Rows split as a grid only where B is packed (Bᵀ, or 1030 columns: rows a page apart),
        // and always for the near-square ones at an even count of parts from 4 (where two column
        // slices read less of A and B than rows alone: n/2·|B| + 2·|A| < n·|B| + |A|).
        const bool packed = s.m >= s.n && (s.tb || s.n >= 1024);
        const bool grid = packed && n_parts >= 4 && n_parts % 2 == 0 && n_parts * s.n > 2 * s.m;
        bool sliced = false;
        std::vector<float> c = o.c0;
        for (int q = n_parts - 1; q >= 0; --q) {
          const GemmJitDesc part = jit_gemm_part(d, isa, q, n_parts);
          EXPECT_EQ(part.m_end != 0, s.m >= s.n) << "rows split when M ≥ N";
          if (s.m >= s.n) sliced |= part.n_end != 0;
          auto k = jit_gemm(part, isa, cache);
          ASSERT_TRUE(k && k.value()) << "part " << q << " of " << n_parts;
          run(*k.value(), c);
        }
        ASSERT_EQ(std::memcmp(c.data(), want.data(), c.size() * 4), 0) << n_parts << " parts";
        if (!packed) {
          EXPECT_FALSE(sliced) << n_parts << " parts: rows alone";
        }
        if (grid) {
          EXPECT_TRUE(sliced) << n_parts << " parts: a grid";
        }
      }
    }
  }
}

// The reference GEMM (the JIT off) sums each element of C in an order fixed by K and the
// transposes alone (ops/linalg/gemm.cpp), so a row of the result is bitwise the row computed alone
// (M = 1), whatever the batch around it and wherever it sits: MATMUL with every transpose and
// LINEAR, K and N across the vector, tile and block sizes, M across the tile sizes and B's
// packing threshold. A batch of M takes rows first, first + 1, … (wrapping) of a pool of 64, for
// two values of first, so that every place holds two different rows.
TEST(RefGemm, ARowIsTheSameInAnyBatchAtAnyPlace) {
  constexpr int64_t POOL = 64;
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> real(-1.f, 1.f);
  const JitConfig ref{false, Isa::AVX512};
  for (int t = 0; t < 5; ++t) {  // MATMUL's four transpose combinations, then LINEAR
    const bool lin = t == 4, ta = !lin && (t & 1), tb = !lin && (t & 2);
    for (int64_t k : {1, 7, 300, 784})
      for (int64_t n : {1, 5, 33, 300}) {
        std::vector<float> pool(POOL * k), b(k * n), bias(n);
        for (auto* v : {&pool, &b, &bias})
          for (float& x : *v) x = real(rng);
        auto case_for = [&](int64_t m) {
          return lin ? linear({m, k}, n)
                     : matmul(ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k},
                              tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, ta, tb);
        };
        std::vector<std::vector<float>> in = {{}, b};  // A, B[, bias]
        if (lin) in.push_back(bias);
        auto inputs = [&](int64_t m, int64_t first) -> const std::vector<std::vector<float>>& {
          std::vector<float>& a = in[0];
          a.resize(m * k);
          for (int64_t i = 0; i < m; ++i)
            for (int64_t p = 0; p < k; ++p) (ta ? a[p * m + i] : a[i * k + p]) = pool[(first + i) % POOL * k + p];
          return in;
        };
        std::vector<std::vector<float>> alone(POOL);
        for (int64_t r = 0; r < POOL; ++r) {
          const Outcome o = run(case_for(1), inputs(1, r), ref);
          ASSERT_EQ(o.error, "");
          ASSERT_EQ(o.kernel, "ref");
          alone[r] = o.y;
        }
        for (int64_t m : {2, 4, 5, 7, 13, 64})
          for (int64_t first : {0, 29}) {
            const Case c = case_for(m);
            const Outcome o = run(c, inputs(m, first), ref);
            ASSERT_EQ(o.error, "");
            ASSERT_TRUE(o.guard_ok) << c.str();
            for (int64_t i = 0; i < m; ++i)
              ASSERT_EQ(std::memcmp(o.y.data() + i * n, alone[(first + i) % POOL].data(), n * 4), 0)
                  << c.str() << ": pool row " << (first + i) % POOL << " at place " << i;
          }
      }
  }
}

}  // namespace
}  // namespace nnasm
