// CONV_WEIGHTS_I8 and CONV2D_I8 beyond the parity sweep: odd channel counts, sizes, kernels,
// strides, pads and dilations, the x_scale modes (given: sx and zp as inputs), one and three images, with and without bias,
// every fused activation, at every JIT level and with the JIT off, against the naive loop of
// tests/conv_i8_naive.h (exact: the integer part is exact and the epilogue the same f32
// operations), with the kernel that ran asserted (vpdpbusd where the CPU has VNNI); NaN, ±inf,
// all-zero and negative-only images; both kernels (vpdpbusd and the widening one) called directly
// on this CPU and compared bitwise with the reference; each shape error; no gradient; the derive
// pass hoisting the packing; act fusion; the listing's round trip; the shell function.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "engine/autodiff.h"
#include "engine/executor.h"
#include "engine/passes/pass.h"
#include "isa/activation.h"
#include "jit/aligned_buffer.h"
#include "ops/elementwise/activation.h"
#include "ops/op.h"
#include "ops/quant/conv_i8.h"
#include "ops/quant/linear_i8.h"
#include "serialize/listing.h"
#include "shell/shell.h"
#include "tests/conv_i8_naive.h"
#include "tests/op_harness.h"
#include "tests/reduced_op_checks.h"
#include "tests/run_levels.h"

