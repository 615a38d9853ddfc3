// DROPOUT's generated kernel (ops/random/dropout_jit.cpp) against its reference kernel, at every
// ISA level the machine has: bitwise the same output over sizes 1…W−1, W, W+1, 2W+3, 5W+3 and
// large ones, several seeds, run indices, keys and rates (0, tiny, near 1), in training and in
// inference, out of place and in place (y over x's memory), with a guard band after the output
// and the input checked unchanged; the kernel that ran is the generated one (by name); a split
// into parts computes the same bits as one part; and in a program the backward instruction
// redraws the forward's mask at every level.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/autodiff.h"
#include "engine/executor.h"
#include "engine/tensor.h"
#include "ops/random/dropout.h"
#include "shell/shell.h"
#include "tests/jit_levels.h"

namespace nnasm {
namespace {

constexpr uint32_t GUARD = 0x7fa5a5a5u;  // a NaN payload no kernel computes

// What one run draws with: the context's seed, the run index, the instruction's key and rate.
struct Draw {
  uint64_t seed, run;
  int64_t key;
  double rate;
};

std::vector<Draw> draws() {
  return {
      {0x6e6e61736dULL, 0, 0, 0.5},
      {7, 3, 1, 0.1},
      {123456789, 41, -7, 0.9},
      {1, uint64_t(1) << 40, 12345678901LL, 0.25},
      {9, 1, 2, 0.999},
      {5, 5, 5, 1 - 0x1p-24},  // the largest f32 rate below 1: threshold 2³² − 2⁸
      {3, 0, 4, 1e-12},        // threshold 0: every element kept, scaled by 1
      {2, 1, 3, 0.0},          // no draw at all
  };
}

// x of n elements: uniform in [−4, 4], with NaN (quiet and signalling), ±inf, ±0 and a denormal
// among them.
std::vector<float> make_x(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-4, 4);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = u(rng);
  const uint32_t specials[] = {0x7fc00000u, 0x7fa00001u, 0x7f800000u, 0xff800000u, 0x80000000u, 0u, 0x00000003u};
  for (size_t k = 0; k < sizeof(specials) / sizeof(specials[0]); ++k) {
    const size_t i = (k * 7919 + 3) % x.size();
    std::memcpy(&x[i], &specials[k], 4);
  }
  return x;
}

// One DROPOUT instruction as its kernels see it.
struct Call {
  Call(int64_t n, const Draw& d, bool training) : ins(make_instruction(Opcode::DROPOUT, {0}, {1})) {
    type = TensorType{DType::F32, Shape{n}};
    Imm rate, key;
    rate.type = ImmType::F32;
    rate.f = d.rate;
    key.type = ImmType::I64;
    key.i = d.key;
    EXPECT_TRUE(set_imm(ins, "rate", rate));
    EXPECT_TRUE(set_imm(ins, "key", key));
    state.training = training;
    state.seed = d.seed;
    state.run_index = d.run;
  }
  int64_t n() const { return type.shape.numel(); }
  JitRequest request(Isa isa, int part = 0, int n_parts = 1) const {
    return JitRequest{ins, &type, &type, isa, part, n_parts};
  }

