// oneDNN (Debian's libdnnl-dev, 2.x) as a baseline for gemm_bench.cpp and conv_bench.cpp: a
// dnnl::matmul primitive for square SGEMM and the 784→256 layer at batch 1 and 64, row-major
// (format_tag::ab), and a convolution_forward primitive for the CONV2D shapes, on the CPU engine. The primitive is created once, before the timing loop, as nnasm prepares its kernel
// once; the loop times execute() and the stream's wait(). Debian builds oneDNN on OpenMP, so each
// benchmark sets one OpenMP thread for its own thread (omp_set_num_threads, a per-thread
// setting; BM_threads_sgemm_onednn sets its second argument's count); a oneDNN built on another runtime runs as it is configured (OMP_NUM_THREADS or
// taskset, then). The label names the implementation oneDNN chose. Built only with
// NNASM_HAVE_ONEDNN (the Makefile sets it when the header is installed: make bench-deps);
// otherwise one row says so. oneDNN throws: errors become error rows here.
#include <string>
#include <unordered_map>

#include "tests/bench/baselines.h"
#include "tests/bench/bench_program.h"
#include "tests/bench/conv_shapes.h"

#ifdef NNASM_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
#include <omp.h>
#endif
#endif

namespace nnasm::baselines {
namespace {

#ifdef NNASM_HAVE_ONEDNN

// A dnnl::matmul primitive for C = A·B on o's row-major buffers (format_tag::ab), created once;
// use(label, call) runs the timing, where call() executes the primitive and waits for it.
// False (with an error row) when oneDNN throws.
template <class Use>
bool with_matmul(benchmark::State& st, Operands& o, int threads, Use use) {
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
  omp_set_num_threads(threads);
#else
  (void)threads;
#endif
  try {
    using dnnl::memory;
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream strm(eng);
    const memory::desc a_md({o.m, o.k}, memory::data_type::f32, memory::format_tag::ab);
    const memory::desc b_md({o.k, o.n}, memory::data_type::f32, memory::format_tag::ab);
    const memory::desc c_md({o.m, o.n}, memory::data_type::f32, memory::format_tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), eng);
    const dnnl::matmul prim(pd);
    memory a(a_md, eng, o.a), b(b_md, eng, o.b), c(c_md, eng, o.c);
    const std::unordered_map<int, memory> args{{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}};
    use(std::string(pd.impl_info_str()), [&] {
      prim.execute(strm, args);
      strm.wait();
      benchmark::DoNotOptimize(o.c);
    });
  } catch (const dnnl::error& e) {
    st.SkipWithError((std::string("oneDNN: ") + e.what()).c_str());
    return false;
  }
  return true;
}

void run_matmul(benchmark::State& st, int64_t m, int64_t n, int64_t k, bool layer, int threads = 1) {
  Operands o(m, n, k);
  const bool ran = with_matmul(st, o, threads, [&](const std::string& label, auto call) {
    st.SetLabel(label);
    for (auto _ : st) call();
  });
  if (ran) finish(st, o, layer);
}

// nnasm's MATMUL of [m, k]·[k, n] (as BM_gemm_square_nnasm) and oneDNN's, head to head.
void gemm_vs_onednn(benchmark::State& st, int64_t m, int64_t k, int64_t n) {
  Operands o(m, n, k);
  auto p = bench_program([&](Graph& g) { g.output(matmul(g.input("a", {m, k}), g.input("b", {k, n})), "y"); });
  if (!p) {
    st.SkipWithError("prepare failed");
    return;
  }
  with_matmul(st, o, 1, [&](const std::string& label, auto call) {
    st.SetLabel(std::string(p->ex->kernel_name(0)) + " vs " + label);
    head_to_head(st, 2.0 * m * n * k, [&] { p->ex->run(); }, call);
  });
}
void BM_gemm_square_vs_onednn(benchmark::State& st) { gemm_vs_onednn(st, st.range(0), st.range(0), st.range(0)); }
BENCHMARK(BM_gemm_square_vs_onednn)->RangeMultiplier(2)->Range(32, 2048)->Unit(benchmark::kMillisecond);
// Layers (M/K/N): the MLP's first at batch 1 (the GEMV) and 64, and wide inputs at batch 64 and
// 128 whose weights (3–8 MiB) stream from L3, B read in place.
void BM_gemm_layer_vs_onednn(benchmark::State& st) { gemm_vs_onednn(st, st.range(0), st.range(1), st.range(2)); }
BENCHMARK(BM_gemm_layer_vs_onednn)
    ->Args({1, 784, 256})
    ->Args({64, 784, 256})
    ->Args({64, 1536, 512})
    ->Args({64, 4096, 512})
    ->Args({128, 2048, 512})
    ->Unit(benchmark::kMillisecond);

void BM_gemm_square_onednn(benchmark::State& st) { run_matmul(st, st.range(0), st.range(0), st.range(0), false); }
BENCHMARK(BM_gemm_square_onednn)->Apply(square_sizes);

void BM_gemm_gemv_784x256_onednn(benchmark::State& st) { run_matmul(st, 1, kLayerOut, kLayerIn, true); }

// Square SGEMM on 1 and 2 OpenMP threads, next to BM_threads_sgemm (threads_bench.cpp).
void BM_threads_sgemm_onednn(benchmark::State& st) {
  run_matmul(st, st.range(0), st.range(0), st.range(0), false, static_cast<int>(st.range(1)));
}
BENCHMARK(BM_threads_sgemm_onednn)->ArgsProduct({{256, 512, 1024}, thread_counts(1)})->Unit(benchmark::kMicrosecond);

// nnasm's square MATMUL on its pool and oneDNN's on OpenMP, both with 2 threads, head to head;
// 60 ms between blocks outlast OpenMP's spin (libgomp's default: 300,000 pause loops).
void BM_threads_sgemm_vs_onednn(benchmark::State& st) {
  const int64_t n = st.range(0);
  Operands o(n, n, n);
  auto p = threaded(2, [&](Program&, Graph& g) { g.output(matmul(g.input("a", {n, n}), g.input("b", {n, n})), "c"); });
  if (!p) {
    st.SkipWithError("prepare failed");
    return;
  }
  with_matmul(st, o, 2, [&](const std::string& label, auto call) {
    st.SetLabel(std::string(p->ex->kernel_name(0)) + " vs " + label);
    head_to_head(st, 2.0 * n * n * n, [&] { p->ex->run(); }, call, 60);
  });
}
BENCHMARK(BM_threads_sgemm_vs_onednn)->RangeMultiplier(2)->Range(32, 2048)->Iterations(12)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_gemm_gemv_784x256_onednn)->Unit(benchmark::kMicrosecond);

