// CONV2D_BWD_DATA and CONV2D_BWD_WEIGHT: CONV2D's gradient products, as instructions of their own
// (the backward section names them like any other; ops/conv/conv2d.cpp emits them).
//
// Computes   CONV2D_BWD_DATA    %dy, %w, %x -> %dx: dx = Σ over the output of dy ⋆ w scattered back
//                               to the input positions each output read (the adjoint of CONV2D
//                               without bias); x only gives dx's shape, its data is not read.
//            CONV2D_BWD_WEIGHT  %x, %dy, %w -> %dw: dw[o, c, i, j] = Σ_{n, oy, ox} dy[n, o, oy, ox] ·
//                               x[n, g·Cg + c, oy·sh − ph + i·dh, ox·sw − pw + j·dw]; w only gives
//                               dw's shape.
// Inputs     dy: f32[N, O, Ho, Wo] as CONV2D of x and w makes it; x, w as CONV2D takes them.
// Immediates stride, pad, dilation, groups: CONV2D's.
// Gradient   CONV2D_BWD_DATA (ONNX ConvTranspose runs as one, so an imported model trains through
//            it): dx = A_wᵀ·dy for CONV2D's linear map A_w, so with G the gradient of dx,
//            d(dy) = A_w·G = CONV2D(G, w), and since ⟨G, A_wᵀ·dy⟩ = ⟨CONV2D(G, w), dy⟩,
//            d(w) = CONV2D_BWD_WEIGHT(G, dy, w): the weight gradient of a convolution of G whose
//            output gradient is dy. Same immediates; none to x (only its shape is read).
//            CONV2D_BWD_WEIGHT: none (no second derivatives of a convolution are needed for
//            training, and no import makes one).
// Kernels    both: per image and group, GEMMs around im2col / col2im (ops/conv/conv_geom.h):
//            data cols = W_gᵀ·dY then col2im; weight dW_g += dY·colsᵀ. Reference: ops/linalg/gemm.h.
//            JIT: bound kernels (ops/conv/conv_jit.h) calling the generated GEMM — the weight
//            gradient's accumulates into dW (beta = 1) image after image, so the sum order is
//            fixed: one part. The data gradient splits its images into parallel parts; at stride 1
//            (padding at most (k − 1)·d) it is the direct kernel of ops/conv/conv_direct.h run
//            on dy with the weights flipped, `f32_conv2d_bwd_data_direct__avx2_6x2` (depthwise:
//            the depthwise kernel of ops/conv/conv_depthwise.h the same way,
//            `f32_conv2d_bwd_data_depthwise__avx512_8x2`), and the weight
//            gradient a direct kernel too (`f32_conv2d_bwd_weight_direct__avx2_2x5`: a vector of
//            partial sums per weight over every image, summed at the end in a fixed order).
#include <cstring>

#include "ops/conv/conv_geom.h"
#include "ops/conv/conv_jit.h"
#include "ops/grad.h"
#include "ops/linalg/gemm.h"
#include "ops/op.h"

namespace nnasm {
namespace {

// dy must be what CONV2D of x and w makes.
Status check_dy(const Instruction& ins, const ConvGeom& g, const TensorType& dy, int dy_k) {
  const Shape want{g.n, g.o, g.ho, g.wo};
  if (dy.dtype != DType::F32 || !(dy.shape == want))
    return Status::errorf("{}: gradient {} must be f32{}, the shape CONV2D makes", ins.info().mnemonic,
                          operand_str(ins, dy_k, dy), want.str());
  return Status::ok();
}

Status data_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(require_f32(ins, in));
  ConvGeom g;
  NNASM_TRY(conv_geom(ins, in[2], 2, in[1], 1, &g));
  NNASM_TRY(check_dy(ins, g, in[0], 0));
  (*out)[0] = in[2];
  return Status::ok();
}

Status weight_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(require_f32(ins, in));
  ConvGeom g;
  NNASM_TRY(conv_geom(ins, in[0], 0, in[2], 2, &g));
  NNASM_TRY(check_dy(ins, g, in[1], 1));
  (*out)[0] = in[2];
  return Status::ok();
}

