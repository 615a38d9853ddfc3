// CONV_WEIGHTS_I8 and CONV2D_I8: a convolution with an i8 weight and activations quantized to u8
// on the fly (ONNX's DynamicQuantizeLinear then ConvInteger), the integer sum exact in i32: LINEAR_I8
// (ops/quant/linear_i8.cpp) for convolutions, per image instead of per row.
//
// CONV_WEIGHTS_I8
// Computes   the weight in the layout CONV2D_I8 reads: wp[o, q, i, j, l] = w[o, 4q + l, i, j] (0 for
//            4q + l ≥ C: the pad weights make the pad channels' activations harmless), and
//            colsum[o] = Σ_{c, i, j} w[o, c, i, j] (the zero point's correction).
// Inputs     w: i8[O, C, kh, kw] (CONV2D's layout).
// Outputs    wp: i8[O, ⌈C/4⌉, kh, kw, 4]; colsum: i32[O].
// Gradient   none (inference storage).
// Kernels    reference only: its input is a param or constant, so the derive pass
//            (engine/passes/derive.cpp) runs it once, not per run.
//
// CONV2D_I8
// Computes   for each image x[n] (x_scale=image), or for all of x at once (x_scale=tensor, exactly
//            ONNX's DynamicQuantizeLinear), LINEAR_I8's quantization: lo = min(0, min x[n]),
//            hi = max(0, max x[n]), sx = (hi − lo) / 255 (f32), zp = sat_u8(rne(−lo / sx)),
//            q = sat_u8(rne(x / sx) + zp), the padding positions q = zp (x = 0); then
//              acc[o, p] = Σ_k q_k·w[o, k] − zp·colsum_o (i32, exact; k over C·kh·kw as CONV2D's
//                          im2col, p an output pixel),
//              y[n, o, p] = act(fma(f32(acc), sx·s_o, b_o) + nanflag), nanflag = Σ x·0 over the image
//              (the tensor): 0, or NaN where a value is NaN or ±inf.
//            x_scale=given (a static QDQ model's): sx and zp are inputs, q = sat_u8(rne(x / sx) +
//            zp) exactly as QUANTIZE, the rest as above (nanflag per image); sx = 0 divides by 1
//            (y = act(b)), a NaN or ±inf sx gives NaN outputs, as LINEAR_I8's given mode.
// Inputs     x: f32[N, C, H, W]; wp, colsum: CONV_WEIGHTS_I8's; scale: f32[O] or [1], the weight's
//            scale per output channel (or one); b: f32[O], optional (four inputs: b = 0);
//            x_scale=given only, last: sx f32[] or [1], zp u8[] or [1] (6 inputs, or 7 with b).
// Outputs    y: f32[N, O, Ho, Wo] (NCHW; Ho, Wo as CONV2D's).
// Immediates stride, pad, dilation, groups: CONV2D's (groups must be 1: grouped and depthwise
//            convolutions stay f32); act, act_alpha: as LINEAR's; x_scale: image, tensor or given.
// Gradient   none: int8 weights are inference storage; training stays f32 (CONV2D).
// Kernels    reference: plain loops over the packed weight.
//            JIT (AVX2 and AVX-512): a bound kernel (jit/kernel.h) per image: the quantization's
//            parameters (the reference's own function), x quantized into the scratch as channel
//            quads [⌈C/4⌉, H, W, 4] of u8 (vectorized C++ per level, rounding as vroundps), then
//            im2col of those dwords into cols [C4·kh·kw, P, 4] (padding = zp; skipped for a 1×1
//            unpadded stride-1 kernel, whose quantized image already is cols); then a generated
//            GEMM y[o, pixels] = wp[o, :]·cols: blocks of rows (output channels) × vectors of
//            pixels in registers, each quad of k one vector of 16 (8) pixels × 4 u8 against the
//            row's broadcast weight quad, so it writes NCHW rows directly. With VNNI
//            (`i8_conv2d__avx512_vnni_6x64`, AVX-VNNI's `__avx2_vnni_4x16`): vpdpbusd with the
//            quad broadcast from memory. Without (`__avx512_6x32`, `__avx2_4x8`): the columns
//            widened to u16 (vpmovzxbw), the weight widened to i16 once per run, vpmaddwd into pairs
//            of k per pixel, the pairs added once per tile (LINEAR_I8's widening scheme, with the
//            roles of the operands swapped). The epilogue (− zp·colsum, the conversion, the fma
//            with sx·s and b, + nanflag, the activation snippet, the store) is fused; zp·colsum
//            and sx·s are computed per image in C++ with the reference's operations. Parallel
//            parts split the output pixels in whole vectors; each part quantizes the image itself
//            (in its own scratch) and builds only its columns, so the values do not depend on the
//            threads. The integer
//            part is exact and the epilogue the reference's f32 operations in its order, so the
//            JIT equals the reference bitwise (after the activation too for none, relu,
//            leakyrelu and clipped_relu, whose snippets are exact).
// Notes      C·kh·kw ≤ 65536 keeps the i32 sums exact (255·128·K < 2^31). An all-zero image has
//            sx = 0: q and zp are 0 (the kernels divide by 1 instead), so y = act(b). Denormals
//            follow the run's flushing, alike in both kernels.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <fmt/format.h>
#include <xbyak/xbyak.h>

