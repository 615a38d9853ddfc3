// CONV2D: 2-D convolution, NCHW.
//
// Computes   y[n, o, oy, ox] = act(b[o] + Σ_{c, i, j} w[o, c, i, j] ·
//                x[n, g·Cg + c, oy·sh − ph + i·dh, ox·sw − pw + j·dw]), g = o / Og, zero padding
//            (cross-correlation, as PyTorch's Conv2d).
// Inputs     x: f32[N, C, H, W]; w: f32[O, C/groups, kh, kw] (PyTorch's layout); b: f32[O],
//            optional (two inputs: no bias).
// Outputs    y: f32[N, O, Ho, Wo], Ho = ⌊(H + 2ph − dh·(kh − 1) − 1) / sh⌋ + 1, Wo likewise.
// Immediates stride, pad, dilation: [h, w] pairs, default [1,1], [0,0], [1,1]; groups, default 1
//            (groups = C = O: depthwise); act, act_alpha: a fused activation as LINEAR's.
// Gradient   dZ from the output as LINEAR's (ops/linalg/act_grad.h); dx = CONV2D_BWD_DATA(dZ, w),
//            dw = CONV2D_BWD_WEIGHT(x, dZ), db = Σ over N, Ho, Wo of dZ (REDUCE_SUMs).
// Kernels    both: per image and group, im2col (ops/conv/conv_geom.h; skipped for a 1×1, stride 1,
//            unpadded kernel, where x is already the matrix) then W_g·cols.
//            reference: bias broadcast, ops/linalg/gemm.h's GEMM accumulates, then the activation.
//            JIT, depthwise (groups = C = O), column stride 1 or 2 (any row stride): the
//            depthwise kernel (ops/conv/conv_depthwise.h: reads x in place, masked loads instead
//            of padding, rows × vectors of one channel in registers over the taps; at column
//            stride 2 a vshufps picks each tap's even or odd input columns),
//            `f32_conv2d_depthwise_bias__avx512_8x2` (strided: `..._bias__avx512_s2x2_4x4`); a
//            single image splits its channels into the parts. Its data gradient takes the
//            depthwise kernel at stride 1 only (ops/conv/conv2d_bwd.cpp); the weight gradient,
//            the general path.
//            JIT, 3×3 at stride 1 with at least 8 channels in and out over 32 tiles or more:
//            Winograd's F(2×2, 3×3) (ops/conv/conv_winograd.h: the weights, the input tiles and
//            the output tiles transformed around 16 GEMMs; rounding differs from the direct
//            sum's, within the parity tolerance), `f32_conv2d_winograd__avx512_14x32`.
//            JIT, strided (column stride 1 or 2) on at most 4 input channels (a stem): the direct
//            kernel below at that stride, `f32_conv2d_direct_bias_relu__avx512_s2x2_6x4`.
//            JIT, stride 1 with an output row of one vector, where flat mode runs at most one
//            vector more than the map has rows (1×1 unpadded: the whole map within 4 vectors):
//            the direct kernel's flat mode (ops/conv/conv_direct.h: the padded rows run as one
//            long row, the junk columns past each output row dropped when the rows are copied
//            out), `f32_conv2d_direct_flat_bias__avx512_6x4`.
//            JIT, other stride 1, unless 1×1 and unpadded, with an output row of two vectors or
//            more or at most 256 weights an output channel: the direct kernel (ops/conv/
//            conv_direct.h: a zero-padded copy of the image, output channels × columns held in
//            registers over channels and taps, bias and activation applied before the store),
//            `f32_conv2d_direct_bias_relu__avx2_6x2` (ops/conv/conv_jit.cpp's flat_forward and
//            direct_forward say why).
//            JIT, the rest (other strides; 1×1; wider small maps of many channels): a bound kernel
//            (jit/kernel.h) runs im2col in C++ and calls the generated GEMM (jit/gemm.h:
//            `f32_conv2d__avx512_gemv_m6` for few output channels, the packed 14×32
//            otherwise) and an elementwise epilogue (bias per channel, then
//            the activation's snippet); the images are split into parallel parts, or a single
//            image's output channels (the GEMM's rows, each part running the whole im2col).
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "jit/elementwise.h"
#include "jit/gemm.h"
#include "ops/conv/conv_geom.h"
#include "ops/conv/conv_jit.h"
#include "ops/elementwise/activation.h"
#include "ops/linalg/act_grad.h"
#include "ops/linalg/gemm.h"
#include "ops/op.h"

