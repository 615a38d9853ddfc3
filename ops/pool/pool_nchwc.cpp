// MAXPOOL2D_NCHWC, AVGPOOL2D_NCHWC and GLOBAL_AVGPOOL_NCHWC: pooling over the blocked channel
// layout (ops/layout/nchwc.h), so that the layout pass can keep a whole CNN blocked (max pooling
// between its blocks, a global average pool at its end).
//
// Computes   MAXPOOL2D_NCHWC       y[n, cb, oy, ox, c] = MAXPOOL2D (ops/pool/pool2d.cpp) of the
//                                  plane x[n, cb, :, :, c]: the max over each window, padding
//                                  −inf, NaN propagating, ceil_mode's partial windows.
//            AVGPOOL2D_NCHWC       the same for AVGPOOL2D: each window's sum over its divisor,
//                                  count_include_pad and ceil_mode as there.
//            GLOBAL_AVGPOOL_NCHWC  y[n, cb, 0, 0, c] = (1 / (H·W)) · Σ_{h, w} x[n, cb, h, w, c]
//                                  (GLOBAL_AVGPOOL per channel).
//            Every lane gets the bits the NCHW op's reference kernel gives its channel: the same
//            folds in the same order, the same divisor (up to which NaN payload a sum of several
//            NaNs keeps; see pool2d.cpp).
// Inputs     x: f32[N, Cb, H, W, b], b = 8 or 16.
// Outputs    y: f32[N, Cb, Ho, Wo, b], Ho and Wo MAXPOOL2D's and AVGPOOL2D's (pool_geom);
//            GLOBAL_AVGPOOL_NCHWC: f32[N, Cb, 1, 1, b].
// Immediates those of MAXPOOL2D and AVGPOOL2D, in the same schemas, checked by the same code.
// Gradient   none: the layout pass rewrites inference programs only and leaves training programs
//            in NCHW, so nothing differentiates these ops; autodiff refuses them by name.
// Kernels    reference: per output, the window's image pixels in row-major window order, each
//            folded into the b lanes (the max by pool_max_fold from −inf, the sum from +0), then
//            one division by the divisor; the global mean adds the pixels in order from +0 and
//            divides by H·W. JIT (ops/pool/pool_nchwc_jit.cpp): a vector is one pixel's b
//            channels, so an output is a chain of vmaxps (with the NaN select) or vaddps over
//            its window's vectors, the taps in the reference's order, windows in the padding
//            skipping taps, the divisor the reference's: bitwise the reference. b = 16 is AVX-512
//            code (`f32_maxpool2d_nchwc16__avx512_3x3s2`, `f32_global_avgpool_nchwc16__avx512`);
//            b = 8 AVX2 code at either level (`f32_avgpool2d_nchwc8__avx2_2x2s2`); blocks of 16
//            below AVX-512, and windows past 16 a side or 64 taps (the taps are unrolled), run
//            the reference. Parallel parts split the planes (images × channel blocks).
// Notes      The padding lanes (past C in the last block) are pooled like the others: zeros give
//            zeros, finite values finite values. NaN and ±inf as the NCHW ops. Does not allocate.
#include <limits>

#include "ops/op.h"
#include "ops/pool/pool_geom.h"
#include "ops/pool/pool_jit.h"

