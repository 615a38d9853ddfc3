// The reference GEMM shared by MATMUL and LINEAR (and, later, the backward products): Eigen's
// blocked kernel, run on packing buffers the executor allocated at prepare, so that a run never
// allocates. C (row-major, M×N, leading dimension N) += op(A)·op(B).
#pragma once
#include <cstddef>
#include <cstdint>

namespace nnasm {

struct GemmShape {
  int64_t m, n, k;
  bool trans_a, trans_b;  // A stored [K,M] / B stored [N,K], row-major
};

// Floats of packing scratch gemm_accumulate needs for this shape.
size_t gemm_scratch_floats(const GemmShape& s);

// C += op(A)·op(B). `scratch` holds gemm_scratch_floats(s) floats, 64-byte aligned. Does not
// allocate; not thread-safe on one scratch buffer.
void gemm_accumulate(const GemmShape& s, const float* a, const float* b, float* c, float* scratch);

}  // namespace nnasm