ConvGeom data_geom(const Instruction& ins, const TensorType* in) { return conv_geom_unchecked(ins, in[2].shape, in[1].shape); }
ConvGeom weight_geom(const Instruction& ins, const TensorType* in) { return conv_geom_unchecked(ins, in[0].shape, in[2].shape); }
GemmShape data_gemm(const ConvGeom& g) { return GemmShape{g.k(), g.p(), g.og(), true, false}; }
GemmShape weight_gemm(const ConvGeom& g) { return GemmShape{g.og(), g.k(), g.p(), false, true}; }

size_t data_scratch(const Instruction& ins, const TensorType* in, const TensorType*) {
  const ConvGeom g = data_geom(ins, in);
  return std::max(conv_ref_scratch(g, data_gemm(g)), conv_jit_scratch(g, ConvPass::BACKWARD_DATA));
}

size_t weight_scratch(const Instruction& ins, const TensorType* in, const TensorType*) {
  const ConvGeom g = weight_geom(ins, in);
  return std::max(conv_ref_scratch(g, weight_gemm(g)), conv_jit_scratch(g, ConvPass::BACKWARD_WEIGHT));
}

void data_ref(const KernelArgs* a) {
  const ConvGeom g = data_geom(*a->ins, a->in_type);
  const float* dy = static_cast<const float*>(a->in[0]);
  const float* w = static_cast<const float*>(a->in[1]);
  float* dx = static_cast<float*>(a->out[0]);
  float* cols = static_cast<float*>(a->scratch);
  float* gemm_scratch = cols + conv_cols_floats(g);
  const int64_t image = g.c * g.h * g.w, out_image = g.o * g.p();
  std::memset(dx, 0, static_cast<size_t>(g.n * image) * sizeof(float));
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      std::memset(cols, 0, static_cast<size_t>(g.k() * g.p()) * sizeof(float));
      gemm_accumulate(data_gemm(g), w + grp * g.og() * g.k(), dy + n * out_image + grp * g.og() * g.p(), cols,
                      gemm_scratch);
      col2im_add(g, cols, grp, dx + n * image);
    }
  }
}

void weight_ref(const KernelArgs* a) {
  const ConvGeom g = weight_geom(*a->ins, a->in_type);
  const float* x = static_cast<const float*>(a->in[0]);
  const float* dy = static_cast<const float*>(a->in[1]);
  float* dw = static_cast<float*>(a->out[0]);
  float* cols = static_cast<float*>(a->scratch);
  float* gemm_scratch = cols + conv_cols_floats(g);
  const int64_t image = g.c * g.h * g.w, out_image = g.o * g.p();
  std::memset(dw, 0, static_cast<size_t>(g.o * g.k()) * sizeof(float));
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      im2col(g, x + n * image, grp, cols);
      gemm_accumulate(weight_gemm(g), dy + n * out_image + grp * g.og() * g.p(), cols, dw + grp * g.og() * g.k(),
                      gemm_scratch);
    }
  }
}

Status data_grad(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy,
                 const std::vector<bool>& need, std::vector<TensorId>* dx) {
  const std::vector<std::pair<const char*, Imm>> imms = conv_geom_imms(ins);
  const TensorId d_out = ins.in[0], w = ins.in[1];
  if (need[0]) (*dx)[0] = b.emit(Opcode::CONV2D, {dy[0], w}, imms);
  if (need[1]) (*dx)[1] = b.emit(Opcode::CONV2D_BWD_WEIGHT, {dy[0], d_out, w}, imms);
  return b.status();
}

Result<std::shared_ptr<const JitKernel>> data_jit(const JitRequest& r, KernelCache& c) {
  return conv_jit(r, c, ConvPass::BACKWARD_DATA, data_geom(r.ins, r.in));
}
Result<std::shared_ptr<const JitKernel>> weight_jit(const JitRequest& r, KernelCache& c) {
  return conv_jit(r, c, ConvPass::BACKWARD_WEIGHT, weight_geom(r.ins, r.in));
}
int data_parts(const JitRequest& r, int threads) {
  return conv_jit_parts(data_geom(r.ins, r.in), ConvPass::BACKWARD_DATA, threads);
}

}  // namespace

OpHooks op_hooks_CONV2D_BWD_DATA() { return {data_shape, data_ref, data_scratch, data_grad, data_jit, data_parts}; }
OpHooks op_hooks_CONV2D_BWD_WEIGHT() { return {weight_shape, weight_ref, weight_scratch, no_gradient, weight_jit, nullptr}; }

}  // namespace nnasm
