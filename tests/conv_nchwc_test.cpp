// CONV2D_NCHWC against a naive convolution written here over plain NCHW data, the test packing x
// and w into the blocked layout itself (ops/layout/nchwc.h): odd and tail channel counts, maps,
// kernels, strides, padding and dilation, with and without a bias, a residual and a fused relu,
// b = 8 and 16, at the reference and at every JIT level, with guard bands. The generated kernel is what ran
// where a level has one; two threads give the bits one gives, whichever way the parts split;
// and the shape errors name the operand at fault.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "ops/op.h"
#include "tests/jit_levels.h"
#include "tests/op_harness.h"

namespace nnasm::test {
namespace {

struct Case {
  int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw;
  bool bias, relu;
  bool residual = false;  // a last input r shaped as y, added before the relu
};

std::string describe(const Case& c, int64_t b) {
  return fmt::format("b={} x [{},{},{},{}] o={} k {}x{} s {}x{} p {}x{} d {}x{}{}{}", b, c.n, c.c, c.h, c.w, c.o, c.kh,
                     c.kw, c.sh, c.sw, c.ph, c.pw, c.dh, c.dw, c.bias ? " bias" : "", c.relu ? " relu" : "") +
         (c.residual ? " residual" : "");
}

int64_t blocks(int64_t c, int64_t b) { return (c + b - 1) / b; }
int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) { return (in + 2 * p - d * (k - 1) - 1) / s + 1; }

// x [n, c, h, w] in blocks of b channels: [n, ⌈c/b⌉, h, w, b], zeros past c.
HostTensor pack_x(const HostTensor& x, int64_t b) {
  const Shape& s = x.type.shape;
  const Shape ps = shape_of({s[0], blocks(s[1], b), s[2], s[3], b});
  HostTensor p{TensorType{DType::F32, ps}, std::vector<double>(static_cast<size_t>(count_of(ps)), 0.0)};
  for (int64_t i = 0; i < count_of(s); ++i) {
    const std::vector<int64_t> at = unravel(i, s);  // n, c, y, x
    p.v[ravel({at[0], at[1] / b, at[2], at[3], at[1] % b}, ps)] = x.v[i];
  }
  return p;
}

// w [o, c, kh, kw] packed: [⌈o/b⌉, ⌈c/b⌉, kh, kw, b (input lane), b (output lane)], zeros past o, c.
HostTensor pack_w(const HostTensor& w, int64_t b) {
  const Shape& s = w.type.shape;
  const Shape ps = shape_of({blocks(s[0], b), blocks(s[1], b), s[2], s[3], b, b});
  HostTensor p{TensorType{DType::F32, ps}, std::vector<double>(static_cast<size_t>(count_of(ps)), 0.0)};
  for (int64_t i = 0; i < count_of(s); ++i) {
    const std::vector<int64_t> at = unravel(i, s);  // o, c, i, j
    p.v[ravel({at[0] / b, at[1] / b, at[2], at[3], at[1] % b, at[0] % b}, ps)] = w.v[i];
  }
  return p;
}

struct Operands {
  std::vector<HostTensor> in;  // blocked x, packed w, bias, residual
  Expected want;               // blocked y
};

// Random NCHW operands, their blocked forms, and y computed in double over the NCHW data then
// laid out in blocks; lanes past o are act(r) (their packed weights and bias are zero; r is
// random in every lane, as blocked y is) or act(0) = 0 without a residual.
Operands make(const Case& c, int64_t b, std::mt19937& rng) {
  const HostTensor x = random_f32(shape_of({c.n, c.c, c.h, c.w}), rng);
  const HostTensor w = random_f32(shape_of({c.o, c.c, c.kh, c.kw}), rng);
  const HostTensor bias = random_f32(shape_of({c.o}), rng);
  const int64_t ho = out_size(c.h, c.kh, c.sh, c.ph, c.dh), wo = out_size(c.w, c.kw, c.sw, c.pw, c.dw);
  const Shape ys = shape_of({c.n, blocks(c.o, b), ho, wo, b});
  Operands r;
  r.in = {pack_x(x, b), pack_w(w, b)};
  if (c.bias) r.in.push_back(bias);
  const HostTensor res = c.residual ? random_f32(ys, rng) : HostTensor{};
  if (c.residual) r.in.push_back(res);
  const double k = static_cast<double>(c.c * c.kh * c.kw + 2);
  r.want = Expected{HostTensor{TensorType{DType::F32, ys}, std::vector<double>(static_cast<size_t>(count_of(ys)), 0.0)},
                    std::vector<double>(static_cast<size_t>(count_of(ys)), 0.0), Tolerance{1e-6, 2e-6 + 1.2e-7 * k}};
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t o = 0; o < ys[1] * b; ++o)
      for (int64_t oy = 0; oy < ho; ++oy)
        for (int64_t ox = 0; ox < wo; ++ox) {
          const int64_t yi = ravel({n, o / b, oy, ox, o % b}, ys);
          double s = c.bias && o < c.o ? bias.v[o] : 0, mag = std::fabs(s);
          if (c.residual) {
            s += res.v[yi];
            mag += std::fabs(res.v[yi]);
          }
          for (int64_t ch = 0; ch < (o < c.o ? c.c : 0); ++ch)
            for (int64_t i = 0; i < c.kh; ++i)
              for (int64_t j = 0; j < c.kw; ++j) {
                const int64_t iy = oy * c.sh - c.ph + i * c.dh, ix = ox * c.sw - c.pw + j * c.dw;
                if (iy < 0 || iy >= c.h || ix < 0 || ix >= c.w) continue;
                const double t = x.v[((n * c.c + ch) * c.h + iy) * c.w + ix] * w.v[((o * c.c + ch) * c.kh + i) * c.kw + j];
                s += t;
                mag += std::fabs(t);
              }
          r.want.t.v[yi] = c.relu && s < 0 ? 0 : s;
          r.want.mag[yi] = mag;
        }
  return r;
}

