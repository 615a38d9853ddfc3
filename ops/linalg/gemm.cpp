// Eigen's general_matrix_matrix_product with caller-owned packing buffers. Eigen would otherwise
// take its packing blocks from the stack (up to 128 KiB, too much for a game's worker thread) or
// from malloc (forbidden on the hot path). Its internal API is used on purpose: it is stable
// across Eigen 3.3–3.4, and a level3_blocking that already holds blockA/blockB makes Eigen use
// them instead of allocating.
#include "ops/linalg/gemm.h"

#include <Eigen/Core>

namespace nnasm {
namespace {

using Eigen::Index;
namespace ei = Eigen::internal;

// Blocking sizes for the column-major product Cᵀ (N×M) = op(B)ᵀ (N×K) · op(A)ᵀ (K×M), which is how
// a row-major C is computed.
struct Blocking : ei::level3_blocking<float, float> {
  explicit Blocking(const GemmShape& s) {
    m_kc = s.k;
    m_mc = s.n;
    m_nc = s.m;
    ei::computeProductBlockingSizes<float, float, 1, Index>(m_kc, m_mc, m_nc, 1);
  }
  size_t size_a() const { return static_cast<size_t>(m_kc * m_mc); }
  size_t size_b() const { return static_cast<size_t>(m_kc * m_nc); }
  void use(float* scratch) {
    m_blockA = scratch;
    // Keep blockB 64-byte aligned.
    m_blockB = scratch + (size_a() + 15) / 16 * 16;
  }
};

template <int LhsOrder, int RhsOrder>
void run(const GemmShape& s, const float* a, const float* b, float* c, Blocking& blocking) {
  // lhs = op(B)ᵀ (N×K), rhs = op(A)ᵀ (K×M), result Cᵀ column-major with stride N.
  const Index lhs_stride = s.trans_b ? s.k : s.n;
  const Index rhs_stride = s.trans_a ? s.m : s.k;
  ei::general_matrix_matrix_product<Index, float, LhsOrder, false, float, RhsOrder, false, Eigen::ColMajor, 1>::run(
      s.n, s.m, s.k, b, lhs_stride, a, rhs_stride, c, 1, s.n, 1.f, blocking, nullptr);
}

using ColMapper = ei::const_blas_data_mapper<float, Index, Eigen::ColMajor>;
using RowMapper = ei::const_blas_data_mapper<float, Index, Eigen::RowMajor>;

// Few rows (batch 1 is the common case in a game): packing does not pay; each row of C is one
// matrix-vector product, a single streaming pass over B (Eigen's GEMV kernels, which never
// allocate when operands and result are unit-stride or the vector is the strided one).
void small_m(const GemmShape& s, const float* a, const float* b, float* c) {
  for (int64_t i = 0; i < s.m; ++i) {
    const float* ai = s.trans_a ? a + i : a + i * s.k;
    const Index inc = s.trans_a ? s.m : 1;
    float* ci = c + i * s.n;
    if (!s.trans_b) {
      // cᵢᵀ (N) += Bᵀ (N×K, column-major view of row-major B) · aᵢᵀ
      ei::general_matrix_vector_product<Index, float, ColMapper, Eigen::ColMajor, false, float, RowMapper, false>::run(
          s.n, s.k, ColMapper(b, s.n), RowMapper(ai, inc), ci, 1, 1.f);
    } else if (inc == 1) {
      // cᵢᵀ (N) += B (N×K, row-major) · aᵢᵀ
      ei::general_matrix_vector_product<Index, float, RowMapper, Eigen::RowMajor, false, float, RowMapper, false>::run(
          s.n, s.k, RowMapper(b, s.k), RowMapper(ai, 1), ci, 1, 1.f);
    } else {
      // Both transposed and few rows: rare enough for plain dot products.
      for (int64_t j = 0; j < s.n; ++j) {
        float acc = 0;
        for (int64_t p = 0; p < s.k; ++p) acc += ai[p * inc] * b[j * s.k + p];
        ci[j] += acc;
      }
    }
  }
}

constexpr int64_t SMALL_M = 4;

}  // namespace

size_t gemm_scratch_floats(const GemmShape& s) {
  if (s.m <= SMALL_M) return 0;
  Blocking b(s);
  return (b.size_a() + 15) / 16 * 16 + b.size_b();
}

void gemm_accumulate(const GemmShape& s, const float* a, const float* b, float* c, float* scratch) {
  if (s.m <= SMALL_M) {
    small_m(s, a, b, c);
    return;
  }
  Blocking blocking(s);
  blocking.use(scratch);
  constexpr int R = Eigen::RowMajor, C = Eigen::ColMajor;
  if (!s.trans_b && !s.trans_a) run<C, C>(s, a, b, c, blocking);
  else if (!s.trans_b && s.trans_a) run<C, R>(s, a, b, c, blocking);
  else if (s.trans_b && !s.trans_a) run<R, C>(s, a, b, c, blocking);
  else run<R, R>(s, a, b, c, blocking);
}

}  // namespace nnasm
