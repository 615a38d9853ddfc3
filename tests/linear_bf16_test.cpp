// LINEAR_BF16 beyond the parity sweep: odd and tail sizes, each activation, at every JIT level and
// with the JIT off, against the naive loop of tests/linear_bf16_naive.h, with the kernel that ran
// asserted (vdpbf16ps where the CPU has AVX512_BF16); x's rounding to bf16 (ties to even) and NaN;
// both AVX-512 kernels (vdpbf16ps and the widening one CPUs without AVX512_BF16 get) called
// directly; each shape error; autodiff's refusal (no gradient); act-fusion into it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "engine/autodiff.h"
#include "engine/passes/pass.h"
#include "isa/activation.h"
#include "jit/aligned_buffer.h"
#include "ops/elementwise/activation.h"
#include "ops/op.h"
#include "ops/quant/linear_bf16.h"
#include "serialize/listing.h"
#include "tests/linear_bf16_naive.h"
#include "tests/op_harness.h"
#include "tests/run_levels.h"

namespace nnasm::test {
namespace {

// The kernel at each level: the reference with the JIT off; at AVX-512 the vdpbf16ps kernel
// exactly where the CPU has AVX512_BF16.
void expect_bf16_kernel(const OpOutput& y, const Level& lv) {
  expect_kernel(y, lv, "bf16_linear");
  if (lv.isa == "avx512") {
    EXPECT_EQ(y.kernel.find("dpbf16") != std::string::npos, cpu_info().avx512_bf16) << y.kernel;
  }
}

// x's shape for `rows` rows of `in`: rank 1 for a single row, leading dims flattened otherwise.
Shape x_shape(int64_t rows, int64_t in) {
  if (rows == 1) return Shape{in};
  if (rows == 8) return Shape{2, 4, in};
  return Shape{rows, in};
}

TEST(LinearBf16, MatchesNaiveLoopAtEveryLevelAndWithJitOff) {
  std::mt19937 rng(31);
  const double alphas[] = {0, 0, 0.1, 1, 6, 0, 0, 0, 0, 0.75};  // per activation (slope, alpha, threshold, beta)
  for (const Level& lv : levels()) {
    int c = 0;
    for (int64_t in : {1, 7, 17, 63, 784})
      for (int64_t out : {1, 5, 16, 31, 100, 259})
        for (int64_t rows : {1, 3, 8}) {
          const Activation act = static_cast<Activation>(c++ % ACTIVATION_COUNT);
          const double alpha = alphas[static_cast<int>(act)];
          const HostTensor x = random_f32(x_shape(rows, in), rng, -2, 2);
          const HostTensor w = random_bf16(Shape{in, out}, rng, -0.5, 0.5);
          const HostTensor b = random_f32(Shape{out}, rng, -1, 1);
          const std::vector<ImmArg> imms{imm_enum("act", activation_name(act)), imm_f("act_alpha", alpha)};
          SCOPED_TRACE(describe(Opcode::LINEAR_BF16, {x, w, b}, imms) + " " + (lv.isa.empty() ? "ref" : lv.isa));
          const OpOutput y = run_op(Opcode::LINEAR_BF16, {x, w, b}, imms, false, lv.cfg);
          ASSERT_TRUE(y.status) << y.status.message();
          // The activation's scalar reference, in f32 as the kernels apply it.
          const auto f = [&](double z) { return act::apply(act, static_cast<float>(z), static_cast<float>(alpha)); };
          EXPECT_TRUE(matches(naive_linear_bf16(x, w, b, f), y));
          expect_bf16_kernel(y, lv);
        }
  }
}

// The kernels called directly, so that the widening AVX-512 kernel runs on a CPU with
// AVX512_BF16 too: every level, with and without vdpbf16ps where the CPU has it, on the sizes
// above; a guard after y.
TEST(LinearBf16, EachKernelVariantMatchesNaiveLoop) {
  std::mt19937 rng(37);
  KernelCache cache;
  for (Isa isa : jit_levels())
    for (bool dpbf16 : {false, true}) {
      if (dpbf16 && (isa != Isa::AVX512 || !cpu_info().avx512_bf16)) continue;
      int c = 0;
      for (int64_t in : {1, 7, 17, 63, 784})
        for (int64_t out : {1, 5, 16, 31, 100, 259})
          for (int64_t rows : {1, 3, 8}) {
            const Activation act = static_cast<Activation>(c++ % ACTIVATION_COUNT);
            const HostTensor x = random_f32(Shape{rows, in}, rng, -2, 2);
            const HostTensor w = random_bf16(Shape{in, out}, rng, -0.5, 0.5);
            const HostTensor b = random_f32(Shape{out}, rng, -1, 1);
            SCOPED_TRACE(describe(Opcode::LINEAR_BF16, {x, w, b}, {}) + " act " + activation_name(act) + " " +
                         isa_name(isa) + (dpbf16 ? " dpbf16" : ""));
            Instruction ins = make_instruction(Opcode::LINEAR_BF16, {0, 1, 2}, {3});
            ASSERT_EQ(apply_imms(&ins, {imm_enum("act", activation_name(act)), imm_f("act_alpha", 0.5)}), "");
            const TensorType types[] = {x.type, w.type, b.type, TensorType{DType::F32, Shape{rows, out}}};
            Result<std::shared_ptr<const JitKernel>> k = linear_bf16_kernel(ins, types, isa, dpbf16, cache);
            ASSERT_TRUE(k) << k.status().message();
            ASSERT_NE(k.value(), nullptr);
            EXPECT_EQ(k.value()->name().find("dpbf16") != std::string::npos, dpbf16) << k.value()->name();
            std::vector<float> xf(x.v.begin(), x.v.end()), bf(b.v.begin(), b.v.end());
            std::vector<float> y(static_cast<size_t>(rows * out + 16), -7.f);
            std::vector<uint16_t> wh;
            for (double v : w.v) wh.push_back(bf16_from_double(v));
            AlignedBuffer scratch(op_hooks(Opcode::LINEAR_BF16).scratch(ins, types, types + 3));
            const void* in_ptrs[] = {xf.data(), wh.data(), bf.data()};
            void* out_ptrs[] = {y.data()};
            const KernelArgs args{in_ptrs, out_ptrs, types, types + 3, &ins, 3, 1, scratch.data(), nullptr, scratch.data()};
            k.value()->fn()(&args);
            const auto f = [&](double z) { return act::apply(act, static_cast<float>(z), 0.5f); };
            OpOutput got;
            got.type = types[3];
            got.v.assign(y.begin(), y.begin() + rows * out);
            got.outs.push_back(HostTensor{types[3], got.v});
            EXPECT_TRUE(matches(naive_linear_bf16(x, w, b, f), got));
            for (size_t i = static_cast<size_t>(rows * out); i < y.size(); ++i) EXPECT_EQ(y[i], -7.f) << "past y: " << i;
          }
    }
}

// On 2 and 3 threads the layer runs in parallel parts (columns, or rows where the columns make
// fewer blocks than threads) and every output bit is the one-thread run's, at every level; odd
// sizes put tails in the last part.
TEST(LinearBf16, ThreadsGiveTheBitsOfOneThread) {
  struct Case {
    int64_t rows, in, out;
  };
  // 1×784×259 and 3×517×300: columns; 9×1029×33 and 64×301×17: rows on 3 threads (2 and 1 blocks
  // of 32 columns at AVX-512), columns or rows on 2.
  const Case cases[] = {{1, 784, 259}, {3, 517, 300}, {9, 1029, 33}, {64, 301, 17}, {1, 1001, 777}};
  std::mt19937 rng(41);
  for (const Level& lv : levels())
    for (const Case& c : cases) {
      const HostTensor x = random_f32(x_shape(c.rows, c.in), rng, -2, 2);
      const HostTensor w = random_bf16(Shape{c.in, c.out}, rng, -0.5, 0.5);
      const HostTensor b = random_f32(Shape{c.out}, rng, -1, 1);
      const std::vector<ImmArg> imms{imm_enum("act", "relu")};
      SCOPED_TRACE(describe(Opcode::LINEAR_BF16, {x, w, b}, imms) + " " + (lv.isa.empty() ? "ref" : lv.isa));
      RunConfig cfg = lv.cfg;
      const OpOutput one = run_op(Opcode::LINEAR_BF16, {x, w, b}, imms, false, cfg);
      ASSERT_TRUE(one.status) << one.status.message();
      EXPECT_TRUE(matches(naive_linear_bf16(x, w, b, [](double z) { return z > 0 ? z : 0; }), one));
      for (int threads : {2, 3}) {
        cfg.threads = threads;
        const OpOutput y = run_op(Opcode::LINEAR_BF16, {x, w, b}, imms, false, cfg);
        ASSERT_TRUE(y.status) << y.status.message();
        expect_bf16_kernel(y, lv);
        // Each case has 2 column blocks or 2 row blocks or more, and work enough to split.
        if (!lv.isa.empty()) {
          EXPECT_GE(y.parts, 2) << threads << " threads, " << y.kernel;
        }
        ASSERT_EQ(one.v.size(), y.v.size());
        for (size_t i = 0; i < y.v.size(); ++i) {
          const float e = static_cast<float>(one.v[i]), g = static_cast<float>(y.v[i]);
          ASSERT_EQ(std::memcmp(&e, &g, 4), 0) << threads << " threads, element " << i << ": " << g << " vs " << e;
        }
      }
    }
}

// The parts hook and the span hook: each part's finished span of y (one row: its columns, in
// whole column blocks) lies side by side with the next, together all of y; x is read whole. A
// small layer stays one part; a split along k, which the kernel cannot do, gets no kernel and no
// span; a part count the hook would not choose gets no kernel.
TEST(LinearBf16, PartsCoverTheOutputOnce) {
  const OpHooks& h = op_hooks(Opcode::LINEAR_BF16);
  ASSERT_NE(h.parts, nullptr);
  ASSERT_NE(h.span, nullptr);
  KernelCache cache;
  Instruction ins = make_instruction(Opcode::LINEAR_BF16, {0, 1, 2}, {3});
  for (Isa isa : jit_levels()) {
    const int64_t block = isa == Isa::AVX512 ? 128 : 64;  // one row's column block
    const TensorType t[] = {{DType::F32, Shape{1, 784}}, {DType::BF16, Shape{784, 259}}, {DType::F32, Shape{259}},
                            {DType::F32, Shape{1, 259}}};
    for (int threads : {2, 3}) {
      SCOPED_TRACE(std::string(isa_name(isa)) + " " + std::to_string(threads) + " threads");
      const JitRequest whole{ins, t, t + 3, isa};
      const int n = h.parts(whole, threads);
      ASSERT_GE(n, 2);
      ASSERT_LE(n, threads);
      int64_t next = 0;
      for (int p = 0; p < n; ++p) {
        JitRequest r{ins, t, t + 3, isa, p, n};
        int64_t b0 = -1, b1 = -1;
        ASSERT_TRUE(h.span(r, true, 0, &b0, &b1)) << p;
        EXPECT_EQ(b0, next) << p;
        EXPECT_TRUE(b1 == 259 || b1 % block == 0) << b1;
        EXPECT_GT(b1, b0);
        next = b1;
        ASSERT_TRUE(h.span(r, false, 0, &b0, &b1)) << p;
        EXPECT_EQ(b0, 0);
        EXPECT_EQ(b1, 784);
        Result<std::shared_ptr<const JitKernel>> k = h.jit(r, cache);
        ASSERT_TRUE(k);
        EXPECT_NE(k.value(), nullptr);
        r.split_reduction = true;
        EXPECT_FALSE(h.span(r, false, 0, &b0, &b1));
        k = h.jit(r, cache);
        ASSERT_TRUE(k);
        EXPECT_EQ(k.value(), nullptr);
      }
      EXPECT_EQ(next, 259);
    }
    // 1×64·64×16: too little work to split. 40 parts of 259 columns in at most 5 blocks and 1 row:
    // no kernel.
    const TensorType s[] = {{DType::F32, Shape{1, 64}}, {DType::BF16, Shape{64, 16}}, {DType::F32, Shape{16}},
                            {DType::F32, Shape{1, 16}}};
    EXPECT_EQ(h.parts(JitRequest{ins, s, s + 3, isa}, 2), 1);
    Result<std::shared_ptr<const JitKernel>> k = linear_bf16_kernel(ins, t, isa, false, cache, 0, 40);
    ASSERT_TRUE(k);
    EXPECT_EQ(k.value(), nullptr);
  }
}

// x = 1 + 2⁻⁸ lies halfway between the bf16 values 1 and 1 + 2⁻⁷ and rounds to the even one, 1;
// 1 + 3·2⁻⁸ rounds up to 1 + 2⁻⁶; 1 + 2⁻⁸ + 2⁻²⁰, just above the tie, rounds up. With W = 1 the
// outputs are those values exactly. A NaN in x makes its row's outputs NaN and leaves the other row.
TEST(LinearBf16, RoundsXToNearestEvenAndPropagatesNaN) {
  const double u = std::ldexp(1.0, -8);
  const double NaN = std::numeric_limits<double>::quiet_NaN();
  for (const Level& lv : levels()) {
    SCOPED_TRACE(lv.isa.empty() ? "ref" : lv.isa);
    const HostTensor x = host(DType::F32, Shape{4, 1}, {1 + u, 1 + 3 * u, 1 + u + std::ldexp(1.0, -20), NaN});
    const HostTensor w = host(DType::BF16, Shape{1, 3}, {1, -1, 2});
    const HostTensor b = host(DType::F32, Shape{3}, {0, 0, 0});
    const OpOutput y = run_op(Opcode::LINEAR_BF16, {x, w, b}, {}, false, lv.cfg);
    ASSERT_TRUE(y.status) << y.status.message();
    const double r0 = 1, r1 = 1 + 4 * u, r2 = 1 + 2 * u;
    const std::vector<double> want{r0, -r0, 2 * r0, r1, -r1, 2 * r1, r2, -r2, 2 * r2};
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(y.v[i], want[i]) << i;
    for (size_t i = 9; i < 12; ++i) EXPECT_TRUE(std::isnan(y.v[i])) << i;
    expect_bf16_kernel(y, lv);
  }
}

TEST(LinearBf16, ShapeErrorsNameTheOperand) {
  const TensorType x{DType::F32, Shape{2, 3}}, w{DType::BF16, Shape{3, 4}}, b{DType::F32, Shape{4}};
  auto fails = [](std::vector<TensorType> in, std::vector<std::string> needles) {
    EXPECT_TRUE(append_fails(Opcode::LINEAR_BF16, in, {}, needles));
  };
  fails({TensorType{DType::I32, Shape{2, 3}}, w, b}, {"LINEAR_BF16", "x", "i32[2,3]", "must be f32"});
  fails({TensorType{DType::F32, Shape()}, TensorType{DType::BF16, Shape{1, 4}}, b}, {"x", "rank 1 or more"});
  fails({x, TensorType{DType::F32, Shape{3, 4}}, b}, {"weight", "f32[3,4]", "must be bf16", "LINEAR"});
  fails({x, TensorType{DType::BF16, Shape{3, 4, 1}}, b}, {"weight", "bf16[3,4,1]", "rank 2 [in, out]"});
  fails({x, TensorType{DType::BF16, Shape{5, 4}}, b}, {"x", "has 3 features", "bf16[5,4]", "expects 5"});
  fails({x, w, TensorType{DType::F32, Shape{5}}}, {"bias", "f32[5]", "must be f32[4]"});
  fails({x, w, TensorType{DType::BF16, Shape{4}}}, {"bias", "bf16[4]", "must be f32[4]"});
  fails({x, w, TensorType{DType::F32, Shape{1, 4}}}, {"bias", "f32[1,4]", "must be f32[4]"});
}

TEST(LinearBf16, HasNoGradient) {
  Context ctx;
  Program p(ctx);
  std::vector<TensorId> ids;
  ASSERT_TRUE(declare_inputs(p, {TensorType{DType::F32, Shape{2, 3}}, TensorType{DType::BF16, Shape{3, 4}},
                                 TensorType{DType::F32, Shape{4}}},
                             &ids));
  std::vector<TensorId> y;
  ASSERT_TRUE(append_op(p, Opcode::LINEAR_BF16, ids, {}, &y));
  for (size_t k : {0u, 2u}) {
    const Result<std::vector<TensorId>> g = grad(p, y[0], {ids[k]});
    ASSERT_FALSE(g) << k;
    EXPECT_NE(g.status().message().find("LINEAR_BF16"), std::string::npos) << g.status().message();
    EXPECT_NE(g.status().message().find("no backward rule"), std::string::npos) << g.status().message();
  }
}

// The act-fusion pass fuses a following activation into LINEAR_BF16 as into LINEAR (the op is in
// isa/activation.h's table of ops with an act= epilogue).
TEST(LinearBf16, ActFusionTakesAFollowingActivation) {
  Context ctx;
  Program p(ctx);
  ASSERT_TRUE(program_parse("input %x : f32[1,8]\nparam @w : bf16[8,4]\nparam @b : f32[4]\noutput %y\nforward:\n"
                            "  LINEAR_BF16 %x, @w, @b -> %h\n  LEAKYRELU %h -> %y slope=0.2\n",
                            "t.nnasm", &p));
  ASSERT_TRUE(optimize(p, 1, nullptr, {"act-fusion"}));
  ASSERT_EQ(p.code().size(), 1u);
  EXPECT_EQ(p.code()[0].op, Opcode::LINEAR_BF16);
  EXPECT_EQ(fused_act(p.code()[0]), Activation::LEAKYRELU);
  EXPECT_FLOAT_EQ(static_cast<float>(fused_act_alpha(p.code()[0])), 0.2f);
}

}  // namespace
}  // namespace nnasm::test