  Instruction ins;
  TensorType type;
  RunState state;
};

size_t padded_words(int64_t n) { return static_cast<size_t>((n * 4 + 63) / 64 * 16); }

// Runs `kernels` one after the other on a copy of x (in place: y over x's memory) and returns
// every word of y's storage, padding included (filled with GUARD before). Out of place, a change
// to x's storage fails the test.
std::vector<uint32_t> run(const std::vector<KernelFn>& kernels, Call& c, const std::vector<float>& x, bool in_place) {
  const size_t words = padded_words(c.n());
  AlignedBuffer xb(words * 4), yb(words * 4);
  uint32_t* xw = static_cast<uint32_t*>(xb.data());
  for (size_t i = 0; i < words; ++i) xw[i] = GUARD;
  std::memcpy(xw, x.data(), x.size() * 4);
  const std::vector<uint32_t> before(xw, xw + words);
  uint32_t* yw = in_place ? xw : static_cast<uint32_t*>(yb.data());
  if (!in_place) {
    for (size_t i = 0; i < words; ++i) yw[i] = GUARD;
  }
  const void* in[] = {xw};
  void* out[] = {yw};
  const KernelArgs a{in, out, &c.type, &c.type, &c.ins, 1, 1, nullptr, &c.state, nullptr};
  for (KernelFn k : kernels) k(&a);
  if (!in_place) {
    EXPECT_TRUE(std::equal(before.begin(), before.end(), xw)) << "x was modified";
  }
  return std::vector<uint32_t>(yw, yw + words);
}

// The first differing word, described; empty when equal.
std::string first_difference(const std::vector<uint32_t>& want, const std::vector<uint32_t>& got, int64_t n) {
  for (size_t i = 0; i < want.size(); ++i)
    if (want[i] != got[i])
      return fmt::format("{} {}: got {:#010x}, expected {:#010x}",
                         static_cast<int64_t>(i) < n ? "element" : "padding word", i, got[i], want[i]);
  return "";
}

std::shared_ptr<const JitKernel> generate(const JitRequest& r, KernelCache& cache) {
  Result<std::shared_ptr<const JitKernel>> k = op_hooks(Opcode::DROPOUT).jit(r, cache);
  EXPECT_TRUE(k) << k.status().message();
  return k ? k.value() : nullptr;
}

TEST(JitDropout, BitwiseTheReferenceAtEveryLevel) {
  const KernelFn ref = op_hooks(Opcode::DROPOUT).ref;
  for (Isa isa : jit_levels()) {
    const int64_t W = vector_floats(isa);
    std::vector<int64_t> sizes;
    for (int64_t n = 1; n <= W + 1; ++n) sizes.push_back(n);
    for (int64_t n : {2 * W + 3, 5 * W + 3, 9 * W + 5, int64_t{1031}, int64_t{64 * 256}, int64_t{100003}})
      sizes.push_back(n);
    KernelCache cache;
    for (int64_t n : sizes)
      for (const Draw& d : draws())
        for (bool training : {true, false}) {
          SCOPED_TRACE(fmt::format("{} n={} seed={} run={} key={} rate={} training={}", isa_name(isa), n, d.seed, d.run,
                                   d.key, d.rate, training));
          Call c(n, d, training);
          const std::shared_ptr<const JitKernel> k = generate(c.request(isa), cache);
          ASSERT_TRUE(k) << "no kernel";
          ASSERT_EQ(k->name(), fmt::format("f32_dropout__{}", isa_name(isa)));
          const std::vector<float> x = make_x(n, static_cast<uint32_t>(n));
          const std::vector<uint32_t> want = run({ref}, c, x, false);
          ASSERT_EQ(first_difference(want, run({k->fn()}, c, x, false), n), "");
          // In place, the padding is x's guard band.
          ASSERT_EQ(first_difference(want, run({k->fn()}, c, x, true), n), "") << "in place";
        }
  }
}

// A kernel with no run state (a caller outside the executor) copies, as the reference does.
TEST(JitDropout, NoRunStateCopies) {
  for (Isa isa : jit_levels()) {
    Call c(37, draws()[0], true);
    KernelCache cache;
    const std::shared_ptr<const JitKernel> k = generate(c.request(isa), cache);
    ASSERT_TRUE(k);
    const std::vector<float> x = make_x(37, 1);
    const size_t words = padded_words(37);
    AlignedBuffer xb(words * 4), yb(words * 4);
    std::memcpy(xb.data(), x.data(), 37 * 4);
    const void* in[] = {xb.data()};
    void* out[] = {yb.data()};
    const KernelArgs a{in, out, &c.type, &c.type, &c.ins, 1, 1, nullptr, nullptr, nullptr};
    k->fn()(&a);
    EXPECT_EQ(0, std::memcmp(yb.data(), x.data(), 37 * 4)) << isa_name(isa);
  }
}

// The parts the executor splits a large dropout into (the elementwise ops' split): each draws
// from its own first element, so all parts together write the bits of one part.
TEST(JitDropout, PartsAreBitwiseOnePart) {
  const KernelFn ref = op_hooks(Opcode::DROPOUT).ref;
  const PartsFn parts = op_hooks(Opcode::DROPOUT).parts;
  ASSERT_NE(parts, nullptr);
  for (Isa isa : jit_levels())
    for (const auto& [n, n_parts] : {std::pair<int64_t, int>{100000, 2}, {100000, 3}, {200003, 2}, {200003, 5}}) {
      SCOPED_TRACE(fmt::format("{} n={} parts={}", isa_name(isa), n, n_parts));
      Call c(n, draws()[2], true);
      EXPECT_EQ(parts(c.request(isa), n_parts), n_parts);
      KernelCache cache;
      std::vector<KernelFn> fns;
      for (int p = 0; p < n_parts; ++p) {
        const std::shared_ptr<const JitKernel> k = generate(c.request(isa, p, n_parts), cache);
        ASSERT_TRUE(k);
        fns.push_back(k->fn());
      }
      EXPECT_EQ(cache.size(), static_cast<size_t>(n_parts));
      const std::vector<float> x = make_x(n, 11);
      const std::vector<uint32_t> want = run({ref}, c, x, false);
      EXPECT_EQ(first_difference(want, run(fns, c, x, false), n), "");
      EXPECT_EQ(first_difference(want, run(fns, c, x, true), n), "") << "in place";
    }
}

std::vector<float> values(const Executor& ex, const std::string& name) {
  const Tensor* t = ex.tensor(name);
  return std::vector<float>(t->f32(), t->f32() + t->numel());
}

// A training program y = dropout(x), s = Σy, with dx = ∂s/∂x: with x all ones dx is y exactly,
// so the backward instruction redrew the forward's mask. Both dropouts run the generated kernel,
// and y is the reference's, run after run.
TEST(JitDropout, BackwardRedrawsTheForwardMaskAtEveryLevel) {
  struct Built {
    Context ctx{17};
    Program p{ctx};
    std::string dx;
    std::unique_ptr<Executor> ex;
  };
  auto build = [](JitConfig jit) {
    auto b = std::make_unique<Built>();
    b->ctx.set_jit(jit);
    Graph g(b->p);
    Var x = g.input("x", {64, 256});
    Var y = dropout(x, 0.3f);
    g.output(y, "y");
    Var s = reduce_sum(reshape(y, {64 * 256}), 0);
    g.output(s, "s");
    EXPECT_TRUE(g.status()) << g.status().message();
    b->p.set_training(true);
    Result<std::vector<TensorId>> dx = grad(b->p, s.id(), {x.id()});
    EXPECT_TRUE(dx) << dx.status().message();
    b->dx = b->p.desc(dx.value()[0]).name;
    auto ex = Executor::prepare(b->p);
    EXPECT_TRUE(ex) << ex.status().message();
    b->ex = std::move(ex.value());
    Tensor* xt = b->ex->tensor("x");
    for (int64_t i = 0; i < xt->numel(); ++i) xt->f32()[i] = 1.f;
    return b;
  };
  auto ref = build(JitConfig{false, Isa::AVX512});
  for (Isa isa : jit_levels()) {
    auto b = build(JitConfig{true, isa});
    const Program& run = b->ex->program();
    int dropouts = 0;
    for (size_t i = 0; i < run.code().size(); ++i)
      if (run.code()[i].op == Opcode::DROPOUT) {
        ++dropouts;
        EXPECT_EQ(std::string(b->ex->kernel_name(i)), fmt::format("f32_dropout__{}", isa_name(isa)));
      }
    EXPECT_EQ(dropouts, 2);
    for (int r = 0; r < 3; ++r) {
      ref->ex->run(Section::FORWARD);
      b->ex->run(Section::FORWARD);
      b->ex->run(Section::BACKWARD);
      const std::vector<float> y = values(*b->ex, "y");
      EXPECT_EQ(y, values(*b->ex, b->dx)) << isa_name(isa) << " run " << r;
      EXPECT_EQ(0, std::memcmp(y.data(), values(*ref->ex, "y").data(), y.size() * 4)) << isa_name(isa) << " run " << r;
    }
    ref->ex->set_run_index(0);
  }
}

}  // namespace
}  // namespace nnasm