#include "isa/activation.h"
#include "jit/act_snippet.h"
#include "jit/frame.h"
#include "jit/vecgen.h"
#include "ops/conv/conv_geom.h"
#include "ops/elementwise/activation.h"
#include "ops/op.h"
#include "ops/quant/conv_i8.h"
#include "ops/quant/i8_quant.h"

namespace nnasm {
namespace {

constexpr int64_t MAX_K = 65536;

int64_t quads(int64_t c) { return (c + 3) / 4; }
int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// ---- CONV_WEIGHTS_I8 ----

Status weights_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  if (in[0].dtype != DType::I8 || in[0].shape.rank != 4)
    return Status::errorf("CONV_WEIGHTS_I8: the weight, {}, must be i8[out, in, kh, kw] (QUANTIZE an f32 weight first)",
                          operand_str(ins, 0, in[0]));
  const Shape& w = in[0].shape;
  (*out)[0] = TensorType{DType::I8, Shape{w[0], quads(w[1]), w[2], w[3], 4}};
  (*out)[1] = TensorType{DType::I32, Shape{w[0]}};
  return Status::ok();
}

void weights_ref(const KernelArgs* a) {
  const Shape& s = a->in_type[0].shape;
  const int64_t o = s[0], c = s[1], taps = s[2] * s[3], c4 = quads(c);
  const int8_t* w = static_cast<const int8_t*>(a->in[0]);
  int8_t* wp = static_cast<int8_t*>(a->out[0]);
  int32_t* colsum = static_cast<int32_t*>(a->out[1]);
  for (int64_t oo = 0; oo < o; ++oo) {
    int32_t sum = 0;
    for (int64_t q = 0; q < c4; ++q)
      for (int64_t t = 0; t < taps; ++t)
        for (int64_t l = 0; l < 4; ++l) {
          const int64_t cc = 4 * q + l;
          const int8_t v = cc < c ? w[(oo * c + cc) * taps + t] : 0;
          wp[((oo * c4 + q) * taps + t) * 4 + l] = v;
          sum += v;
        }
    colsum[oo] = sum;
  }
}

// ---- CONV2D_I8: shape ----

bool tensor_scale(const Instruction& ins) {
  return ins.i(NNASM_IMM(CONV2D_I8, x_scale)) == NNASM_CHOICE(CONV2D_I8, x_scale, tensor);
}

bool one_element(const Shape& s) { return s.rank == 0 || (s.rank == 1 && s[0] == 1); }

ConvGeom geom(const Instruction& ins, const TensorType* in) {
  const Shape& x = in[0].shape;
  const Shape& wp = in[1].shape;
  return conv_geom_of(ins, x[0], x[1], x[2], x[3], wp[0], wp[2], wp[3]);
}

Status conv2d_i8_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  const bool given = conv2d_i8_given(ins);
  if (!given && in.size() != 4 && in.size() != 5)
    return Status::errorf("CONV2D_I8 takes 4 or 5 inputs (x, packed weight, column sums, scale, optional bias; "
                          "x_scale=given adds sx, zp), got {}",
                          in.size());
  if (given && in.size() != 6 && in.size() != 7)
    return Status::errorf("CONV2D_I8 x_scale=given takes 6 or 7 inputs (x, packed weight, column sums, scale, "
                          "optional bias, sx, zp), got {}",
                          in.size());
  if (in[0].dtype != DType::F32 || in[0].shape.rank != 4)
    return Status::errorf("CONV2D_I8: x, {}, must be f32[N, C, H, W] (it is quantized to u8 in the kernel)",
                          operand_str(ins, 0, in[0]));
  NNASM_TRY(conv_imms_check(ins));
  if (ins.i(CONV_GROUPS) != 1)
    return Status::errorf("CONV2D_I8: groups must be 1, got {} (grouped and depthwise convolutions stay f32: CONV2D)",
                          ins.i(CONV_GROUPS));
  const int64_t c = in[0].shape[1];
  const Shape& wp = in[1].shape;
  if (in[1].dtype != DType::I8 || wp.rank != 5 || wp[1] != quads(c) || wp[4] != 4)
    return Status::errorf("CONV2D_I8: the packed weight, {}, must be i8[out, {}, kh, kw, 4] for x's {} channels "
                          "(CONV_WEIGHTS_I8's first output)",
                          operand_str(ins, 1, in[1]), quads(c), c);
  const ConvGeom g = geom(ins, in.data());
  if (g.k() > MAX_K)
    return Status::errorf("CONV2D_I8: x, {}, under a {}x{} kernel sums {} products a value; at most {} keep the i32 "
                          "sums exact (use CONV2D)",
                          operand_str(ins, 0, in[0]), g.kh, g.kw, g.k(), MAX_K);
  NNASM_TRY(conv_fits(ins, g, in[0], 0));
  if (in[2].dtype != DType::I32 || in[2].shape.rank != 1 || in[2].shape[0] != g.o)
    return Status::errorf("CONV2D_I8: the column sums, {}, must be i32[{}] (CONV_WEIGHTS_I8's second output)",
                          operand_str(ins, 2, in[2]), g.o);
  const Shape& s = in[3].shape;
  if (in[3].dtype != DType::F32 || s.rank != 1 || (s[0] != g.o && s[0] != 1))
    return Status::errorf("CONV2D_I8: the weight scale, {}, must be f32[{}] (per output channel) or f32[1]",
                          operand_str(ins, 3, in[3]), g.o);
  const size_t n_in = in.size();
  if (given && (in[n_in - 2].dtype != DType::F32 || !one_element(in[n_in - 2].shape)))
    return Status::errorf("CONV2D_I8: x's scale, {}, must be f32[] or f32[1] (one per tensor)",
                          operand_str(ins, static_cast<int>(n_in - 2), in[n_in - 2]));
  if (given && (in[n_in - 1].dtype != DType::U8 || !one_element(in[n_in - 1].shape)))
    return Status::errorf("CONV2D_I8: x's zero point, {}, must be u8[] or u8[1] (one per tensor; QUANTIZE's u8)",
                          operand_str(ins, static_cast<int>(n_in - 1), in[n_in - 1]));
  if (conv2d_i8_has_bias(ins, n_in) && (in[4].dtype != DType::F32 || in[4].shape.rank != 1 || in[4].shape[0] != g.o))
    return Status::errorf("CONV2D_I8: the bias, {}, must be f32[{}], one per output channel",
                          operand_str(ins, 4, in[4]), g.o);
  (*out)[0] = TensorType{DType::F32, Shape{g.n, g.o, g.ho, g.wo}};
  return Status::ok();
}