namespace nnasm {
namespace {

Status conv2d_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  if (in.size() != 2 && in.size() != 3)
    return Status::errorf("CONV2D takes 2 or 3 inputs (x, w, optional bias), got {}", in.size());
  NNASM_TRY(require_f32(ins, in));
  ConvGeom g;
  NNASM_TRY(conv_geom(ins, in[0], 0, in[1], 1, &g));
  if (in.size() == 3 && (in[2].dtype != DType::F32 || in[2].shape.rank != 1 || in[2].shape[0] != g.o))
    return Status::errorf("CONV2D: bias {} must be f32[{}], one per output channel", operand_str(ins, 2, in[2]), g.o);
  (*out)[0] = TensorType{DType::F32, Shape{g.n, g.o, g.ho, g.wo}};
  return Status::ok();
}

ConvGeom geom(const Instruction& ins, const TensorType* in) { return conv_geom_unchecked(ins, in[0].shape, in[1].shape); }

GemmShape ref_gemm(const ConvGeom& g) { return GemmShape{g.og(), g.p(), g.k(), false, false}; }

size_t conv2d_scratch(const Instruction& ins, const TensorType* in, const TensorType*) {
  const ConvGeom g = geom(ins, in);
  return std::max(conv_ref_scratch(g, ref_gemm(g)), conv_jit_scratch(g, ConvPass::FORWARD));
}

void conv2d_ref(const KernelArgs* a) {
  const ConvGeom g = geom(*a->ins, a->in_type);
  const float* x = static_cast<const float*>(a->in[0]);
  const float* w = static_cast<const float*>(a->in[1]);
  const float* b = a->n_in == 3 ? static_cast<const float*>(a->in[2]) : nullptr;
  float* y = static_cast<float*>(a->out[0]);
  float* cols = static_cast<float*>(a->scratch);
  float* gemm_scratch = cols + conv_cols_floats(g);
  const int64_t image = g.c * g.h * g.w, out_image = g.o * g.p();
  for (int64_t n = 0; n < g.n; ++n) {
    float* yn = y + n * out_image;
    for (int64_t o = 0; o < g.o; ++o) std::fill(yn + o * g.p(), yn + (o + 1) * g.p(), b ? b[o] : 0.f);
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const float* m = x + n * image + grp * g.cg() * g.h * g.w;
      if (!g.pointwise()) {
        im2col(g, x + n * image, grp, cols);
        m = cols;
      }
      gemm_accumulate(ref_gemm(g), w + grp * g.og() * g.k(), m, yn + grp * g.og() * g.p(), gemm_scratch);
    }
  }
  const auto f = fused_act(*a->ins);
  if (f == Activation::NONE) return;
  const float alpha = static_cast<float>(fused_act_alpha(*a->ins));
  for (int64_t i = 0; i < g.n * out_image; ++i) y[i] = act::apply(f, y[i], alpha);
}

Status conv2d_grad(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy,
                   const std::vector<bool>& need, std::vector<TensorId>* dx) {
  Result<TensorId> dz = act_grad_from_output(b, ins, dy[0]);
  if (!dz) return dz.status();
  const std::vector<std::pair<const char*, Imm>> imms = conv_geom_imms(ins);
  const TensorId x = ins.in[0], w = ins.in[1];
  if (need[0]) (*dx)[0] = b.emit(Opcode::CONV2D_BWD_DATA, {*dz, w, x}, imms);
  if (need[1]) (*dx)[1] = b.emit(Opcode::CONV2D_BWD_WEIGHT, {x, *dz, w}, imms);
  if (ins.in.size() == 3 && need[2]) {
    const Shape& s = b.type(*dz).shape;  // [N, O, Ho, Wo]
    const TensorId per_image = b.emit(Opcode::REDUCE_SUM, {b.reshape(*dz, Shape{s[0], s[1], s[2] * s[3]})}, {{"axis", imm_i(2)}});
    (*dx)[2] = b.emit(Opcode::REDUCE_SUM, {per_image}, {{"axis", imm_i(0)}});
  }
  return b.status();
}

Result<std::shared_ptr<const JitKernel>> conv2d_jit(const JitRequest& r, KernelCache& cache) {
  return conv_jit(r, cache, ConvPass::FORWARD, geom(r.ins, r.in));
}

int conv2d_parts(const JitRequest& r, int threads) { return conv_jit_parts(geom(r.ins, r.in), ConvPass::FORWARD, threads); }

}  // namespace

OpHooks op_hooks_CONV2D() { return {conv2d_shape, conv2d_ref, conv2d_scratch, conv2d_grad, conv2d_jit, conv2d_parts}; }

}  // namespace nnasm