std::vector<ImmArg> imms(const Case& c) {
  std::vector<ImmArg> v = {imm_ints("stride", {c.sh, c.sw}), imm_ints("pad", {c.ph, c.pw}), imm_ints("dilation", {c.dh, c.dw})};
  if (c.relu) v.push_back(imm_enum("act", "relu"));
  if (c.residual) v.push_back(imm_b("residual", true));
  return v;
}

RunConfig at(Isa isa, int threads = 1) { return RunConfig{true, JitConfig{isa != Isa::REF, isa}, threads}; }

// Whether `isa` has a generated kernel for blocks of b: AVX-512 code for 16 at AVX512, AVX2 code
// for 8 at both levels.
bool generated(Isa isa, int64_t b) { return b == 8 || isa == Isa::AVX512; }

// C and O over 1, 7, 8, 9, 16, 17, 33; maps 1×1, 3×5, 7×7, 13×11, 14×14 (and 28×28, a 60-wide
// one in row segments); kernels 1×1 to 7×7; strides 1 and 2; pads 0, 1, 3 (past the kernel's
// reach: border pixels with no tap in the map); dilation 2; one and two images.
const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {1, 7, 7, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1, true, false},
      {2, 9, 3, 5, 17, 3, 3, 1, 1, 1, 1, 1, 1, false, true},
      {1, 17, 14, 14, 33, 3, 3, 1, 1, 1, 1, 1, 1, true, true},
      {1, 33, 13, 11, 16, 3, 3, 2, 2, 1, 1, 1, 1, true, false},
      {2, 16, 14, 14, 8, 1, 1, 2, 2, 0, 0, 1, 1, true, false},
      {1, 8, 7, 7, 7, 1, 1, 1, 1, 0, 0, 1, 1, false, false},
      {1, 33, 7, 7, 33, 1, 1, 1, 1, 0, 0, 1, 1, true, true},
      {1, 9, 1, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, true, false},
      {1, 1, 13, 11, 7, 5, 5, 1, 1, 2, 2, 1, 1, true, true},
      {2, 7, 14, 14, 9, 7, 7, 2, 2, 3, 3, 1, 1, true, false},
      {1, 16, 13, 11, 17, 3, 3, 1, 1, 3, 3, 1, 1, false, false},
      {1, 17, 14, 14, 16, 3, 3, 1, 1, 2, 2, 2, 2, true, false},
      {1, 9, 7, 7, 33, 5, 5, 2, 1, 0, 2, 1, 1, true, true},
      {1, 1, 3, 5, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, false},
      {1, 33, 28, 28, 17, 3, 3, 1, 1, 1, 1, 1, 1, true, true},
      {1, 8, 9, 60, 16, 3, 3, 1, 1, 1, 1, 1, 1, true, false},
      {1, 64, 7, 7, 64, 3, 3, 1, 1, 1, 1, 1, 1, true, false},
      {2, 40, 14, 14, 72, 1, 1, 1, 1, 0, 0, 1, 1, true, false},
      {1, 7, 14, 14, 33, 1, 1, 2, 2, 0, 0, 1, 1, false, true},
      {1, 17, 14, 14, 33, 3, 3, 1, 1, 1, 1, 1, 1, true, true, true},
      {2, 9, 7, 5, 7, 3, 3, 2, 1, 1, 1, 1, 1, false, false, true},
      {1, 16, 13, 11, 17, 1, 1, 1, 1, 0, 0, 1, 1, true, false, true},
      {1, 8, 9, 60, 9, 3, 3, 1, 1, 1, 1, 1, 1, false, true, true},
  };
  return c;
}

