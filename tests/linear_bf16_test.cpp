// LINEAR_BF16 beyond the parity sweep: odd and tail sizes, each activation, at every JIT level and
// with the JIT off, against the naive loop of tests/linear_bf16_naive.h, with the kernel that ran
// asserted (vdpbf16ps where the CPU has AVX512_BF16); x's rounding to bf16 (ties to even) and NaN;
// both AVX-512 kernels (vdpbf16ps and the widening one CPUs without AVX512_BF16 get) called
// directly; each shape error; autodiff's refusal (no gradient); act-fusion into it.
#include <gtest/gtest.h>

#include <cmath>
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