// ---- CONV2D_I8: reference ----

// The reference's scratch: one image's q, u8.
size_t ref_scratch(const ConvGeom& g) { return static_cast<size_t>(round_up(g.c * g.h * g.w, 64)); }

void conv2d_i8_ref(const KernelArgs* a) {
  const ConvGeom g = geom(*a->ins, a->in_type);
  const float* x = static_cast<const float*>(a->in[0]);
  const int8_t* wp = static_cast<const int8_t*>(a->in[1]);
  const int32_t* colsum = static_cast<const int32_t*>(a->in[2]);
  const float* scale = static_cast<const float*>(a->in[3]);
  const bool per_out = a->in_type[3].shape[0] == g.o && g.o != 1;
  const float* b = conv2d_i8_has_bias(*a->ins, a->n_in) ? static_cast<const float*>(a->in[4]) : nullptr;
  float* y = static_cast<float*>(a->out[0]);
  uint8_t* q = static_cast<uint8_t*>(a->scratch);
  const Activation f = fused_act(*a->ins);
  const float alpha = static_cast<float>(fused_act_alpha(*a->ins));
  const int64_t image = g.c * g.h * g.w, c4 = quads(g.c);
  const bool whole = tensor_scale(*a->ins);
  const bool given = conv2d_i8_given(*a->ins);
  const I8QParams all = whole ? i8_qparams(x, g.n * image) : I8QParams{};
  const float gsx = given ? *static_cast<const float*>(a->in[a->n_in - 2]) : 0.f;
  const int32_t gzp = given ? *static_cast<const uint8_t*>(a->in[a->n_in - 1]) : 0;
  for (int64_t n = 0; n < g.n; ++n) {
    const float* xn = x + n * image;
    const I8QParams qp = whole ? all : given ? i8_given_qparams(gsx, gzp, xn, image) : i8_qparams(xn, image);
    for (int64_t k = 0; k < image; ++k) q[k] = static_cast<uint8_t>(quantize_u8(xn[k] / qp.div, qp.zp));
    for (int64_t o = 0; o < g.o; ++o) {
      const float t = qp.sx * scale[per_out ? o : 0];
      const float bo = b ? b[o] : 0.f;
      for (int64_t oy = 0; oy < g.ho; ++oy)
        for (int64_t ox = 0; ox < g.wo; ++ox) {
          int32_t acc = 0;
          for (int64_t c = 0; c < g.c; ++c)
            for (int64_t i = 0; i < g.kh; ++i)
              for (int64_t j = 0; j < g.kw; ++j) {
                const int64_t iy = oy * g.sh - g.ph + i * g.dh, ix = ox * g.sw - g.pw + j * g.dw;
                const int32_t v = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w ? q[(c * g.h + iy) * g.w + ix] : qp.zp;
                acc += v * wp[(((o * c4 + c / 4) * g.kh + i) * g.kw + j) * 4 + c % 4];
              }
          acc -= qp.zp * colsum[o];
          y[((n * g.o + o) * g.ho + oy) * g.wo + ox] =
              act::apply(f, std::fma(static_cast<float>(acc), t, bo) + qp.p, alpha);
        }
    }
  }
}

}  // namespace

// Reference only: CONV_WEIGHTS_I8 runs once, in the derive section, where its input is a param.
OpHooks op_hooks_CONV_WEIGHTS_I8() { return {weights_shape, weights_ref}; }

// JIT hooks: ops/quant/conv_i8_jit.cpp. No gradient hook: autodiff refuses a path through it, by name.
OpHooks op_hooks_CONV2D_I8() {
  OpHooks h{conv2d_i8_shape, conv2d_i8_ref, conv2d_i8_scratch, nullptr, conv2d_i8_jit, conv2d_i8_parts};
  return h;
}

bool conv2d_i8_given(const Instruction& ins) {
  return ins.i(NNASM_IMM(CONV2D_I8, x_scale)) == NNASM_CHOICE(CONV2D_I8, x_scale, given);
}
bool conv2d_i8_has_bias(const Instruction& ins, size_t n_in) { return n_in == (conv2d_i8_given(ins) ? 7u : 5u); }

size_t conv2d_i8_ref_scratch(const Instruction& ins, const TensorType* in) { return ref_scratch(geom(ins, in)); }
ConvGeom conv2d_i8_geom(const Instruction& ins, const TensorType* in) { return geom(ins, in); }

}  // namespace nnasm