namespace nnasm {
namespace {

Status pool_nchwc_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(require_f32(ins, in));
  PoolGeom g;
  NNASM_TRY(pool_geom(ins, in[0], 0, &g));
  (*out)[0] = TensorType{DType::F32, Shape{g.n, g.c, g.ho, g.wo, in[0].shape[4]}};
  return Status::ok();
}

Status global_avgpool_nchwc_shape(const Instruction& ins, const std::vector<TensorType>& in,
                                  std::vector<TensorType>* out) {
  NNASM_TRY(require_f32(ins, in));
  NNASM_TRY(nchwc_pool_input(ins, in[0], 0));
  const Shape& x = in[0].shape;
  (*out)[0] = TensorType{DType::F32, Shape{x[0], x[1], 1, 1, x[4]}};
  return Status::ok();
}

// Every output vector of b lanes starts at `init` and takes in its window's image pixels in
// row-major window order through `fold(acc, v)`; then, with `divide`, one division by its
// divisor.
template <class Fold>
void pool_nchwc_ref(const KernelArgs* a, float init, Fold fold, bool divide, bool include_pad) {
  const PoolGeom g = pool_geom_unchecked(*a->ins, a->in_type[0].shape);
  const int64_t b = a->in_type[0].shape[4];
  const float* x = static_cast<const float*>(a->in[0]);
  float* y = static_cast<float*>(a->out[0]);
  for (int64_t p = 0; p < g.planes(); ++p)
    for (int64_t oy = 0; oy < g.ho; ++oy)
      for (int64_t ox = 0; ox < g.wo; ++ox) {
        float* yv = y + ((p * g.ho + oy) * g.wo + ox) * b;
        for (int64_t l = 0; l < b; ++l) yv[l] = init;
        int64_t r0, r1, c0, c1;
        g.row_range(oy, &r0, &r1);
        g.col_range(ox, &c0, &c1);
        for (int64_t iy = r0; iy < r1; ++iy)
          for (int64_t ix = c0; ix < c1; ++ix) {
            const float* xv = x + ((p * g.h + iy) * g.w + ix) * b;
            for (int64_t l = 0; l < b; ++l) yv[l] = fold(yv[l], xv[l]);
          }
        if (!divide) continue;
        const float d = static_cast<float>(g.divisor(include_pad, oy, ox));
        for (int64_t l = 0; l < b; ++l) yv[l] /= d;
      }
}

void maxpool_nchwc_ref(const KernelArgs* a) {
  pool_nchwc_ref(a, -std::numeric_limits<float>::infinity(), pool_max_fold, false, false);
}

void avgpool_nchwc_ref(const KernelArgs* a) {
  pool_nchwc_ref(a, 0.f, [](float s, float v) { return s + v; }, true, a->ins->i(POOL_COUNT_INCLUDE_PAD) != 0);
}

void global_avgpool_nchwc_ref(const KernelArgs* a) {
  const Shape& xs = a->in_type[0].shape;
  const int64_t planes = xs[0] * xs[1], pixels = xs[2] * xs[3], b = xs[4];
  const float* x = static_cast<const float*>(a->in[0]);
  float* y = static_cast<float*>(a->out[0]);
  for (int64_t p = 0; p < planes; ++p) {
    float* yv = y + p * b;
    for (int64_t l = 0; l < b; ++l) yv[l] = 0.f;
    for (int64_t i = 0; i < pixels; ++i)
      for (int64_t l = 0; l < b; ++l) yv[l] += x[(p * pixels + i) * b + l];
    for (int64_t l = 0; l < b; ++l) yv[l] /= static_cast<float>(pixels);
  }
}

Result<std::shared_ptr<const JitKernel>> maxpool_nchwc_jit(const JitRequest& r, KernelCache& cache) {
  return pool_nchwc_jit_kernel(pool_geom_unchecked(r.ins, r.in[0].shape), r.in[0].shape[4], true, false, r.isa, r.part,
                               r.n_parts, cache);
}

Result<std::shared_ptr<const JitKernel>> avgpool_nchwc_jit(const JitRequest& r, KernelCache& cache) {
  return pool_nchwc_jit_kernel(pool_geom_unchecked(r.ins, r.in[0].shape), r.in[0].shape[4], false,
                               r.ins.i(POOL_COUNT_INCLUDE_PAD) != 0, r.isa, r.part, r.n_parts, cache);
}

int pool_nchwc_parts(const JitRequest& r, int threads) {
  return pool_nchwc_jit_parts(pool_geom_unchecked(r.ins, r.in[0].shape), r.in[0].shape[4], r.isa, threads);
}

Result<std::shared_ptr<const JitKernel>> global_avgpool_nchwc_jit(const JitRequest& r, KernelCache& cache) {
  const Shape& xs = r.in[0].shape;
  return global_avgpool_nchwc_jit_kernel(xs[0] * xs[1], xs[2] * xs[3], xs[4], r.isa, r.part, r.n_parts, cache);
}

int global_avgpool_nchwc_parts(const JitRequest& r, int threads) {
  const Shape& xs = r.in[0].shape;
  return global_avgpool_nchwc_jit_parts(xs[0] * xs[1], xs[2] * xs[3], xs[4], r.isa, threads);
}

}  // namespace

OpHooks op_hooks_MAXPOOL2D_NCHWC() {
  return {pool_nchwc_shape, maxpool_nchwc_ref, nullptr, nullptr, maxpool_nchwc_jit, pool_nchwc_parts};
}
OpHooks op_hooks_AVGPOOL2D_NCHWC() {
  return {pool_nchwc_shape, avgpool_nchwc_ref, nullptr, nullptr, avgpool_nchwc_jit, pool_nchwc_parts};
}
OpHooks op_hooks_GLOBAL_AVGPOOL_NCHWC() {
  return {global_avgpool_nchwc_shape, global_avgpool_nchwc_ref, nullptr, nullptr, global_avgpool_nchwc_jit,
          global_avgpool_nchwc_parts};
}

}  // namespace nnasm
