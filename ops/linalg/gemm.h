// The reference GEMM shared by MATMUL, LINEAR and the reference convolutions: Eigen packet code
// that sums each element of C in an order fixed by K and the transposes alone (gemm.cpp says
// which), so a row of C comes out bitwise the same whatever other rows are computed with it and
// wherever it sits. It runs on scratch the executor allocated at prepare, so a run never
// allocates. C (row-major, M×N, leading dimension N) += op(A)·op(B).
#pragma once
#include <cstddef>
#include <cstdint>

namespace nnasm {

struct GemmShape {
  int64_t m, n, k;
  bool trans_a, trans_b;  // A stored [K,M] / B stored [N,K], row-major
};

// Floats of scratch gemm_accumulate needs for this shape.
size_t gemm_scratch_floats(const GemmShape& s);

// C += op(A)·op(B). `scratch` holds gemm_scratch_floats(s) floats, 64-byte aligned. Element (i, j)
// of C is summed in an order that depends on K and the transposes only, never on M, N, i, j or
// the blocking. Does not allocate; not thread-safe on one scratch buffer.
void gemm_accumulate(const GemmShape& s, const float* a, const float* b, float* c, float* scratch);

}  // namespace nnasm
