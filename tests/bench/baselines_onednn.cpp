// oneDNN (Debian's libdnnl-dev, 2.x) as a baseline for gemm_bench.cpp: a dnnl::matmul primitive
// for square SGEMM and the 784→256 layer at batch 1 and 64, row-major (format_tag::ab), on the
// CPU engine. The primitive is created once, before the timing loop, as nnasm prepares its kernel
// once; the loop times execute() and the stream's wait(). Debian builds oneDNN on OpenMP, so each
// benchmark sets one OpenMP thread for its own thread (omp_set_num_threads, a per-thread
// setting); a oneDNN built on another runtime runs as it is configured (OMP_NUM_THREADS or
// taskset, then). The label names the implementation oneDNN chose. Built only with
// NNASM_HAVE_ONEDNN (the Makefile sets it when the header is installed: make bench-deps);
// otherwise one row says so. oneDNN throws: errors become error rows here.
#include <string>
#include <unordered_map>

#include "tests/bench/baselines.h"

#ifdef NNASM_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
#include <omp.h>
#endif
#endif

namespace nnasm::baselines {
namespace {

#ifdef NNASM_HAVE_ONEDNN

void run_matmul(benchmark::State& st, int64_t m, int64_t n, int64_t k, bool layer) {
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
  omp_set_num_threads(1);
#endif
  Operands o(m, n, k);
  try {
    using dnnl::memory;
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream strm(eng);
    const memory::desc a_md({m, k}, memory::data_type::f32, memory::format_tag::ab);
    const memory::desc b_md({k, n}, memory::data_type::f32, memory::format_tag::ab);
    const memory::desc c_md({m, n}, memory::data_type::f32, memory::format_tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), eng);
    const dnnl::matmul prim(pd);
    memory a(a_md, eng, o.a), b(b_md, eng, o.b), c(c_md, eng, o.c);
    const std::unordered_map<int, memory> args{{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}};
    st.SetLabel(pd.impl_info_str());
    for (auto _ : st) {
      prim.execute(strm, args);
      strm.wait();
      benchmark::DoNotOptimize(o.c);
    }
  } catch (const dnnl::error& e) {
    st.SkipWithError((std::string("oneDNN: ") + e.what()).c_str());
    return;
  }
  finish(st, o, layer);
}

void BM_gemm_square_onednn(benchmark::State& st) { run_matmul(st, st.range(0), st.range(0), st.range(0), false); }
BENCHMARK(BM_gemm_square_onednn)->Apply(square_sizes);

void BM_gemm_gemv_784x256_onednn(benchmark::State& st) { run_matmul(st, 1, kLayerOut, kLayerIn, true); }
BENCHMARK(BM_gemm_gemv_784x256_onednn)->Unit(benchmark::kMicrosecond);

void BM_gemm_b64_784x256_onednn(benchmark::State& st) { run_matmul(st, kLayerBatch, kLayerOut, kLayerIn, true); }
BENCHMARK(BM_gemm_b64_784x256_onednn)->Unit(benchmark::kMicrosecond);

#else

void BM_gemm_square_onednn(benchmark::State& st) { missing(st, "libdnnl-dev"); }
BENCHMARK(BM_gemm_square_onednn);

#endif

}  // namespace
}  // namespace nnasm::baselines