void BM_gemm_b64_784x256_onednn(benchmark::State& st) { run_matmul(st, kLayerBatch, kLayerOut, kLayerIn, true); }
BENCHMARK(BM_gemm_b64_784x256_onednn)->Unit(benchmark::kMicrosecond);

// A forward-inference convolution with bias at oneDNN's best: it picks the layouts of src,
// weights and dst (format_tag::any, blocked nChw8c-like on AVX2), the caller's NCHW input and OIHW
// weights are reordered once before the timing loop (as a model that keeps its activations in
// oneDNN's layout would), and the loop times the primitive alone. With src and dst forced to NCHW
// oneDNN 2.6 falls back to its GEMM-based convolution, slower on these shapes.
void run_conv(benchmark::State& st, const ConvShape& s) {
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
  omp_set_num_threads(1);
#endif
  try {
    using dnnl::memory;
    using tag = memory::format_tag;
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream strm(eng);
    const memory::dims src_dims{1, s.c, s.h, s.w}, dst_dims{1, s.o, s.h, s.w}, bias_dims{s.o};
    const memory::dims w_dims = s.groups == 1 ? memory::dims{s.o, s.c, s.k, s.k}
                                              : memory::dims{s.groups, s.o / s.groups, s.c / s.groups, s.k, s.k};
    const memory::desc src_user(src_dims, memory::data_type::f32, tag::nchw);
    const memory::desc src_md(src_dims, memory::data_type::f32, tag::any);
    const memory::desc dst_md(dst_dims, memory::data_type::f32, tag::any);
    const memory::desc bias_md(bias_dims, memory::data_type::f32, tag::x);
    const memory::desc w_any(w_dims, memory::data_type::f32, tag::any);
    const memory::desc w_user(w_dims, memory::data_type::f32, s.groups == 1 ? tag::oihw : tag::goihw);
    const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                            src_md, w_any, bias_md, dst_md, {1, 1}, {s.pad, s.pad}, {s.pad, s.pad});
    const dnnl::convolution_forward::primitive_desc pd(d, eng);
    std::vector<float> x(static_cast<size_t>(s.c * s.h * s.w)), w(static_cast<size_t>(s.o * (s.c / s.groups) * s.k * s.k)), b(static_cast<size_t>(s.o), 0.1f);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7919) % 255) / 255.f - 0.5f;
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 7919) % 255) / 255.f - 0.5f;
    memory x_mem(src_user, eng, x.data()), src(pd.src_desc(), eng), dst(pd.dst_desc(), eng), bias(bias_md, eng, b.data());
    memory w_mem(w_user, eng, w.data()), w_prim(pd.weights_desc(), eng);
    dnnl::reorder(x_mem, src).execute(strm, x_mem, src);
    dnnl::reorder(w_mem, w_prim).execute(strm, w_mem, w_prim);
    strm.wait();
    const dnnl::convolution_forward prim(pd);
    const std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w_prim}, {DNNL_ARG_BIAS, bias}, {DNNL_ARG_DST, dst}};
    st.SetLabel(pd.impl_info_str());
    for (auto _ : st) {
      prim.execute(strm, args);
      strm.wait();
      benchmark::DoNotOptimize(dst.get_data_handle());
    }
  } catch (const dnnl::error& e) {
    st.SkipWithError((std::string("oneDNN: ") + e.what()).c_str());
    return;
  }
  set_flops(st, s.flops());
}

const int registered_conv = [] {
  for (const ConvShape& s : conv_shapes())
    benchmark::RegisterBenchmark(("BM_conv_" + s.name + "_onednn").c_str(), [s](benchmark::State& st) { run_conv(st, s); })
        ->Unit(benchmark::kMicrosecond);
  return 0;
}();

#else

void BM_gemm_square_onednn(benchmark::State& st) { missing(st, "libdnnl-dev"); }
BENCHMARK(BM_gemm_square_onednn);
void BM_threads_sgemm_onednn(benchmark::State& st) { missing(st, "libdnnl-dev"); }
BENCHMARK(BM_threads_sgemm_onednn);
void BM_threads_sgemm_vs_onednn(benchmark::State& st) { missing(st, "libdnnl-dev"); }
BENCHMARK(BM_threads_sgemm_vs_onednn);

#endif

}  // namespace
}  // namespace nnasm::baselines
