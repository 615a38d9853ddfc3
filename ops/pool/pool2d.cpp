// MAXPOOL2D and AVGPOOL2D: 2-D max and average pooling, NCHW (PyTorch's MaxPool2d and AvgPool2d,
// ceil_mode included).
//
// Computes   MAXPOOL2D  y[n, c, oy, ox] = max of x[n, c, iy, ix] over the window
//                       iy ∈ [oy·sh − ph, oy·sh − ph + kh), ix ∈ [ox·sw − pw, ox·sw − pw + kw);
//                       padding counts as −inf (it never wins: every window holds an element of
//                       the image).
//            AVGPOOL2D  y = Σ over the window's image elements / divisor; with
//                       count_include_pad=1 the divisor is the window's part inside the padded
//                       input (padding counts as zeros; kh·kw but for a ceil_mode window that
//                       reaches past the right padding), else the number of image elements in
//                       the window. Both as PyTorch.
// Inputs     x: f32[N, C, H, W].
// Outputs    y: f32[N, C, Ho, Wo], Ho = ⌊(H + 2ph − kh) / sh⌋ + 1, Wo likewise; with ceil_mode=1
//            ⌈(H + 2ph − kh) / sh⌉ + 1, less one when that last window would start at or past H
//            (in the right padding): PyTorch's and ONNX's rule.
// Immediates kernel: [kh, kw], each ≥ 1, required. stride: [sh, sw], each ≥ 1; default [0,0]
//            means the kernel (PyTorch's default). pad: [ph, pw], default [0,0], each at most
//            half the kernel (as PyTorch). AVGPOOL2D: count_include_pad, default 1 (PyTorch's).
//            ceil_mode, default 0 (last in the schema, so listings written before it keep their
//            meaning). A kernel larger than the padded input is an error.
// Gradient   MAXPOOL2D: dx = MAXPOOL2D_BWD(dy, x), each dy to its window's first maximum (the
//            argmax is recomputed from x rather than kept as a second output).
//            AVGPOOL2D: dx = AVGPOOL2D_BWD(dy, x), each dy / divisor to every image element of
//            its window. Both in ops/pool/pool2d_bwd.cpp.
// Kernels    reference: per output row, the window's taps are folded into the row one tap at a
//            time (a max or a sum over strided loads); padding is clipped once per tap, not
//            tested per element. JIT (ops/pool/pool_jit.h), any stride, padding and ceil_mode,
//            windows up to 16 a side and 64 taps: vectors of outputs, the taps unrolled in the
//            reference's order with its NaN rule, padding and a ceil_mode window's part past
//            the image folded as the identity (−inf, +0), the divisor the reference's, so
//            bitwise equal to it (`f32_maxpool2d__avx512_3x3s2`, `f32_avgpool2d__avx2_3x3s1`);
//            the planes split into parallel parts. The one difference: of a window's several
//            NaNs, the sum keeps the payload of whichever the add takes first, and for the
//            reference the compiler picks that operand order (it differs between its vector and
//            scalar loops).
// Notes      NaN: a window holding NaN gives NaN (MAXPOOL2D as PyTorch, the window's last NaN
//            in row-major order; AVGPOOL2D by IEEE arithmetic). ±inf: max as ordered; a mean of +inf and −inf is NaN. Does not
//            allocate.
#include <cstring>
#include <limits>

#include "ops/op.h"
#include "ops/pool/pool_geom.h"
#include "ops/pool/pool_jit.h"

