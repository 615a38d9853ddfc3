// The generator for row-wise and reduction kernels: softmax and log-softmax along an axis, the
// sum/mean/max reductions, softmax cross-entropy (forward and fused backward) and the global
// gradient-norm clip. Shapes are baked in at prepare time; kernels go through the context's
// KernelCache. Two layouts of an axis split outer × len × inner:
//   row  inner = 1: each of the outer rows is `len` contiguous floats. A row is swept in vectors
//        (a loop of 4 independent accumulators, the remainder unrolled, the last vector under the
//        tail mask); the accumulators are combined by a fixed pairwise tree, then the lanes by a
//        fixed halving tree. Kernel names end in `_row`.
//   col  inner > 1: each vector lane is one independent row; a block of up to 4 vectors across
//        the inner dimension walks the axis with a stride of inner floats, accumulating in index
//        order (the reference's order, so SUM/MEAN/MAX here are bitwise the reference's).
//        Kernel names end in `_col`.
// Results are bitwise deterministic for a given shape and ISA: the code, and so the order of every
// floating-point operation, is fixed at generation.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "jit/cpu.h"
#include "jit/kernel.h"

namespace nnasm {

using KernelRef = std::shared_ptr<const JitKernel>;

enum class RowOp : uint8_t { SOFTMAX, LOGSOFTMAX, SUM, MEAN, MAX, MIN, PROD };

// One op along one axis of x, split outer × len × inner (all ≥ 1). SOFTMAX/LOGSOFTMAX write
// x's shape; SUM/MEAN/MAX/MIN/PROD write outer × inner floats.
//   SOFTMAX (row): pass 1 max, pass 2 e = e^(x − m) stored to y while summing, pass 3 y ·= 1/Σ.
//   LOGSOFTMAX (row): pass 1 max, pass 2 Σ e^(x − m), pass 3 y = (x − m) − ln Σ.
//   (col: the same passes, per lane.) The max ignores NaN as std::fmax does (a NaN still makes
//   the row NaN through the sum); REDUCE_MAX and REDUCE_MIN propagate NaN as the reference does.
//   PROD multiplies as SUM adds (identity 1 in the lanes past the row's end).
// Errors: sizes beyond 2^28 elements, xbyak's own. Allocates; thread-safe as the cache is.
struct RowSpec {
  RowOp op = RowOp::SUM;
  Isa isa = Isa::AVX2;
  int64_t outer = 1, len = 1, inner = 1;
};
Result<KernelRef> rowwise_kernel(const RowSpec& s, KernelCache& cache);

// SOFTMAX_CE (bwd = false) or SOFTMAX_CE_BWD over `rows` rows of `classes` logits; targets are
// i32 class ids (ids = true) or f32 rows. Per row: max, Σ e^(x − m), lse = ln Σ; then the loss
// term (accumulated over rows in double) or dx = (e^((x − m) − lse) − t)·dloss/rows. An id
// outside 0..classes−1 makes the loss (or that row of dx) NaN; x is read only inside the row.
Result<KernelRef> softmax_ce_kernel(Isa isa, int64_t rows, int64_t classes, bool ids, bool bwd, KernelCache& cache);

// CLIP_GRAD_NORM over gradients of `sizes` elements (inputs and outputs in that order, in place):
// Σ g² in double (each float widened exactly, so the sum is deterministic and close to the
// reference's), then, if ‖g‖ > max_norm, g ·= float(max_norm / (‖g‖ + 1e−6)).
Result<KernelRef> clip_norm_kernel(Isa isa, const std::vector<int64_t>& sizes, double max_norm, KernelCache& cache);

}  // namespace nnasm
