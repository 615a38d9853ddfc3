// LINEAR_WEIGHTS_I8 and LINEAR_I8 beyond the parity sweep: odd and tail sizes, both x_scale modes,
// and x_scale=given (a static QDQ model's sx and zero point as inputs),
// every fused activation, at every JIT level and with the JIT off, against the naive loop of
// tests/linear_i8_naive.h (exact: the integer part is exact and the epilogue the same f32
// operations), with the kernel that ran asserted (vpdpbusd where the CPU has VNNI); NaN, ±inf,
// all-zero and negative-only rows; both kernels (vpdpbusd and the widening one) called directly
// on this CPU and compared bitwise with the reference; each shape error; no gradient; the derive
// pass hoisting the packing; act fusion; the listing's round trip.
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
#include "ops/quant/linear_i8.h"
#include "serialize/listing.h"
#include "shell/shell.h"
#include "tests/linear_i8_naive.h"
#include "tests/op_harness.h"
#include "tests/reduced_op_checks.h"
#include "tests/run_levels.h"

namespace nnasm::test {
namespace {

const double NaN = std::numeric_limits<double>::quiet_NaN();
const double INF = std::numeric_limits<double>::infinity();
const double ALPHAS[] = {0, 0, 0.1, 1, 6, 0, 0, 0, 0, 0.75};  // per activation (slope, alpha, threshold, beta)

// The activations whose snippets equal the scalar reference bitwise; the others (exp, tanh, erf)
// are the snippets' few ulps apart.
bool exact_act(Activation a) {
  return a == Activation::NONE || a == Activation::RELU || a == Activation::LEAKYRELU ||
         a == Activation::CLIPPED_RELU;
}
Tolerance act_tol(Activation a) { return exact_act(a) ? Tolerance{0, 0} : Tolerance{1e-6, 4e-6}; }

void expect_i8_kernel(const OpOutput& y, const Level& lv) {
  expect_kernel(y, lv, "i8_linear");
  if (!lv.isa.empty()) {
    Isa isa = Isa::AVX2;
    ASSERT_TRUE(isa_from_name(lv.isa, &isa));
    EXPECT_EQ(y.kernel.find("_vnni") != std::string::npos, linear_i8_has_vnni(isa)) << y.kernel;
  }
}

Shape x_shape(int64_t rows, int64_t in) {
  if (rows == 1) return Shape{in};
  if (rows == 64) return Shape{2, 32, in};
  return Shape{rows, in};
}

// mode: 0 row, 1 tensor, 2 given.
std::vector<ImmArg> imms_of(Activation act, int mode) {
  std::vector<ImmArg> v{imm_enum("act", activation_name(act)), imm_f("act_alpha", ALPHAS[static_cast<int>(act)])};
  if (mode == 1) v.push_back(imm_enum("x_scale", "tensor"));
  if (mode == 2) v.push_back(imm_enum("x_scale", "given"));
  return v;
}

// x's scale and zero point for x_scale=given: rank 0 or [1].
HostTensor sx_of(double sx, bool rank0) { return host(DType::F32, rank0 ? Shape() : Shape{1}, {sx}); }
HostTensor zp_of(int64_t zp, bool rank0) {
  return host(DType::U8, rank0 ? Shape() : Shape{1}, {static_cast<double>(zp)});
}

std::function<float(float)> act_fn(Activation act) {
  const float a = static_cast<float>(ALPHAS[static_cast<int>(act)]);
  return [act, a](float z) { return act::apply(act, z, a); };
}

OpOutput run_i8(const HostTensor& x, const HostTensor& w, const HostTensor& s, const HostTensor& b,
                const std::vector<ImmArg>& imms, const RunConfig& cfg) {
  const std::vector<HostTensor> p = naive_pack_i8(w);
  return run_op(Opcode::LINEAR_I8, {x, p[0], p[1], s, b}, imms, false, cfg);
}

OpOutput run_i8_given(const HostTensor& x, const HostTensor& w, const HostTensor& s, const HostTensor& b,
                      const HostTensor& sx, const HostTensor& zp, Activation act, const RunConfig& cfg) {
  const std::vector<HostTensor> p = naive_pack_i8(w);
  return run_op(Opcode::LINEAR_I8, {x, p[0], p[1], s, b, sx, zp}, imms_of(act, 2), false, cfg);
}

TEST(LinearI8, PacksTheWeightAndSumsItsColumns) {
  std::mt19937 rng(5);
  for (int64_t k : {1, 3, 4, 5, 63})
    for (int64_t o : {1, 17}) {
      const HostTensor w = random_i8(Shape{k, o}, rng);
      const std::vector<HostTensor> want = naive_pack_i8(w);
      const OpOutput got = run_op(Opcode::LINEAR_WEIGHTS_I8, {w}, {});
      EXPECT_TRUE(matches_all({Expected{want[0], {}, {0, 0}}, Expected{want[1], {}, {0, 0}}}, got)) << k << "x" << o;
    }
}

TEST(LinearI8, MatchesNaiveLoopAtEveryLevelAndWithJitOff) {
  std::mt19937 rng(31);
  for (const Level& lv : levels()) {
    int c = 0;
    for (int64_t in : {1, 3, 5, 63, 65, 784, 1000})
      for (int64_t out : {1, 15, 17, 33, 256})
        for (int64_t rows : {1, 3, 7, 64}) {
          if (in * out * rows > 4'000'000) continue;
          const Activation act = static_cast<Activation>(c % ACTIVATION_COUNT);
          const bool tensor = (c++ / ACTIVATION_COUNT) % 2;
          HostTensor x = random_f32(x_shape(rows, in), rng, -2, 3);
          const HostTensor w = random_i8(Shape{in, out}, rng);
          const HostTensor s = random_f32(Shape{c % 3 ? out : 1}, rng, 0.001, 0.02);
          const HostTensor b = random_f32(Shape{out}, rng, -1, 1);
          const std::vector<ImmArg> imms = imms_of(act, tensor);
          SCOPED_TRACE(describe(Opcode::LINEAR_I8, {x, w, s, b}, imms) + " " + (lv.isa.empty() ? "ref" : lv.isa));
          const OpOutput y = run_i8(x, w, s, b, imms, lv.cfg);
          ASSERT_TRUE(y.status) << y.status.message();
          EXPECT_TRUE(matches(naive_linear_i8(x, w, s, b, tensor, act_fn(act), act_tol(act)), y));
          expect_i8_kernel(y, lv);
        }
  }
}

// Special rows: all zeros (y = act(b)), negative only (zp = 255), one NaN, one +inf, positive only
// (zp = 0), a single huge value; per row they leave the other rows alone, per tensor a non-finite
// value makes every output NaN.
TEST(LinearI8, SpecialRows) {
  std::mt19937 rng(7);
  const int64_t in = 37, out = 19;
  std::vector<double> xv;
  auto row = [&](auto gen) {
    for (int64_t k = 0; k < in; ++k) xv.push_back(gen(k));
  };
  row([](int64_t) { return 0.0; });
  row([](int64_t k) { return -0.25 - 0.1 * static_cast<double>(k % 7); });
  row([](int64_t k) { return k == 5 ? NaN : 1.0; });
  row([](int64_t k) { return k == 36 ? INF : -1.0; });
  row([](int64_t k) { return 0.5 + static_cast<double>(k % 3); });
  row([](int64_t k) { return k == 0 ? 1e30 : 1.0; });
  const HostTensor x = host(DType::F32, Shape{6, in}, xv);
  const HostTensor w = random_i8(Shape{in, out}, rng);
  const HostTensor s = random_f32(Shape{out}, rng, 0.001, 0.02);
  const HostTensor b = random_f32(Shape{out}, rng, -1, 1);
  for (const Level& lv : levels())
    for (bool tensor : {false, true})
      for (Activation act : {Activation::NONE, Activation::RELU}) {
        SCOPED_TRACE(std::string(lv.isa.empty() ? "ref" : lv.isa) + (tensor ? " tensor " : " row ") +
                     activation_name(act));
        const OpOutput y = run_i8(x, w, s, b, imms_of(act, tensor), lv.cfg);
        ASSERT_TRUE(y.status) << y.status.message();
        const Expected e = naive_linear_i8(x, w, s, b, tensor, act_fn(act));
        EXPECT_TRUE(matches(e, y));
        for (int64_t c = 0; c < out; ++c) {
          if (!tensor) {
            EXPECT_EQ(y.v[c], act::apply(act, static_cast<float>(b.v[c]) + 0.f, 0)) << "zero row, column " << c;
          }
          EXPECT_TRUE(std::isnan(y.v[2 * out + c])) << c;
          EXPECT_TRUE(std::isnan(y.v[3 * out + c])) << c;
          EXPECT_EQ(std::isnan(y.v[4 * out + c]), tensor) << c;
        }
        expect_i8_kernel(y, lv);
      }
}

// Both kernels called directly at every level where the CPU has them (the widening one always,
// so this CPU runs the kernel a CPU without VNNI gets), bitwise against the reference kernel,
// with a guard after y.
TEST(LinearI8, EachKernelVariantEqualsTheReferenceBitwise) {
  std::mt19937 rng(37);
  KernelCache cache;
  int ran_vnni = 0;
  for (Isa isa : jit_levels())
    for (bool vnni : {false, true}) {
      if (vnni && !linear_i8_has_vnni(isa)) {
        std::printf("[ SKIPPED  ] LinearI8: no %s on this CPU: %s's vpdpbusd kernel not run\n",
                    isa == Isa::AVX2 ? "AVX-VNNI" : "AVX512_VNNI", isa_name(isa));
        continue;
      }
      ran_vnni += vnni;
      int c = 0;
      for (int64_t in : {1, 3, 5, 63, 65, 784})
        for (int64_t out : {1, 15, 17, 33, 256})
          for (int64_t rows : {1, 2, 3, 5, 9}) {
            const Activation act = static_cast<Activation>(c % ACTIVATION_COUNT);
            const int mode = (c++ / ACTIVATION_COUNT) % 3;
            HostTensor x = random_f32(Shape{rows, in}, rng, -3, 2);
            if (c % 5 == 0) x.v[0] = c % 10 ? NaN : -INF;
            if (c % 7 == 0)
              for (int64_t k = 0; k < in; ++k) x.v[static_cast<size_t>((rows - 1) * in + k)] = 0;
            const HostTensor w = random_i8(Shape{in, out}, rng);
            const std::vector<HostTensor> p = naive_pack_i8(w);
            const HostTensor s = random_f32(Shape{c % 3 ? out : 1}, rng, 0.001, 0.02);
            const HostTensor b = random_f32(Shape{out}, rng, -1, 1);
            SCOPED_TRACE(describe(Opcode::LINEAR_I8, {x, w, s, b}, {}) + " act " + activation_name(act) + " " +
                         isa_name(isa) + (vnni ? " vnni" : "") + " mode " + std::to_string(mode));
            const int n_in = mode == 2 ? 7 : 5;
            Instruction ins = mode == 2 ? make_instruction(Opcode::LINEAR_I8, {0, 1, 2, 3, 4, 5, 6}, {7})
                                        : make_instruction(Opcode::LINEAR_I8, {0, 1, 2, 3, 4}, {5});
            ASSERT_EQ(apply_imms(&ins, imms_of(act, mode)), "");
            // sx: usually a fitting scale, sometimes 0 (divides by 1), the zero point across u8.
            const float gsx = c % 11 == 0 ? 0.f : 0.004f * static_cast<float>(1 + c % 9);
            const uint8_t gzp = static_cast<uint8_t>((c * 37) % 256);
            const TensorType types[] = {x.type, p[0].type, p[1].type, s.type, b.type,
                                        TensorType{DType::F32, Shape{}}, TensorType{DType::U8, Shape{1}},
                                        TensorType{DType::F32, Shape{rows, out}}};
            const TensorType* out_types = types + (mode == 2 ? 7 : 5);
            Result<std::shared_ptr<const JitKernel>> k = linear_i8_kernel(ins, types, isa, vnni, cache);
            ASSERT_TRUE(k) << k.status().message();
            ASSERT_NE(k.value(), nullptr);
            EXPECT_EQ(k.value()->name().find("_vnni") != std::string::npos, vnni) << k.value()->name();
            std::vector<float> xf(x.v.begin(), x.v.end()), sf(s.v.begin(), s.v.end()), bf(b.v.begin(), b.v.end());
            std::vector<int8_t> wp(p[0].v.begin(), p[0].v.end());
            std::vector<int32_t> cs(p[1].v.begin(), p[1].v.end());
            std::vector<float> y(static_cast<size_t>(rows * out + 16), -7.f), want(y.size(), -7.f);
            AlignedBuffer scratch(op_hooks(Opcode::LINEAR_I8).scratch(ins, types, out_types));
            const void* in_ptrs[] = {xf.data(), wp.data(), cs.data(), sf.data(), bf.data(), &gsx, &gzp};
            void* out_ptrs[] = {y.data()};
            const KernelArgs args{in_ptrs, out_ptrs, types, out_types, &ins, n_in, 1, scratch.data(), nullptr,
                                  scratch.data()};
            k.value()->fn()(&args);
            void* want_ptrs[] = {want.data()};
            const KernelArgs ref_args{in_ptrs, want_ptrs, types, out_types, &ins, n_in, 1, nullptr, nullptr, nullptr};
            op_hooks(Opcode::LINEAR_I8).ref(&ref_args);
            expect_kernel_equals_reference(y, want, exact_act(act));
          }
    }
  if (cpu_info().avx512_vnni && cpu_info().best == Isa::AVX512) {
    EXPECT_GT(ran_vnni, 0);
  }
}

// x_scale=given against the naive loop at every level and with the JIT off: odd sizes, every
// activation, sx and the zero point of rank 0 and [1], a NaN row now and then.
TEST(LinearI8, GivenScaleMatchesNaiveLoopAtEveryLevelAndWithJitOff) {
  std::mt19937 rng(47);
  for (const Level& lv : levels()) {
    int c = 0;
    for (int64_t in : {1, 3, 5, 63, 65, 784})
      for (int64_t out : {1, 15, 17, 33, 256})
        for (int64_t rows : {1, 3, 7, 64}) {
          if (in * out * rows > 4'000'000) continue;
          const Activation act = static_cast<Activation>(c % ACTIVATION_COUNT);
          const bool rank0 = c++ % 2;
          HostTensor x = random_f32(x_shape(rows, in), rng, -2, 3);
          if (c % 4 == 0) x.v[x.v.size() - 1 - static_cast<size_t>(c % in)] = NaN;
          const HostTensor w = random_i8(Shape{in, out}, rng);
          const HostTensor s = random_f32(Shape{c % 3 ? out : 1}, rng, 0.001, 0.02);
          const HostTensor b = random_f32(Shape{out}, rng, -1, 1);
          // A scale that clips now and then (5/255 < the range of 5), and any zero point.
          const float sx = 5.f / 255.f * static_cast<float>(c % 4 + 1) / 3.f;
          const int64_t zp = (c * 53) % 256;
          SCOPED_TRACE(describe(Opcode::LINEAR_I8, {x, w, s, b}, imms_of(act, 2)) + " " +
                       (lv.isa.empty() ? "ref" : lv.isa) + fmt::format(" sx {} zp {}", sx, zp));
          const OpOutput y = run_i8_given(x, w, s, b, sx_of(sx, rank0), zp_of(zp, rank0), act, lv.cfg);
          ASSERT_TRUE(y.status) << y.status.message();
          EXPECT_TRUE(matches(naive_linear_i8_given(x, w, s, b, sx, zp, act_fn(act), act_tol(act)), y));
          expect_i8_kernel(y, lv);
        }
  }
}

// x_scale=given's edge values: sx = 0 gives act(b), a NaN sx and a NaN or ±inf x NaN (that row
// only), ±inf sx NaN, a negative sx mirrors, huge values saturate at 0 and 255.
TEST(LinearI8, GivenScaleEdgeValues) {
  std::mt19937 rng(53);
  const int64_t in = 37, out = 19;
  std::vector<double> xv;
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t k = 0; k < in; ++k) xv.push_back(r == 1 && k == 3 ? NaN : r == 2 ? (k % 2 ? 1e30 : -1e30) : 0.1 * k - 2);
  const HostTensor x = host(DType::F32, Shape{4, in}, xv);
  const HostTensor w = random_i8(Shape{in, out}, rng);
  const HostTensor s = random_f32(Shape{out}, rng, 0.001, 0.02);
  const HostTensor b = random_f32(Shape{out}, rng, -1, 1);
  for (const Level& lv : levels())
    for (float sx : {0.f, 0.02f, -0.02f, static_cast<float>(NaN), static_cast<float>(INF)})
      for (int64_t zp : {0, 128, 255}) {
        SCOPED_TRACE(std::string(lv.isa.empty() ? "ref" : lv.isa) + fmt::format(" sx {} zp {}", sx, zp));
        const OpOutput y = run_i8_given(x, w, s, b, sx_of(sx, true), zp_of(zp, false), Activation::NONE, lv.cfg);
        ASSERT_TRUE(y.status) << y.status.message();
        EXPECT_TRUE(matches(naive_linear_i8_given(x, w, s, b, sx, zp, act_fn(Activation::NONE)), y));
        for (int64_t c = 0; c < out; ++c) {
          EXPECT_TRUE(std::isnan(y.v[out + c])) << c;
          if (sx == 0) {
            EXPECT_EQ(y.v[c], static_cast<float>(b.v[c])) << c;
          }
          if (std::isnan(sx) || std::isinf(sx)) {
            EXPECT_TRUE(std::isnan(y.v[c])) << c;
          }
        }
        expect_i8_kernel(y, lv);
      }
}

// Two threads split the columns into parts; each value is as one thread computes it.
TEST(LinearI8, PartsSplitTheColumns) {
  std::mt19937 rng(41);
  const HostTensor x = random_f32(Shape{64, 784}, rng, -1, 2);
  const HostTensor w = random_i8(Shape{784, 250}, rng);
  const HostTensor s = random_f32(Shape{250}, rng, 0.001, 0.02);
  const HostTensor b = random_f32(Shape{250}, rng, -1, 1);
  for (Isa isa : jit_levels()) {
    SCOPED_TRACE(isa_name(isa));
    const RunConfig cfg{true, JitConfig{true, isa}, 2};
    const OpOutput y = run_i8(x, w, s, b, imms_of(Activation::RELU, false), cfg);
    ASSERT_TRUE(y.status) << y.status.message();
    EXPECT_EQ(y.parts, 2);
    EXPECT_TRUE(matches(naive_linear_i8(x, w, s, b, false, act_fn(Activation::RELU)), y));
    const OpOutput g = run_i8_given(x, w, s, b, sx_of(0.012, true), zp_of(85, true), Activation::RELU, cfg);
    ASSERT_TRUE(g.status) << g.status.message();
    EXPECT_EQ(g.parts, 2);
    EXPECT_TRUE(matches(naive_linear_i8_given(x, w, s, b, 0.012f, 85, act_fn(Activation::RELU)), g));
  }
}

TEST(LinearI8, ShapeErrorsNameTheOperand) {
  const TensorType x{DType::F32, Shape{2, 5}}, wp{DType::I8, Shape{2, 3, 4}}, cs{DType::I32, Shape{3}},
      s{DType::F32, Shape{3}}, b{DType::F32, Shape{3}};
  auto fails = [](std::vector<TensorType> in, std::vector<std::string> needles) {
    EXPECT_TRUE(append_fails(Opcode::LINEAR_I8, in, {}, needles));
  };
  fails({TensorType{DType::I32, Shape{2, 5}}, wp, cs, s, b}, {"LINEAR_I8", "x", "i32[2,5]", "must be f32"});
  fails({TensorType{DType::F32, Shape()}, wp, cs, s, b}, {"x", "rank 1 or more"});
  fails({TensorType{DType::F32, Shape{1, 65537}}, TensorType{DType::I8, Shape{16385, 3, 4}}, cs, s, b},
        {"x", "65537 features", "at most 65536"});
  fails({x, TensorType{DType::F32, Shape{2, 3, 4}}, cs, s, b}, {"packed weight", "f32[2,3,4]", "i8[2, out, 4]"});
  fails({x, TensorType{DType::I8, Shape{3, 3, 4}}, cs, s, b}, {"packed weight", "i8[3,3,4]", "5 features"});
  fails({x, TensorType{DType::I8, Shape{2, 3}}, cs, s, b}, {"packed weight", "i8[2,3]", "LINEAR_WEIGHTS_I8"});
  fails({x, TensorType{DType::I8, Shape{2, 3, 2}}, cs, s, b}, {"packed weight", "i8[2,3,2]"});
  fails({x, wp, TensorType{DType::F32, Shape{3}}, s, b}, {"column sums", "f32[3]", "must be i32[3]"});
  fails({x, wp, TensorType{DType::I32, Shape{4}}, s, b}, {"column sums", "i32[4]", "must be i32[3]"});
  fails({x, wp, cs, TensorType{DType::F32, Shape{2}}, b}, {"weight scale", "f32[2]", "f32[3] (per output) or f32[1]"});
  fails({x, wp, cs, TensorType{DType::F32, Shape()}, b}, {"weight scale", "f32[]"});
  fails({x, wp, cs, TensorType{DType::I32, Shape{3}}, b}, {"weight scale", "i32[3]"});
  fails({x, wp, cs, s, TensorType{DType::F32, Shape{4}}}, {"bias", "f32[4]", "must be f32[3]"});
  fails({x, wp, cs, s, TensorType{DType::I8, Shape{3}}}, {"bias", "i8[3]", "must be f32[3]"});
  // x_scale=given: 7 inputs, and 5 for the others; sx f32 and zp u8 of one element.
  const TensorType sx{DType::F32, Shape{}}, zp{DType::U8, Shape{1}};
  const std::vector<ImmArg> given{imm_enum("x_scale", "given")};
  auto fails_given = [&](std::vector<TensorType> in, std::vector<std::string> needles) {
    EXPECT_TRUE(append_fails(Opcode::LINEAR_I8, in, given, needles));
  };
  fails_given({x, wp, cs, s, b}, {"x_scale=given takes 7 inputs", "sx, zp", "got 5"});
  fails({x, wp, cs, s, b, sx, zp}, {"x_scale=row takes 5 inputs", "x_scale=given adds sx, zp", "got 7"});
  EXPECT_TRUE(append_fails(Opcode::LINEAR_I8, {x, wp, cs, s, b, sx, zp}, {imm_enum("x_scale", "tensor")},
                           {"x_scale=tensor takes 5 inputs"}));
  fails_given({x, wp, cs, s, b, TensorType{DType::F32, Shape{2}}, zp}, {"x's scale", "f32[2]", "f32[] or f32[1]"});
  fails_given({x, wp, cs, s, b, TensorType{DType::I32, Shape{}}, zp}, {"x's scale", "i32[]"});
  fails_given({x, wp, cs, s, b, sx, TensorType{DType::I8, Shape{1}}}, {"x's zero point", "i8[1]", "u8[] or u8[1]"});
  fails_given({x, wp, cs, s, b, sx, TensorType{DType::U8, Shape{1, 1}}}, {"x's zero point", "u8[1,1]"});
  EXPECT_TRUE(append_fails(Opcode::LINEAR_WEIGHTS_I8, {TensorType{DType::F32, Shape{5, 3}}}, {},
                           {"LINEAR_WEIGHTS_I8", "f32[5,3]", "must be i8[in, out]", "QUANTIZE"}));
  EXPECT_TRUE(append_fails(Opcode::LINEAR_WEIGHTS_I8, {TensorType{DType::I8, Shape{5, 3, 1}}}, {},
                           {"LINEAR_WEIGHTS_I8", "i8[5,3,1]", "must be i8[in, out]"}));
}

TEST(LinearI8, HasNoGradient) {
  EXPECT_EQ(op_hooks(Opcode::LINEAR_WEIGHTS_I8).grad, nullptr);
  expect_no_gradient(
      Opcode::LINEAR_I8,
      {TensorType{DType::F32, Shape{2, 5}},
       TensorType{DType::I8, Shape{2, 3, 4}}, TensorType{DType::I32, Shape{3}},
       TensorType{DType::F32, Shape{3}}, TensorType{DType::F32, Shape{3}}},
      {0, 4});
}

const char* PROGRAM =
    "input %x : f32[3,8]\nparam @w : i8[8,4]\nparam @s : f32[4]\nparam @b : f32[4]\noutput %y\n\nforward:\n"
    "  LINEAR_WEIGHTS_I8 @w -> %wp, %cs\n  LINEAR_I8 %x, %wp, %cs, @s, @b -> %h x_scale=tensor\n"
    "  LEAKYRELU %h -> %y slope=0.2\n";

// The derive pass moves the packing to the derive section (its input is a param), and act fusion
// takes the activation into LINEAR_I8's epilogue.
TEST(LinearI8, DeriveHoistsThePackingAndActFusionTakesTheActivation) {
  expect_derive_and_act_fusion(PROGRAM, Opcode::LINEAR_WEIGHTS_I8, Opcode::LINEAR_I8, Activation::LEAKYRELU, 0.2f);
}

// A whole program, its weight a param and then a constant, at -O0 and -O1 (derive, constant
// folding), run by the executor: the same values as the naive loop.
TEST(LinearI8, ProgramRunsTheSameAtEachOptLevel) {
  std::mt19937 rng(43);
  const HostTensor x = random_f32(Shape{3, 5}, rng, -1, 2);
  const HostTensor w = random_i8(Shape{5, 3}, rng);
  const HostTensor s = host(DType::F32, Shape{3}, {0.01, 0.02, 0.005});
  const HostTensor b = host(DType::F32, Shape{3}, {0.5, -0.25, 0});
  const Expected e = naive_linear_i8(x, w, s, b, false, act_fn(Activation::NONE));
  auto list = [](const HostTensor& t) {
    std::string v;
    for (double d : t.v) v += (v.empty() ? "" : ", ") + fmt::format("{}", static_cast<float>(d));
    return "[" + v + "]";
  };
  for (const char* kind : {"param", "const"})
    for (int opt : {0, 1}) {
      SCOPED_TRACE(std::string(kind) + " -O" + std::to_string(opt));
      const std::string text = fmt::format(
          "input %x : f32[3,5]\n{0} @w : i8[5,3] = {1}\n{0} @s : f32[3] = {2}\n{0} @b : f32[3] = {3}\noutput %y\n\n"
          "forward:\n  LINEAR_WEIGHTS_I8 @w -> %wp, %cs\n  LINEAR_I8 %x, %wp, %cs, @s, @b -> %y\n",
          kind, list(w), list(s), list(b));
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
      ASSERT_EQ(y->numel(), 9);
      for (int64_t i = 0; i < 9; ++i) EXPECT_EQ(y->f32()[i], e.t.v[static_cast<size_t>(i)]) << i;
    }
}

TEST(LinearI8, ListingRefusesAnUnknownXScale) {
  std::string text = PROGRAM;
  text.replace(text.find("x_scale=tensor"), 14, "x_scale=column");
  Context ctx;
  Program p(ctx);
  const Status st = program_parse(text, "t.nnasm", &p);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("column"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("t.nnasm:9:"), std::string::npos) << st.message();
}

TEST(LinearI8, GivenScaleListingRoundTripsAndRuns) {
  const char* text =
      "input %x : f32[2,5]\nconst @w : i8[5,2] = [1, -2, 3, -4, 5, -6, 7, -8, 9, -10]\nconst @s : f32[1] = [0.5]\n"
      "const @b : f32[2] = [0.25, -0.25]\nconst @sx : f32[] = [0.125]\nconst @zp : u8[] = [3]\noutput %y\n\n"
      "forward:\n  LINEAR_WEIGHTS_I8 @w -> %wp, %cs\n  LINEAR_I8 %x, %wp, %cs, @s, @b, @sx, @zp -> %y x_scale=given\n";
  Context ctx;
  Program p(ctx);
  ASSERT_TRUE(program_parse(text, "t.nnasm", &p));
  const std::string once = program_print(p);
  EXPECT_NE(once.find("x_scale=given"), std::string::npos) << once;
  Context ctx2;
  Program q(ctx2);
  ASSERT_TRUE(program_parse(once, "t2.nnasm", &q)) << once;
  EXPECT_EQ(program_print(q), once);
  auto made = Executor::prepare(q);
  ASSERT_TRUE(made) << made.status().message();
  Executor& ex = *made.value();
  // q = rne(x / 0.125) + 3: x = 0.0625 is a tie (rounds to 0), -1 gives q = 0 (-8 + 3 saturates).
  const float xs[] = {0.0625f, 0.25f, -1.f, 0.5f, 1.f, 0.f, 0.f, 0.f, 0.f, 0.125f};
  std::copy(xs, xs + 10, ex.tensor("x")->f32());
  ex.run();
  const HostTensor x = host(DType::F32, Shape{2, 5}, {0.0625, 0.25, -1, 0.5, 1, 0, 0, 0, 0, 0.125});
  const HostTensor w = host(DType::I8, Shape{5, 2}, {1, -2, 3, -4, 5, -6, 7, -8, 9, -10});
  const Expected e = naive_linear_i8_given(x, w, host(DType::F32, Shape{1}, {0.5}),
                                           host(DType::F32, Shape{2}, {0.25, -0.25}), 0.125f, 3,
                                           act_fn(Activation::NONE));
  // Row 0: q − zp = 0, 2, −3, 4, 8 → Σ·w[:,0] = 0 + 6 − 15 + 28 + 72 = 91, y = 91·0.0625 + 0.25.
  EXPECT_EQ(ex.tensor("y")->f32()[0], 91 * 0.0625f + 0.25f);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(ex.tensor("y")->f32()[i], e.t.v[static_cast<size_t>(i)]) << i;
}

TEST(LinearI8, ListingRoundTrips) {
  Context ctx;
  Program p(ctx);
  ASSERT_TRUE(program_parse(PROGRAM, "t.nnasm", &p));
  const std::string once = program_print(p);
  EXPECT_NE(once.find("LINEAR_I8    %x, %wp, %cs, @s, @b -> %h"), std::string::npos) << once;
  EXPECT_NE(once.find("x_scale=tensor"), std::string::npos) << once;
  EXPECT_NE(once.find("LINEAR_WEIGHTS_I8 @w -> %wp, %cs"), std::string::npos) << once;
  Context ctx2;
  Program q(ctx2);
  ASSERT_TRUE(program_parse(once, "t2.nnasm", &q)) << once;
  EXPECT_EQ(program_print(q), once);
}

// The shell function records the packing and the product, with its immediates.
TEST(LinearI8, ShellFunctionRecordsPackingThenProduct) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {3, 10});
  Var w = g.constant("w", {10, 6}, std::vector<double>(60, -3), DType::I8);
  Var s = g.constant("s", {1}, {0.5});
  Var b = g.constant("b", {6}, std::vector<double>(6, 1));
  Var y = linear_i8(x, w, s, b, Activation::RELU, 0, true);
  ASSERT_TRUE(g.status()) << g.status().message();
  EXPECT_EQ(y.type().str(), "f32[3,6]");
  ASSERT_EQ(p.code().size(), 2u);
  EXPECT_EQ(p.code()[0].op, Opcode::LINEAR_WEIGHTS_I8);
  EXPECT_EQ(p.code()[1].op, Opcode::LINEAR_I8);
  EXPECT_EQ(fused_act(p.code()[1]), Activation::RELU);
  EXPECT_EQ(p.code()[1].i(NNASM_IMM(LINEAR_I8, x_scale)), NNASM_CHOICE(LINEAR_I8, x_scale, tensor));
  // An f32 weight is refused by the packing, with its message kept.
  Var wf = g.constant("wf", {10, 6}, std::vector<double>(60, 1));
  EXPECT_FALSE(linear_i8(x, wf, s, b).valid());
  EXPECT_NE(g.status().message().find("LINEAR_WEIGHTS_I8"), std::string::npos) << g.status().message();
}

}  // namespace
}  // namespace nnasm::test