TEST(ConvNchwc, MatchesNaiveNchwConvolutionAtEveryLevel) {
  std::mt19937 rng(142);
  for (const Case& c : cases())
    for (int64_t b : {8, 16}) {
      SCOPED_TRACE(describe(c, b));
      const Operands ops = make(c, b, rng);
      const OpOutput ref = run_op(Opcode::CONV2D_NCHWC, ops.in, imms(c), false, at(Isa::REF));
      EXPECT_TRUE(matches(ops.want, ref));
      EXPECT_EQ(ref.kernel, "ref");
      for (Isa isa : jit_levels()) {
        SCOPED_TRACE(isa_name(isa));
        const OpOutput got = run_op(Opcode::CONV2D_NCHWC, ops.in, imms(c), false, at(isa));
        EXPECT_TRUE(matches(ops.want, got));
        if (generated(isa, b)) {
          EXPECT_NE(got.kernel.find("f32_conv2d_nchwc"), std::string::npos) << got.kernel;
          EXPECT_NE(got.kernel.find(b == 16 ? "__avx512_" : "__avx2_"), std::string::npos) << got.kernel;
          EXPECT_EQ(got.kernel.find("_sum") != std::string::npos, c.residual) << got.kernel;
        } else {
          EXPECT_EQ(got.kernel, "ref");
        }
      }
    }
}

// Two threads split the images (two of them), the output blocks (an even count), or the pixels
// (one block, or three), and every output bit is the one-thread run's.
TEST(ConvNchwc, TwoThreadsGiveTheBitsOfOne) {
  const Case split[] = {
      {2, 17, 14, 14, 33, 3, 3, 1, 1, 1, 1, 1, 1, true, true},
      {1, 64, 7, 7, 64, 3, 3, 1, 1, 1, 1, 1, 1, true, false},
      {1, 320, 14, 14, 8, 3, 3, 2, 2, 1, 1, 1, 1, true, false},
      {1, 512, 7, 7, 48, 1, 1, 1, 1, 0, 0, 1, 1, false, true},
      {2, 17, 14, 14, 33, 3, 3, 1, 1, 1, 1, 1, 1, true, true, true},
      {1, 64, 7, 7, 64, 3, 3, 1, 1, 1, 1, 1, 1, false, true, true},
      {1, 320, 14, 14, 8, 3, 3, 2, 2, 1, 1, 1, 1, true, false, true},
  };
  std::mt19937 rng(7);
  for (const Case& c : split)
    for (int64_t b : {8, 16})
      for (Isa isa : jit_levels()) {
        SCOPED_TRACE(describe(c, b) + " " + isa_name(isa));
        if (!generated(isa, b)) continue;
        const Operands ops = make(c, b, rng);
        const OpOutput one = run_op(Opcode::CONV2D_NCHWC, ops.in, imms(c), false, at(isa, 1));
        const OpOutput two = run_op(Opcode::CONV2D_NCHWC, ops.in, imms(c), false, at(isa, 2));
        EXPECT_TRUE(matches(ops.want, two));
        EXPECT_EQ(two.parts, 2) << two.kernel;
        ASSERT_EQ(one.v.size(), two.v.size());
        for (size_t i = 0; i < one.v.size(); ++i) {
          const float a = static_cast<float>(one.v[i]), e = static_cast<float>(two.v[i]);
          ASSERT_EQ(std::memcmp(&a, &e, 4), 0) << "element " << i << ": " << a << " vs " << e;
        }
      }
}

