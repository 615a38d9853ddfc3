// OpenBLAS (Debian's libopenblas-dev, the pthread build) as a baseline for gemm_bench.cpp: square
// SGEMM and the 784→256 layer at batch 1 and 64, on one thread (openblas_set_num_threads(1)),
// row-major through CBLAS. At batch 1 the row is cblas_sgemv, what a caller would use (OpenBLAS
// 0.3.21's sgemm does not forward M = 1 to its GEMV); the _sgemm row shows the GEMM path too.
// The label names the core OpenBLAS picked. Built only with NNASM_HAVE_OPENBLAS (the Makefile
// sets it when the header is installed: make bench-deps); otherwise one row says so.
#include "tests/bench/baselines.h"

#ifdef NNASM_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace nnasm::baselines {
namespace {

#ifdef NNASM_HAVE_OPENBLAS

void one_thread(benchmark::State& st) {
  openblas_set_num_threads(1);
  st.SetLabel(openblas_get_corename());
}

void sgemm(const Operands& o) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(o.m), static_cast<int>(o.n),
              static_cast<int>(o.k), 1.f, o.a, static_cast<int>(o.k), o.b, static_cast<int>(o.n), 0.f, o.c,
              static_cast<int>(o.n));
}

void BM_gemm_square_openblas(benchmark::State& st) {
  one_thread(st);
  Operands o(st.range(0), st.range(0), st.range(0));
  for (auto _ : st) {
    sgemm(o);
    benchmark::DoNotOptimize(o.c);
  }
  finish(st, o, false);
}
BENCHMARK(BM_gemm_square_openblas)->Apply(square_sizes);

void BM_gemm_gemv_784x256_openblas(benchmark::State& st) {
  one_thread(st);
  Operands o(1, kLayerOut, kLayerIn);
  // y[1,256] = x[1,784]·W[784,256] is yᵀ = Wᵀ·xᵀ: W row-major, transposed.
  for (auto _ : st) {
    cblas_sgemv(CblasRowMajor, CblasTrans, static_cast<int>(o.k), static_cast<int>(o.n), 1.f, o.b,
                static_cast<int>(o.n), o.a, 1, 0.f, o.c, 1);
    benchmark::DoNotOptimize(o.c);
  }
  finish(st, o, true);
}
BENCHMARK(BM_gemm_gemv_784x256_openblas)->Unit(benchmark::kMicrosecond);

void BM_gemm_gemv_784x256_openblas_sgemm(benchmark::State& st) {
  one_thread(st);
  Operands o(1, kLayerOut, kLayerIn);
  for (auto _ : st) {
    sgemm(o);
    benchmark::DoNotOptimize(o.c);
  }
  finish(st, o, true);
}
BENCHMARK(BM_gemm_gemv_784x256_openblas_sgemm)->Unit(benchmark::kMicrosecond);

void BM_gemm_b64_784x256_openblas(benchmark::State& st) {
  one_thread(st);
  Operands o(kLayerBatch, kLayerOut, kLayerIn);
  for (auto _ : st) {
    sgemm(o);
    benchmark::DoNotOptimize(o.c);
  }
  finish(st, o, true);
}
BENCHMARK(BM_gemm_b64_784x256_openblas)->Unit(benchmark::kMicrosecond);

#else

void BM_gemm_square_openblas(benchmark::State& st) { missing(st, "libopenblas-dev"); }
BENCHMARK(BM_gemm_square_openblas);

#endif

}  // namespace
}  // namespace nnasm::baselines