namespace nnasm {
namespace {

Status pool_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(require_f32(ins, in));
  PoolGeom g;
  NNASM_TRY(pool_geom(ins, in[0], 0, &g));
  (*out)[0] = TensorType{DType::F32, Shape{g.n, g.c, g.ho, g.wo}};
  return Status::ok();
}

// y row oy of one plane: the row starts at `init` and takes in the window's taps in row-major
// window order, each through `fold(acc, v)`; padding taps are skipped.
template <int64_t SW, class Fold>
void fold_row_sw(const PoolGeom& g, const float* x, int64_t oy, float init, Fold fold, float* yr) {
  const int64_t sw = SW > 0 ? SW : g.sw;
  for (int64_t ox = 0; ox < g.wo; ++ox) yr[ox] = init;
  int64_t r0, r1;
  g.row_range(oy, &r0, &r1);
  for (int64_t iy = r0; iy < r1; ++iy) {
    const float* xr = x + iy * g.w;
    for (int64_t j = 0; j < g.kw; ++j) {
      int64_t c0, c1;
      g.tap_cols(j, &c0, &c1);
      const float* xt = xr + j - g.pw;
      for (int64_t ox = c0; ox < c1; ++ox) yr[ox] = fold(yr[ox], xt[ox * sw]);
    }
  }
}

// The column stride as a constant for the common strides, so that g++ vectorizes the tap loop
// (strided loads become shuffles); any other stride runs the same loop with it as a variable.
template <class Fold>
void fold_row(const PoolGeom& g, const float* x, int64_t oy, float init, Fold fold, float* yr) {
  if (g.sw == 1) fold_row_sw<1>(g, x, oy, init, fold, yr);
  else if (g.sw == 2) fold_row_sw<2>(g, x, oy, init, fold, yr);
  else fold_row_sw<0>(g, x, oy, init, fold, yr);
}

void maxpool_ref(const KernelArgs* a) {
  const PoolGeom g = pool_geom_unchecked(*a->ins, a->in_type[0].shape);
  const float* x = static_cast<const float*>(a->in[0]);
  float* y = static_cast<float*>(a->out[0]);
  for (int64_t p = 0; p < g.planes(); ++p)
    for (int64_t oy = 0; oy < g.ho; ++oy)
      fold_row(g, x + p * g.h * g.w, oy, -std::numeric_limits<float>::infinity(), pool_max_fold,
               y + (p * g.ho + oy) * g.wo);
}

void avgpool_ref(const KernelArgs* a) {
  const PoolGeom g = pool_geom_unchecked(*a->ins, a->in_type[0].shape);
  const bool include_pad = a->ins->i(POOL_COUNT_INCLUDE_PAD) != 0;
  const float* x = static_cast<const float*>(a->in[0]);
  float* y = static_cast<float*>(a->out[0]);
  const auto fold = [](float s, float v) { return s + v; };
  for (int64_t p = 0; p < g.planes(); ++p)
    for (int64_t oy = 0; oy < g.ho; ++oy) {
      float* yr = y + (p * g.ho + oy) * g.wo;
      fold_row(g, x + p * g.h * g.w, oy, 0.f, fold, yr);
      for (int64_t ox = 0; ox < g.wo; ++ox) yr[ox] /= static_cast<float>(g.divisor(include_pad, oy, ox));
    }
}

// The backward op takes the forward's immediates as they are.
std::vector<std::pair<const char*, Imm>> same_imms(const Instruction& ins) {
  std::vector<std::pair<const char*, Imm>> imms;
  for (size_t k = 0; k < ins.imm.size(); ++k) imms.emplace_back(ins.info().imms[k].key.c_str(), ins.imm[k]);
  return imms;
}

Status maxpool_grad(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy, const std::vector<bool>&,
                    std::vector<TensorId>* dx) {
  (*dx)[0] = b.emit(Opcode::MAXPOOL2D_BWD, {dy[0], ins.in[0]}, same_imms(ins));
  return b.status();
}

Status avgpool_grad(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy, const std::vector<bool>&,
                    std::vector<TensorId>* dx) {
  (*dx)[0] = b.emit(Opcode::AVGPOOL2D_BWD, {dy[0], ins.in[0]}, same_imms(ins));
  return b.status();
}

Result<std::shared_ptr<const JitKernel>> maxpool_jit(const JitRequest& r, KernelCache& cache) {
  return pool_jit_kernel(pool_geom_unchecked(r.ins, r.in[0].shape), true, false, r.isa, r.part, r.n_parts, cache);
}

Result<std::shared_ptr<const JitKernel>> avgpool_jit(const JitRequest& r, KernelCache& cache) {
  const bool include_pad = r.ins.i(POOL_COUNT_INCLUDE_PAD) != 0;
  return pool_jit_kernel(pool_geom_unchecked(r.ins, r.in[0].shape), false, include_pad, r.isa, r.part, r.n_parts,
                         cache);
}

int pool_parts(const JitRequest& r, int threads) { return pool_jit_parts(pool_geom_unchecked(r.ins, r.in[0].shape), threads); }

}  // namespace

OpHooks op_hooks_MAXPOOL2D() { return {pool_shape, maxpool_ref, nullptr, maxpool_grad, maxpool_jit, pool_parts}; }
OpHooks op_hooks_AVGPOOL2D() { return {pool_shape, avgpool_ref, nullptr, avgpool_grad, avgpool_jit, pool_parts}; }

}  // namespace nnasm