TensorType f32s(std::vector<int64_t> d) { return TensorType{DType::F32, shape_of(d)}; }

TEST(ConvNchwc, ShapeErrorsNameTheOperand) {
  const Opcode op = Opcode::CONV2D_NCHWC;
  const TensorType x = f32s({1, 2, 7, 7, 16}), w = f32s({3, 2, 3, 3, 16, 16});
  EXPECT_TRUE(append_fails(op, {x}, {}, {"CONV2D_NCHWC", "2 or 3 inputs"}));
  EXPECT_TRUE(append_fails(op, {f32s({1, 32, 7, 7}), w}, {}, {"input operand 1", "NCHWc"}));
  EXPECT_TRUE(append_fails(op, {f32s({1, 8, 7, 7, 4}), w}, {}, {"input operand 1", "b = 8 or 16"}));
  EXPECT_TRUE(append_fails(op, {x, f32s({48, 32, 3, 3})}, {}, {"weight operand 2", "packed"}));
  EXPECT_TRUE(append_fails(op, {x, f32s({6, 4, 3, 3, 8, 8})}, {}, {"weight operand 2", "b = 16"}));
  EXPECT_TRUE(append_fails(op, {x, f32s({3, 3, 3, 3, 16, 16})}, {}, {"weight operand 2", "takes 3 input blocks", "has 2"}));
  EXPECT_TRUE(append_fails(op, {x, w, f32s({49})}, {}, {"bias operand 3", "3 output blocks"}));
  EXPECT_TRUE(append_fails(op, {x, w, f32s({3, 16})}, {}, {"bias operand 3"}));
  EXPECT_TRUE(append_fails(op, {x, w, TensorType{DType::I32, shape_of({40})}}, {}, {"operand 3", "f32"}));
  EXPECT_TRUE(append_fails(op, {x, w}, {imm_i("groups", 2)}, {"groups must be 1"}));
  EXPECT_TRUE(append_fails(op, {x, w}, {imm_ints("stride", {0, 1})}, {"stride"}));
  EXPECT_TRUE(append_fails(op, {x, w}, {imm_ints("pad", {1})}, {"pad", "2 entries"}));
  EXPECT_TRUE(append_fails(op, {x, f32s({3, 2, 9, 9, 16, 16})}, {}, {"9x9 kernel", "does not fit", "input operand 1"}));
  // residual=1: r is the last input, shaped exactly as y [1, 3, 5, 5, 16].
  const ImmArg res = imm_b("residual", true);
  const TensorType y = f32s({1, 3, 5, 5, 16}), bias = f32s({40});
  EXPECT_TRUE(append_fails(op, {x, w}, {res}, {"residual=1", "3 or 4 inputs", "got 2"}));
  EXPECT_TRUE(append_fails(op, {x, w, bias, y, y}, {res}, {"residual=1", "3 or 4 inputs", "got 5"}));
  EXPECT_TRUE(append_fails(op, {x, w, y, y}, {}, {"2 or 3 inputs", "got 4"}));
  EXPECT_TRUE(append_fails(op, {x, w, f32s({1, 3, 5, 4, 16})}, {res}, {"residual operand 3", "shaped as the output", "[1,3,5,5,16]"}));
  EXPECT_TRUE(append_fails(op, {x, w, bias, f32s({1, 2, 5, 5, 16})}, {res}, {"residual operand 4", "shaped as the output"}));
  EXPECT_TRUE(append_fails(op, {x, w, bias, f32s({1, 3, 5, 5, 8})}, {res}, {"residual operand 4"}));
  EXPECT_TRUE(append_fails(op, {x, w, f32s({49}), y}, {res}, {"bias operand 3", "3 output blocks"}));
}

// No backward rule: the layout pass leaves training programs in NCHW.
TEST(ConvNchwc, HasNoGradient) { EXPECT_EQ(op_hooks(Opcode::CONV2D_NCHWC).grad, nullptr); }
}  // namespace
}  // namespace nnasm::test
