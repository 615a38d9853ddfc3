// MAXPOOL2D_BWD and AVGPOOL2D_BWD: the gradients of MAXPOOL2D and AVGPOOL2D with respect to x, as
// instructions of their own (ops/pool/pool2d.cpp emits them).
//
// Computes   MAXPOOL2D_BWD  %dy, %x -> %dx: dx = 0, then for every output (n, c, oy, ox),
//                           dx[n, c, iy, ix] += dy[n, c, oy, ox] at the window's first maximum
//                           of x in row-major window order (ties go to the first, as PyTorch); a
//                           window holding NaN sends its dy to its first NaN.
//            AVGPOOL2D_BWD  %dy, %x -> %dx: dx = 0, then every image element of each output's
//                           window gets dy / divisor (AVGPOOL2D's divisor); overlapping windows
//                           add up. x only gives dx's shape, its data is not read.
// Inputs     dy: f32[N, C, Ho, Wo], the shape the forward op makes of x; x: f32[N, C, H, W].
//            Both ops take (dy, x) in that order, as ACT_BWD does.
// Outputs    dx: x's type.
// Immediates the forward op's (ops/pool/pool_geom.h).
// Gradient   none (no second derivatives of pooling are needed for training): autodiff reports
//            it by name.
// Kernels    reference: one pass over the outputs, a window's worth of loads each; the common
//            MAXPOOL2D_BWD case (2×2, stride 2, unpadded, no ceil_mode partial window) a
//            branch-free loop. JIT: that common case on even image sizes (where ceil_mode changes
//            nothing; ops/pool/maxpool_bwd_jit.cpp), bitwise the reference; the
//            scatter of a general window, and AVGPOOL2D_BWD, have no vector form worth
//            generating.
// Notes      Does not allocate.
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "ops/op.h"
#include "ops/pool/pool_geom.h"
#include "ops/pool/pool_jit.h"