namespace nnasm::test {
namespace {

const double NaN = std::numeric_limits<double>::quiet_NaN();
const double INF = std::numeric_limits<double>::infinity();
const double ALPHAS[] = {0, 0, 0.1, 1, 6, 0, 0, 0, 0, 0.75};  // per activation (slope, alpha, threshold, beta)

bool exact_act(Activation a) {
  return a == Activation::NONE || a == Activation::RELU || a == Activation::LEAKYRELU ||
         a == Activation::CLIPPED_RELU;
}
Tolerance act_tol(Activation a) { return exact_act(a) ? Tolerance{0, 0} : Tolerance{1e-6, 4e-6}; }

std::function<float(float)> act_fn(Activation act) {
  const float a = static_cast<float>(ALPHAS[static_cast<int>(act)]);
  return [act, a](float z) { return act::apply(act, z, a); };
}

void expect_i8_kernel(const OpOutput& y, const Level& lv) {
  expect_kernel(y, lv, "i8_conv2d");
  if (!lv.isa.empty()) {
    Isa isa = Isa::AVX2;
    ASSERT_TRUE(isa_from_name(lv.isa, &isa));
    EXPECT_EQ(y.kernel.find("_vnni") != std::string::npos, linear_i8_has_vnni(isa)) << y.kernel;
  }
}

struct Kern {
  int64_t k, s, p, d;
};
// 1×1 (pointwise, strided, padded), 3×3, 5×5 and 7×7 at strides 1 and 2, pads 0 to 3, dilation 2.
const Kern KERNELS[] = {{1, 1, 0, 1}, {1, 2, 0, 1}, {1, 1, 1, 1}, {3, 1, 1, 1}, {3, 2, 1, 1}, {3, 1, 0, 2},
                        {3, 2, 3, 1}, {5, 1, 2, 1}, {5, 2, 0, 1}, {7, 2, 3, 1}, {7, 1, 3, 2}};

ConvI8Geom geom_of(const Kern& k) { return ConvI8Geom{k.s, k.s, k.p, k.p, k.d, k.d}; }

std::vector<ImmArg> imms_of(const Kern& k, Activation act, bool tensor) {
  std::vector<ImmArg> v{imm_ints("stride", {k.s, k.s}), imm_ints("pad", {k.p, k.p}), imm_ints("dilation", {k.d, k.d}),
                        imm_enum("act", activation_name(act)), imm_f("act_alpha", ALPHAS[static_cast<int>(act)])};
  if (tensor) v.push_back(imm_enum("x_scale", "tensor"));
  return v;
}

bool fits(int64_t h, const Kern& k) { return h + 2 * k.p - k.d * (k.k - 1) - 1 >= 0; }

OpOutput run_i8(const HostTensor& x, const HostTensor& w, const HostTensor& s, const HostTensor& b,
                const std::vector<ImmArg>& imms, const RunConfig& cfg) {
  const std::vector<HostTensor> p = naive_pack_conv_i8(w);
  std::vector<HostTensor> in{x, p[0], p[1], s};
  if (!b.v.empty()) in.push_back(b);
  return run_op(Opcode::CONV2D_I8, in, imms, false, cfg);
}

// x_scale=given: sx and zp as the last two inputs (6, or 7 with the bias).
OpOutput run_given(const HostTensor& x, const HostTensor& w, const HostTensor& s, const HostTensor& b, float sx,
                   int64_t zp, bool rank0, std::vector<ImmArg> imms, const RunConfig& cfg) {
  const std::vector<HostTensor> p = naive_pack_conv_i8(w);
  std::vector<HostTensor> in{x, p[0], p[1], s};
  if (!b.v.empty()) in.push_back(b);
  in.push_back(host(DType::F32, rank0 ? Shape() : Shape{1}, {sx}));
  in.push_back(host(DType::U8, rank0 ? Shape() : Shape{1}, {static_cast<double>(zp)}));
  imms.push_back(imm_enum("x_scale", "given"));
  return run_op(Opcode::CONV2D_I8, in, imms, false, cfg);
}

TEST(ConvI8, PacksTheWeightAndSumsIt) {
  std::mt19937 rng(5);
  for (int64_t c : {1, 3, 4, 5, 17})
    for (int64_t k : {1, 3}) {
      const HostTensor w = random_i8(Shape{5, c, k, k + 1}, rng);
      const std::vector<HostTensor> want = naive_pack_conv_i8(w);
      const OpOutput got = run_op(Opcode::CONV_WEIGHTS_I8, {w}, {});
      EXPECT_TRUE(matches_all({Expected{want[0], {}, {0, 0}}, Expected{want[1], {}, {0, 0}}}, got)) << c << " " << k;
    }
}

TEST(ConvI8, MatchesNaiveLoopAtEveryLevelAndWithJitOff) {
  std::mt19937 rng(31);
  const int64_t CS[] = {1, 3, 17}, OS[] = {1, 5, 33}, HW[] = {1, 7, 13};
  for (const Level& lv : levels()) {
    int c = 0;
    for (size_t ki = 0; ki < std::size(KERNELS); ++ki)
      for (size_t t = 0; t < 3; ++t) {
        const Kern& k = KERNELS[ki];
        const int64_t ch = CS[(ki + t) % 3], o = OS[(ki + 2 * t) % 3], h = HW[t], w = HW[(t + ki) % 3];
        if (!fits(h, k) || !fits(w, k)) continue;
        const Activation act = static_cast<Activation>(c % ACTIVATION_COUNT);
        const int mode = (c / ACTIVATION_COUNT) % 3;  // image, tensor, given
        const bool tensor = mode == 1, bias = c % 4 != 3;
        const int64_t n = c % 3 == 1 ? 3 : 1;
        // given: a scale that clips now and then, sometimes 0, any zero point, a NaN now and then.
        const GivenQ gq{c % 13 == 5 ? 0.f : 5.f / 255.f * static_cast<float>(c % 4 + 1) / 3.f, (c * 53) % 256};
        ++c;
        HostTensor x = random_f32(Shape{n, ch, h, w}, rng, -2, 3);
        if (mode == 2 && c % 5 == 0) x.v[x.v.size() - 1] = NaN;
        const HostTensor wt = random_i8(Shape{o, ch, k.k, k.k}, rng);
        const HostTensor s = random_f32(Shape{c % 3 ? o : 1}, rng, 0.001, 0.02);
        const HostTensor b = bias ? random_f32(Shape{o}, rng, -1, 1) : HostTensor{TensorType{DType::F32, Shape{o}}, {}};
        const std::vector<ImmArg> imms = imms_of(k, act, tensor);
        SCOPED_TRACE(describe(Opcode::CONV2D_I8, {x, wt, s}, imms) + (bias ? " bias " : " no bias ") +
                     (lv.isa.empty() ? "ref" : lv.isa) + (mode == 2 ? fmt::format(" given {} {}", gq.sx, gq.zp) : ""));
        const OpOutput y = mode == 2 ? run_given(x, wt, s, b, gq.sx, gq.zp, c % 2, imms, lv.cfg)
                                     : run_i8(x, wt, s, b, imms, lv.cfg);
        ASSERT_TRUE(y.status) << y.status.message();
        EXPECT_TRUE(matches(naive_conv2d_i8(x, wt, s, b, geom_of(k), tensor, act_fn(act), act_tol(act),
                                            mode == 2 ? &gq : nullptr),
                            y));
        expect_i8_kernel(y, lv);
      }
    EXPECT_GT(c, 25);
  }
}

// Images: all zeros (y = act(b)), negative only (zp = 255), one NaN, one +inf, positive only
// (zp = 0); per image they leave the other images alone, per tensor a non-finite value makes every
// output NaN.
TEST(ConvI8, SpecialImages) {
  std::mt19937 rng(7);
  const int64_t c = 5, h = 6, w = 7, o = 9, image = c * h * w;
  std::vector<double> xv;
  auto fill = [&](auto gen) {
    for (int64_t k = 0; k < image; ++k) xv.push_back(gen(k));
  };
  fill([](int64_t) { return 0.0; });
  fill([](int64_t k) { return -0.25 - 0.1 * static_cast<double>(k % 7); });
  fill([](int64_t k) { return k == 17 ? NaN : 1.0; });
  fill([](int64_t k) { return k == 100 ? INF : -1.0; });
  fill([](int64_t k) { return 0.5 + static_cast<double>(k % 3); });
  const HostTensor x = host(DType::F32, Shape{5, c, h, w}, xv);
  const HostTensor wt = random_i8(Shape{o, c, 3, 3}, rng);
  const HostTensor s = random_f32(Shape{o}, rng, 0.001, 0.02);
  const HostTensor b = random_f32(Shape{o}, rng, -1, 1);
  const Kern k{3, 1, 1, 1};
  const int64_t per = o * h * w;
  for (const Level& lv : levels())
    for (bool tensor : {false, true})
      for (Activation act : {Activation::NONE, Activation::RELU}) {
        SCOPED_TRACE(std::string(lv.isa.empty() ? "ref" : lv.isa) + (tensor ? " tensor " : " image ") +
                     activation_name(act));
        const OpOutput y = run_i8(x, wt, s, b, imms_of(k, act, tensor), lv.cfg);
        ASSERT_TRUE(y.status) << y.status.message();
        EXPECT_TRUE(matches(naive_conv2d_i8(x, wt, s, b, geom_of(k), tensor, act_fn(act)), y));
        for (int64_t i = 0; i < per; ++i) {
          if (!tensor) {
            EXPECT_EQ(y.v[i], act::apply(act, static_cast<float>(b.v[i / (h * w)]) + 0.f, 0)) << "zero image " << i;
          }
          EXPECT_TRUE(std::isnan(y.v[2 * per + i])) << i;
          EXPECT_TRUE(std::isnan(y.v[3 * per + i])) << i;
          EXPECT_EQ(std::isnan(y.v[4 * per + i]), tensor) << i;
        }
        expect_i8_kernel(y, lv);
      }
}

// Both kernels called directly at every level where the CPU has them (the widening one always,
// so this CPU runs the kernel a CPU without VNNI gets), bitwise against the reference kernel,
// with a guard after y.
TEST(ConvI8, EachKernelVariantEqualsTheReferenceBitwise) {
  std::mt19937 rng(37);
  KernelCache cache;
  int ran_vnni = 0;
  for (Isa isa : jit_levels())
    for (bool vnni : {false, true}) {
      if (vnni && !linear_i8_has_vnni(isa)) {
        std::printf("[ SKIPPED  ] ConvI8: no %s on this CPU: %s's vpdpbusd kernel not run\n",
                    isa == Isa::AVX2 ? "AVX-VNNI" : "AVX512_VNNI", isa_name(isa));
        continue;
      }
      ran_vnni += vnni;
      int c = 0;
      for (const Kern& k : KERNELS)
        for (int64_t ch : {1, 3, 8, 17})
          for (int64_t o : {1, 7, 13, 33}) {
            const int64_t h = 4 + c % 11, w = 3 + (c * 7) % 13;
            const Activation act = static_cast<Activation>(c % ACTIVATION_COUNT);
            const bool tensor = (c / ACTIVATION_COUNT) % 2, bias = c % 5 != 2;
            const int64_t n = c % 4 == 1 ? 2 : 1;
            ++c;
            if (!fits(h, k) || !fits(w, k)) continue;
            HostTensor x = random_f32(Shape{n, ch, h, w}, rng, -3, 2);
            if (c % 9 == 0) x.v[0] = c % 18 ? NaN : -INF;
            if (c % 7 == 0) std::fill(x.v.begin(), x.v.begin() + ch * h * w, 0.0);
            const HostTensor wt = random_i8(Shape{o, ch, k.k, k.k}, rng);
            const std::vector<HostTensor> p = naive_pack_conv_i8(wt);
            const HostTensor s = random_f32(Shape{c % 3 ? o : 1}, rng, 0.001, 0.02);
            const HostTensor b = random_f32(Shape{o}, rng, -1, 1);
            const int n_in = bias ? 5 : 4;
            SCOPED_TRACE(describe(Opcode::CONV2D_I8, {x, wt, s}, imms_of(k, act, tensor)) + " " + isa_name(isa) +
                         (vnni ? " vnni" : "") + (bias ? "" : " no bias"));
            Instruction ins = make_instruction(Opcode::CONV2D_I8, bias ? std::vector<TensorId>{0, 1, 2, 3, 4}
                                                                       : std::vector<TensorId>{0, 1, 2, 3},
                                               {5});
            ASSERT_EQ(apply_imms(&ins, imms_of(k, act, tensor)), "");
            const int64_t ho = (h + 2 * k.p - k.d * (k.k - 1) - 1) / k.s + 1, wo = (w + 2 * k.p - k.d * (k.k - 1) - 1) / k.s + 1;
            const TensorType out_t{DType::F32, Shape{n, o, ho, wo}};
            const TensorType types[] = {x.type, p[0].type, p[1].type, s.type, bias ? b.type : out_t, out_t};
            const TensorType* outs = bias ? types + 5 : types + 4;
            Result<std::shared_ptr<const JitKernel>> kern = conv2d_i8_kernel(ins, types, isa, vnni, cache);
            ASSERT_TRUE(kern) << kern.status().message();
            ASSERT_NE(kern.value(), nullptr);
            EXPECT_EQ(kern.value()->name().find("_vnni") != std::string::npos, vnni) << kern.value()->name();
            std::vector<float> xf(x.v.begin(), x.v.end()), sf(s.v.begin(), s.v.end()), bf(b.v.begin(), b.v.end());
            std::vector<int8_t> wp(p[0].v.begin(), p[0].v.end());
            std::vector<int32_t> cs(p[1].v.begin(), p[1].v.end());
            std::vector<float> y(static_cast<size_t>(n * o * ho * wo + 16), -7.f), want(y.size(), -7.f);
            AlignedBuffer scratch(op_hooks(Opcode::CONV2D_I8).scratch(ins, types, outs));
            const void* in_ptrs[] = {xf.data(), wp.data(), cs.data(), sf.data(), bf.data()};
            void* out_ptrs[] = {y.data()};
            const KernelArgs args{in_ptrs, out_ptrs, types, outs, &ins, n_in, 1, scratch.data(), nullptr, scratch.data()};
            kern.value()->fn()(&args);
            void* want_ptrs[] = {want.data()};
            const KernelArgs ref_args{in_ptrs, want_ptrs, types, outs, &ins, n_in, 1, scratch.data(), nullptr, scratch.data()};
            op_hooks(Opcode::CONV2D_I8).ref(&ref_args);
            expect_kernel_equals_reference(y, want, exact_act(act));
          }
    }
  if (cpu_info().avx512_vnni && cpu_info().best == Isa::AVX512) {
    EXPECT_GT(ran_vnni, 0);
  }
}

// Two threads split the pixels into parts; each value is as one thread computes it.
// x_scale=given: both kernels bitwise against the reference, sx = 0, NaN images and every
// activation among them.
TEST(ConvI8, GivenScaleEachKernelVariantEqualsTheReferenceBitwise) {
  std::mt19937 rng(61);
  KernelCache cache;
  for (Isa isa : jit_levels())
    for (bool vnni : {false, true}) {
      if (vnni && !linear_i8_has_vnni(isa)) continue;
      int c = 0;
      for (const Kern& k : KERNELS)
        for (int64_t ch : {3, 17})
          for (int64_t o : {7, 33}) {
            const int64_t h = 4 + c % 11, w = 3 + (c * 7) % 13, n = c % 4 == 1 ? 2 : 1;
            const Activation act = static_cast<Activation>(c % ACTIVATION_COUNT);
            const bool bias = c % 3 != 2;
            const float sx = c % 7 == 3 ? 0.f : 0.004f * static_cast<float>(1 + c % 9);
            const uint8_t zp = static_cast<uint8_t>((c * 37) % 256);
            ++c;
            if (!fits(h, k) || !fits(w, k)) continue;
            HostTensor x = random_f32(Shape{n, ch, h, w}, rng, -3, 2);
            if (c % 6 == 0) x.v[0] = NaN;
            const HostTensor wt = random_i8(Shape{o, ch, k.k, k.k}, rng);
            const std::vector<HostTensor> p = naive_pack_conv_i8(wt);
            const HostTensor s = random_f32(Shape{c % 3 ? o : 1}, rng, 0.001, 0.02);
            const HostTensor b = random_f32(Shape{o}, rng, -1, 1);
            std::vector<ImmArg> imms = imms_of(k, act, false);
            imms.push_back(imm_enum("x_scale", "given"));
            SCOPED_TRACE(describe(Opcode::CONV2D_I8, {x, wt, s}, imms) + " " + isa_name(isa) + (vnni ? " vnni" : "") +
                         (bias ? "" : " no bias"));
            const int n_in = bias ? 7 : 6;
            std::vector<TensorId> ids;
            for (int i = 0; i < n_in; ++i) ids.push_back(static_cast<TensorId>(i));
            Instruction ins = make_instruction(Opcode::CONV2D_I8, ids, {static_cast<TensorId>(n_in)});
            ASSERT_EQ(apply_imms(&ins, imms), "");
            const int64_t ho = (h + 2 * k.p - k.d * (k.k - 1) - 1) / k.s + 1, wo = (w + 2 * k.p - k.d * (k.k - 1) - 1) / k.s + 1;
            const TensorType out_t{DType::F32, Shape{n, o, ho, wo}}, sx_t{DType::F32, Shape{}}, zp_t{DType::U8, Shape{1}};
            std::vector<TensorType> types{x.type, p[0].type, p[1].type, s.type};
            if (bias) types.push_back(b.type);
            types.insert(types.end(), {sx_t, zp_t, out_t});
            const TensorType* outs = types.data() + n_in;
            Result<std::shared_ptr<const JitKernel>> kern = conv2d_i8_kernel(ins, types.data(), isa, vnni, cache);
            ASSERT_TRUE(kern) << kern.status().message();
            ASSERT_NE(kern.value(), nullptr);
            std::vector<float> xf(x.v.begin(), x.v.end()), sf(s.v.begin(), s.v.end()), bf(b.v.begin(), b.v.end());
            std::vector<int8_t> wp(p[0].v.begin(), p[0].v.end());
            std::vector<int32_t> cs(p[1].v.begin(), p[1].v.end());
            std::vector<float> y(static_cast<size_t>(n * o * ho * wo + 16), -7.f), want(y.size(), -7.f);
            AlignedBuffer scratch(op_hooks(Opcode::CONV2D_I8).scratch(ins, types.data(), outs));
            std::vector<const void*> in_ptrs{xf.data(), wp.data(), cs.data(), sf.data()};
            if (bias) in_ptrs.push_back(bf.data());
            in_ptrs.push_back(&sx);
            in_ptrs.push_back(&zp);
            void* out_ptrs[] = {y.data()};
            const KernelArgs args{in_ptrs.data(), out_ptrs, types.data(), outs, &ins, n_in, 1, scratch.data(), nullptr,
                                  scratch.data()};
            kern.value()->fn()(&args);
            void* want_ptrs[] = {want.data()};
            const KernelArgs ref_args{in_ptrs.data(), want_ptrs, types.data(), outs, &ins, n_in, 1, scratch.data(),
                                      nullptr, scratch.data()};
            op_hooks(Opcode::CONV2D_I8).ref(&ref_args);
            expect_kernel_equals_reference(y, want, exact_act(act));
          }
    }
}

TEST(ConvI8, PartsSplitThePixels) {
  std::mt19937 rng(41);
  const HostTensor x = random_f32(Shape{1, 19, 23, 21}, rng, -1, 2);
  const HostTensor w = random_i8(Shape{35, 19, 3, 3}, rng);
  const HostTensor s = random_f32(Shape{35}, rng, 0.001, 0.02);
  const HostTensor b = random_f32(Shape{35}, rng, -1, 1);
  const Kern k{3, 1, 1, 1};
  for (Isa isa : jit_levels()) {
    SCOPED_TRACE(isa_name(isa));
    const RunConfig cfg{true, JitConfig{true, isa}, 2};
    const OpOutput y = run_i8(x, w, s, b, imms_of(k, Activation::RELU, false), cfg);
    ASSERT_TRUE(y.status) << y.status.message();
    EXPECT_EQ(y.parts, 2);
    EXPECT_TRUE(matches(naive_conv2d_i8(x, w, s, b, geom_of(k), false, act_fn(Activation::RELU)), y));
  }
}

TEST(ConvI8, ShapeErrorsNameTheOperand) {
  const TensorType x{DType::F32, Shape{1, 5, 6, 6}}, wp{DType::I8, Shape{3, 2, 3, 3, 4}}, cs{DType::I32, Shape{3}},
      s{DType::F32, Shape{3}}, b{DType::F32, Shape{3}};
  auto fails = [](std::vector<TensorType> in, std::vector<std::string> needles, std::vector<ImmArg> imms = {}) {
    EXPECT_TRUE(append_fails(Opcode::CONV2D_I8, in, imms, needles));
  };
  fails({x, wp, cs}, {"CONV2D_I8 takes 4 or 5 inputs", "got 3"});
  fails({TensorType{DType::I32, Shape{1, 5, 6, 6}}, wp, cs, s, b}, {"CONV2D_I8", "x", "i32[1,5,6,6]", "must be f32"});
  fails({TensorType{DType::F32, Shape{5, 6, 6}}, wp, cs, s, b}, {"x", "f32[5,6,6]", "f32[N, C, H, W]"});
  fails({x, wp, cs, s, b}, {"groups must be 1", "got 5", "CONV2D"}, {imm_i("groups", 5)});
  fails({x, wp, cs, s, b}, {"stride", "at least 1"}, {imm_ints("stride", {0, 1})});
  fails({x, wp, cs, s, b}, {"pad", "2 entries"}, {imm_ints("pad", {1})});
  fails({x, TensorType{DType::F32, Shape{3, 2, 3, 3, 4}}, cs, s, b}, {"packed weight", "f32[3,2,3,3,4]", "i8[out, 2, kh, kw, 4]", "5 channels"});
  fails({x, TensorType{DType::I8, Shape{3, 3, 3, 3, 4}}, cs, s, b}, {"packed weight", "i8[3,3,3,3,4]", "CONV_WEIGHTS_I8"});
  fails({x, TensorType{DType::I8, Shape{3, 5, 3, 3}}, cs, s, b}, {"packed weight", "i8[3,5,3,3]"});
  fails({x, TensorType{DType::I8, Shape{3, 2, 3, 3, 2}}, cs, s, b}, {"packed weight", "i8[3,2,3,3,2]"});
  fails({TensorType{DType::F32, Shape{1, 2000, 8, 8}}, TensorType{DType::I8, Shape{3, 500, 6, 6, 4}}, cs, s, b},
        {"x", "72000 products", "at most 65536", "CONV2D"});
  fails({x, TensorType{DType::I8, Shape{3, 2, 7, 3, 4}}, cs, s, b}, {"does not fit", "f32[1,5,6,6]"});
  fails({x, wp, TensorType{DType::F32, Shape{3}}, s, b}, {"column sums", "f32[3]", "must be i32[3]"});
  fails({x, wp, TensorType{DType::I32, Shape{4}}, s, b}, {"column sums", "i32[4]", "must be i32[3]"});
  fails({x, wp, cs, TensorType{DType::F32, Shape{2}}, b}, {"weight scale", "f32[2]", "f32[3] (per output channel) or f32[1]"});
  fails({x, wp, cs, TensorType{DType::I32, Shape{3}}, b}, {"weight scale", "i32[3]"});
  fails({x, wp, cs, s, TensorType{DType::F32, Shape{4}}}, {"bias", "f32[4]", "must be f32[3]"});
  fails({x, wp, cs, s, TensorType{DType::I8, Shape{3}}}, {"bias", "i8[3]", "must be f32[3]"});
  const TensorType sx{DType::F32, Shape{1}}, zp{DType::U8, Shape{}};
  const ImmArg given = imm_enum("x_scale", "given");
  fails({x, wp, cs, s, b, sx}, {"CONV2D_I8 takes 4 or 5 inputs", "x_scale=given adds sx, zp", "got 6"});
  fails({x, wp, cs, s, b}, {"x_scale=given takes 6 or 7 inputs", "got 5"}, {given});
  fails({x, wp, cs, s, b, TensorType{DType::F32, Shape{3}}, zp}, {"x's scale", "f32[3]", "f32[] or f32[1]"}, {given});
  fails({x, wp, cs, s, zp, zp}, {"x's scale", "u8[]"}, {given});
  fails({x, wp, cs, s, b, sx, TensorType{DType::I8, Shape{}}}, {"x's zero point", "i8[]", "u8[] or u8[1]"}, {given});
  fails({x, wp, cs, s, TensorType{DType::F32, Shape{4}}, sx, zp}, {"bias", "f32[4]"}, {given});
  EXPECT_TRUE(append_fails(Opcode::CONV_WEIGHTS_I8, {TensorType{DType::F32, Shape{3, 5, 3, 3}}}, {},
                           {"CONV_WEIGHTS_I8", "f32[3,5,3,3]", "must be i8[out, in, kh, kw]", "QUANTIZE"}));
  EXPECT_TRUE(append_fails(Opcode::CONV_WEIGHTS_I8, {TensorType{DType::I8, Shape{5, 3}}}, {},
                           {"CONV_WEIGHTS_I8", "i8[5,3]", "must be i8[out, in, kh, kw]"}));
}

TEST(ConvI8, HasNoGradient) {
  EXPECT_EQ(op_hooks(Opcode::CONV2D_I8).grad, nullptr);
  EXPECT_EQ(op_hooks(Opcode::CONV_WEIGHTS_I8).grad, nullptr);
  expect_no_gradient(Opcode::CONV2D_I8,
                     {TensorType{DType::F32, Shape{1, 5, 6, 6}},
                      TensorType{DType::I8, Shape{3, 2, 3, 3, 4}},
                      TensorType{DType::I32, Shape{3}},
                      TensorType{DType::F32, Shape{3}},
                      TensorType{DType::F32, Shape{3}}},
                     {0, 4});
}

const char* PROGRAM =
    "input %x : f32[2,3,8,8]\nparam @w : i8[4,3,3,3]\nparam @s : f32[4]\nparam @b : f32[4]\noutput %y\n\nforward:\n"
    "  CONV_WEIGHTS_I8 @w -> %wp, %cs\n  CONV2D_I8 %x, %wp, %cs, @s, @b -> %h stride=[2,2] pad=[1,1] x_scale=tensor\n"
    "  LEAKYRELU %h -> %y slope=0.2\n";

// The derive pass moves the packing to the derive section (its input is a param), and act fusion
// takes the activation into CONV2D_I8's epilogue.
TEST(ConvI8, DeriveHoistsThePackingAndActFusionTakesTheActivation) {
  expect_derive_and_act_fusion(PROGRAM, Opcode::CONV_WEIGHTS_I8, Opcode::CONV2D_I8, Activation::LEAKYRELU, 0.2f);
}

TEST(ConvI8, ListingRoundTrips) {
  Context ctx;
  Program p(ctx);
  ASSERT_TRUE(program_parse(PROGRAM, "t.nnasm", &p));
  const std::string once = program_print(p);
  EXPECT_NE(once.find("CONV2D_I8    %x, %wp, %cs, @s, @b -> %h"), std::string::npos) << once;
  EXPECT_NE(once.find("x_scale=tensor"), std::string::npos) << once;
  EXPECT_NE(once.find("stride=[2,2]"), std::string::npos) << once;
  EXPECT_NE(once.find("CONV_WEIGHTS_I8 @w -> %wp, %cs"), std::string::npos) << once;
  Context ctx2;
  Program q(ctx2);
  ASSERT_TRUE(program_parse(once, "t2.nnasm", &q)) << once;
  EXPECT_EQ(program_print(q), once);
  std::string bad = PROGRAM;
  bad.replace(bad.find("x_scale=tensor"), 14, "x_scale=row");
  Context ctx3;
  Program r(ctx3);
  const Status st = program_parse(bad, "t.nnasm", &r);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("row"), std::string::npos) << st.message();
}

// A whole program with a param weight and no bias, at -O0 and -O1, run by the executor.
TEST(ConvI8, ProgramRunsTheSameAtEachOptLevel) {
  std::mt19937 rng(43);
  const HostTensor x = random_f32(Shape{1, 2, 5, 5}, rng, -1, 2);
  const HostTensor w = random_i8(Shape{3, 2, 3, 3}, rng);
  const HostTensor s = host(DType::F32, Shape{1}, {0.01});
  const HostTensor none{TensorType{DType::F32, Shape{3}}, {}};
  const Expected e = naive_conv2d_i8(x, w, s, none, ConvI8Geom{1, 1, 1, 1, 1, 1}, false, act_fn(Activation::NONE));
  std::string wl;
  for (double d : w.v) wl += (wl.empty() ? "" : ", ") + fmt::format("{}", d);
  for (int opt : {0, 1}) {
    SCOPED_TRACE("-O" + std::to_string(opt));
    const std::string text = fmt::format(
        "input %x : f32[1,2,5,5]\nparam @w : i8[3,2,3,3] = [{}]\nparam @s : f32[1] = [0.01]\noutput %y\n\n"
        "forward:\n  CONV_WEIGHTS_I8 @w -> %wp, %cs\n  CONV2D_I8 %x, %wp, %cs, @s -> %y pad=[1,1]\n",
        wl);
    Context ctx;
    ctx.set_opt_level(opt);
    Program p(ctx);
    ASSERT_TRUE(program_parse(text, "t.nnasm", &p)) << text;
    auto made = Executor::prepare(p);
    ASSERT_TRUE(made) << made.status().message();
    Executor& ex = *made.value();
    std::copy(x.v.begin(), x.v.end(), ex.tensor("x")->f32());
    ex.run();
    const Tensor* y = ex.tensor("y");
    ASSERT_EQ(y->numel(), 75);
    for (int64_t i = 0; i < 75; ++i) EXPECT_EQ(y->f32()[i], e.t.v[static_cast<size_t>(i)]) << i;
  }
}

// The shell function records the packing and the convolution, with its immediates.
TEST(ConvI8, ShellFunctionRecordsPackingThenConvolution) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {2, 3, 9, 9});
  Var w = g.constant("w", {6, 3, 3, 3}, std::vector<double>(162, -3), DType::I8);
  Var s = g.constant("s", {1}, {0.5});
  Var b = g.constant("b", {6}, std::vector<double>(6, 1));
  Conv2dOptions opt;
  opt.stride = {2, 2};
  opt.pad = {1, 1};
  opt.act = Activation::RELU;
  Var y = conv2d_i8(x, w, s, b, opt, true);
  ASSERT_TRUE(g.status()) << g.status().message();
  EXPECT_EQ(y.type().str(), "f32[2,6,5,5]");
  ASSERT_EQ(p.code().size(), 2u);
  EXPECT_EQ(p.code()[0].op, Opcode::CONV_WEIGHTS_I8);
  EXPECT_EQ(p.code()[1].op, Opcode::CONV2D_I8);
  EXPECT_EQ(p.code()[1].in.size(), 5u);
  EXPECT_EQ(fused_act(p.code()[1]), Activation::RELU);
  EXPECT_EQ(p.code()[1].i(NNASM_IMM(CONV2D_I8, x_scale)), NNASM_CHOICE(CONV2D_I8, x_scale, tensor));
  EXPECT_EQ(p.code()[1].ints(NNASM_IMM(CONV2D_I8, stride)), (std::vector<int64_t>{2, 2}));
  EXPECT_TRUE(conv2d_i8(x, w, s, Var(), opt).valid());
  ASSERT_TRUE(g.status()) << g.status().message();
  EXPECT_EQ(p.code().back().in.size(), 4u);
  // An f32 weight is refused by the packing, with its message kept.
  Var wf = g.constant("wf", {6, 3, 3, 3}, std::vector<double>(162, 1));
  EXPECT_FALSE(conv2d_i8(x, wf, s, b).valid());
  EXPECT_NE(g.status().message().find("CONV_WEIGHTS_I8"), std::string::npos) << g.status().message();
}

}  // namespace
}  // namespace nnasm::test
