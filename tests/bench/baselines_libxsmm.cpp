// libxsmm (Debian's libxsmm-dev, 1.17) as a baseline for gemm_bench.cpp: a JIT kernel from
// libxsmm_smmdispatch, generated for the exact shape before the timing loop (as nnasm generates
// in prepare), for square SGEMM and the 784→256 layer at batch 1 and 64. libxsmm is column-major:
// row-major C[M,N] = A[M,K]·B[K,N] is column-major Cᵀ = Bᵀ·Aᵀ, the same bytes, so the kernel is
// dispatched for (N, M, K) and called with (B, A, C). Its kernels are single-threaded and made for
// small matrices (no cache blocking): the large sizes show where that stops paying. The label names
// the code path (target) libxsmm chose. Built only with NNASM_HAVE_LIBXSMM (the Makefile sets it
// when the header is installed: make bench-deps); otherwise one row says so.
#include "tests/bench/baselines.h"
#include "tests/bench/bench_program.h"

#ifdef NNASM_HAVE_LIBXSMM
#include <libxsmm.h>
#endif

namespace nnasm::baselines {
namespace {

#ifdef NNASM_HAVE_LIBXSMM

void run_smm(benchmark::State& st, int64_t m, int64_t n, int64_t k, bool layer) {
  libxsmm_init();
  Operands o(m, n, k);
  const float alpha = 1.f, beta = 0.f;
  const libxsmm_smmfunction kernel = libxsmm_smmdispatch(
      static_cast<libxsmm_blasint>(n), static_cast<libxsmm_blasint>(m), static_cast<libxsmm_blasint>(k),
      nullptr, nullptr, nullptr, &alpha, &beta, nullptr, nullptr);
  if (!kernel) {
    st.SkipWithError("libxsmm_smmdispatch generated no kernel for this shape");
    return;
  }
  st.SetLabel(libxsmm_get_target_arch());
  for (auto _ : st) {
    kernel(o.b, o.a, o.c);
    benchmark::DoNotOptimize(o.c);
  }
  finish(st, o, layer);
}

void BM_gemm_square_libxsmm(benchmark::State& st) { run_smm(st, st.range(0), st.range(0), st.range(0), false); }
BENCHMARK(BM_gemm_square_libxsmm)->Apply(square_sizes);

void BM_gemm_gemv_784x256_libxsmm(benchmark::State& st) { run_smm(st, 1, kLayerOut, kLayerIn, true); }
BENCHMARK(BM_gemm_gemv_784x256_libxsmm)->Unit(benchmark::kMicrosecond);

void BM_gemm_b64_784x256_libxsmm(benchmark::State& st) { run_smm(st, kLayerBatch, kLayerOut, kLayerIn, true); }
BENCHMARK(BM_gemm_b64_784x256_libxsmm)->Unit(benchmark::kMicrosecond);

// nnasm's MATMUL of [m, k]·[k, n] (as BM_gemm_square_nnasm) and libxsmm's kernel, head to head.
void gemm_vs_libxsmm(benchmark::State& st, int64_t m, int64_t k, int64_t n) {
  libxsmm_init();
  Operands o(m, n, k);
  const float alpha = 1.f, beta = 0.f;
  const libxsmm_smmfunction kernel = libxsmm_smmdispatch(static_cast<libxsmm_blasint>(n), static_cast<libxsmm_blasint>(m),
                                                         static_cast<libxsmm_blasint>(k), nullptr, nullptr, nullptr,
                                                         &alpha, &beta, nullptr, nullptr);
  auto b = bench_program([&](Graph& g) { g.output(matmul(g.input("a", {m, k}), g.input("b", {k, n})), "y"); });
  if (!kernel || !b) {
    st.SkipWithError("no kernel");
    return;
  }
  st.SetLabel(b->ex->kernel_name(0));
  head_to_head(
      st, 2.0 * m * n * k, [&] { b->ex->run(); },
      [&] {
        kernel(o.b, o.a, o.c);
        benchmark::DoNotOptimize(o.c);
      });
}
void BM_gemm_square_vs_libxsmm(benchmark::State& st) { gemm_vs_libxsmm(st, st.range(0), st.range(0), st.range(0)); }
BENCHMARK(BM_gemm_square_vs_libxsmm)->RangeMultiplier(2)->Range(32, 512)->Unit(benchmark::kMillisecond);
// The 784→256 layer (M/K/N) at batch 1 (the GEMV) and 64.
void BM_gemm_layer_vs_libxsmm(benchmark::State& st) { gemm_vs_libxsmm(st, st.range(0), st.range(1), st.range(2)); }
BENCHMARK(BM_gemm_layer_vs_libxsmm)->Args({1, 784, 256})->Args({64, 784, 256})->Unit(benchmark::kMillisecond);

#else

void BM_gemm_square_libxsmm(benchmark::State& st) { missing(st, "libxsmm-dev"); }
BENCHMARK(BM_gemm_square_libxsmm);
void BM_gemm_layer_vs_libxsmm(benchmark::State& st) { missing(st, "libxsmm-dev"); }
BENCHMARK(BM_gemm_layer_vs_libxsmm);

#endif

}  // namespace
}  // namespace nnasm::baselines