namespace nnasm {
namespace {

Status pool_bwd_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(require_f32(ins, in));
  PoolGeom g;
  NNASM_TRY(pool_geom(ins, in[1], 1, &g));
  const Shape want{g.n, g.c, g.ho, g.wo};
  if (!(in[0].shape == want))
    return Status::errorf("{}: gradient {} must be f32{}, the shape the forward op makes of input {}", ins.info().mnemonic,
                          operand_str(ins, 0, in[0]), want.str(), operand_str(ins, 1, in[1]));
  (*out)[0] = in[1];
  return Status::ok();
}

// Zeroes dx, then calls add(base, oy, ox, r0, r1, c0, c1, d) for every output (oy, ox) in order:
// base is the offset of the output's plane in x and dx, [r0, r1) × [c0, c1) its window clipped
// to the image, d its dy.
template <class Add>
void scatter_windows(const PoolGeom& g, const float* dy, float* dx, Add add) {
  const int64_t plane = g.h * g.w;
  std::memset(dx, 0, static_cast<size_t>(g.planes() * plane) * sizeof(float));
  for (int64_t p = 0; p < g.planes(); ++p)
    for (int64_t oy = 0; oy < g.ho; ++oy) {
      int64_t r0, r1;
      g.row_range(oy, &r0, &r1);
      for (int64_t ox = 0; ox < g.wo; ++ox) {
        int64_t c0, c1;
        g.col_range(ox, &c0, &c1);
        add(p * plane, oy, ox, r0, r1, c0, c1, dy[(p * g.ho + oy) * g.wo + ox]);
      }
    }
}

// The common 2×2, stride 2, unpadded case, branch-free so that g++ vectorizes it along the row:
// the first element of each window that is its maximum (or, in a window holding NaN, its first
// NaN) takes dy, every other element 0. Writes every element
// of dx that a window covers; the rest (an odd last row or column) stays as the caller zeroed it.
void maxpool_bwd_2x2(const PoolGeom& g, const float* dy, const float* x, float* dx) {
  for (int64_t p = 0; p < g.planes(); ++p)
    for (int64_t oy = 0; oy < g.ho; ++oy) {
      const int64_t r = (p * g.h + 2 * oy) * g.w;
      const float *x0 = x + r, *x1 = x0 + g.w, *d = dy + (p * g.ho + oy) * g.wo;
      float *dx0 = dx + r, *dx1 = dx0 + g.w;
      for (int64_t ox = 0; ox < g.wo; ++ox) {
        const float a = x0[2 * ox], b = x0[2 * ox + 1], c = x1[2 * ox], e = x1[2 * ox + 1], v = d[ox];
        const float m = std::max(std::max(a, b), std::max(c, e));  // the maximum when no NaN
        const bool nan = (a != a) | (b != b) | (c != c) | (e != e);
        const bool sa = ((a == m) & !nan) | (a != a);
        const bool sb = (!sa) & (((b == m) & !nan) | (b != b));
        const bool sc = (!(sa | sb)) & (((c == m) & !nan) | (c != c));
        const bool se = (!(sa | sb | sc)) & (((e == m) & !nan) | (e != e));
        dx0[2 * ox] = sa ? v : 0.f;
        dx0[2 * ox + 1] = sb ? v : 0.f;
        dx1[2 * ox] = sc ? v : 0.f;
        dx1[2 * ox + 1] = se ? v : 0.f;
      }
    }
}

void maxpool_bwd_ref(const KernelArgs* a) {
  const PoolGeom g = pool_geom_unchecked(*a->ins, a->in_type[1].shape);
  const float* x = static_cast<const float*>(a->in[1]);
  float* dx = static_cast<float*>(a->out[0]);
  if (g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.ph == 0 && g.pw == 0 && g.windows_fit()) {
    if (g.h % 2 || g.w % 2) std::memset(dx, 0, static_cast<size_t>(g.planes() * g.h * g.w) * sizeof(float));
    maxpool_bwd_2x2(g, static_cast<const float*>(a->in[0]), x, dx);
    return;
  }
  scatter_windows(g, static_cast<const float*>(a->in[0]), dx,
                  [&](int64_t base, int64_t, int64_t, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float d) {
                    int64_t best = base + r0 * g.w + c0;
                    float m = x[best];
                    for (int64_t iy = r0; iy < r1; ++iy)
                      for (int64_t ix = c0; ix < c1; ++ix) {
                        const int64_t i = base + iy * g.w + ix;
                        if (x[i] > m || (x[i] != x[i] && m == m)) m = x[i], best = i;
                      }
                    dx[best] += d;
                  });
}

void avgpool_bwd_ref(const KernelArgs* a) {
  const PoolGeom g = pool_geom_unchecked(*a->ins, a->in_type[1].shape);
  const bool include_pad = a->ins->i(POOL_COUNT_INCLUDE_PAD) != 0;
  float* dx = static_cast<float*>(a->out[0]);
  scatter_windows(g, static_cast<const float*>(a->in[0]), dx,
                  [&](int64_t base, int64_t oy, int64_t ox, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float d) {
                    d /= static_cast<float>(g.divisor(include_pad, oy, ox));
                    for (int64_t iy = r0; iy < r1; ++iy)
                      for (int64_t ix = c0; ix < c1; ++ix) dx[base + iy * g.w + ix] += d;
                  });
}

Result<std::shared_ptr<const JitKernel>> maxpool_bwd_jit(const JitRequest& r, KernelCache& cache) {
  return maxpool_bwd_jit_kernel(pool_geom_unchecked(r.ins, r.in[1].shape), r.isa, cache);
}

}  // namespace

OpHooks op_hooks_MAXPOOL2D_BWD() { return {pool_bwd_shape, maxpool_bwd_ref, nullptr, nullptr, maxpool_bwd_jit}; }
OpHooks op_hooks_AVGPOOL2D_BWD() { return {pool_bwd_shape, avgpool_bwd_ref}; }

}  // namespace nnasm
