// What the competitor baselines (tests/bench/baselines_*.cpp) share: the shapes of
// tests/bench/gemm_bench.cpp, its FLOPS counter and input pattern, so that each library's rows sit
// next to nnasm's under the same names and arguments, and a check that a library computed
// C = A·B (row-major) at all, so that a wrong layout cannot pass as a fast one. Each baseline
// runs on one thread, as nnasm does.
#pragma once
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace nnasm::baselines {

// The square SGEMM sizes, 32 … 2048, for nnasm, Eigen and every baseline alike.
inline void square_sizes(benchmark::internal::Benchmark* b) {
  b->RangeMultiplier(2)->Range(32, 2048)->Unit(benchmark::kMicrosecond);
}

// The 784→256 layer at batch 1 (BM_gemm_gemv_784x256_*) and 64 (BM_gemm_b64_784x256_*).
constexpr int64_t kLayerIn = 784, kLayerOut = 256, kLayerBatch = 64;

// The counter gemm_bench.cpp reports: FLOP/s, in powers of 1000.
inline void set_flops(benchmark::State& st, double flops_per_iter) {
  st.counters["FLOPS"] = benchmark::Counter(flops_per_iter * static_cast<double>(st.iterations()),
                                            benchmark::Counter::kIsRate, benchmark::Counter::OneK::kIs1000);
}

// Operands of C[M,N] = A[M,K]·B[K,N], row-major, filled like gemm_bench.cpp's inputs. 64-byte
// aligned: the libraries pick their aligned paths, and nnasm's buffers are aligned too.
struct Operands {
  int64_t m, n, k;
  std::vector<float> store;
  float *a, *b, *c;

  Operands(int64_t m_, int64_t n_, int64_t k_) : m(m_), n(n_), k(k_) {
    const int64_t pad = 16;  // floats per 64 bytes
    auto round = [&](int64_t x) { return (x + pad - 1) / pad * pad; };
    store.assign(static_cast<size_t>(round(m * k) + round(k * n) + round(m * n) + pad), 0.f);
    float* base = store.data();
    while (reinterpret_cast<uintptr_t>(base) % 64) ++base;
    a = base;
    b = a + round(m * k);
    c = b + round(k * n);
    for (int64_t i = 0; i < m * k; ++i) a[i] = static_cast<float>((i * 7919) % 255) / 255.f - 0.5f;
    for (int64_t i = 0; i < k * n; ++i) b[i] = static_cast<float>((i * 7919) % 255) / 255.f - 0.5f;
  }

  // Whether C's four corners match a double-precision dot product; "" when they do, else what
  // differs.
  std::string check() const {
    for (int64_t i : {int64_t{0}, m - 1})
      for (int64_t j : {int64_t{0}, n - 1}) {
        double want = 0;
        for (int64_t p = 0; p < k; ++p) want += static_cast<double>(a[i * k + p]) * b[p * n + j];
        const double got = c[i * n + j];
        if (std::fabs(got - want) > 1e-4 * static_cast<double>(k))
          return "wrong result at C[" + std::to_string(i) + "," + std::to_string(j) + "]: " +
                 std::to_string(got) + ", expected " + std::to_string(want);
      }
    return "";
  }
};

// After the timing loop: the FLOPS counter and, for the layer, the bytes of weights streamed
// (as gemm_bench.cpp's GEMV rows); an error row when the result is wrong.
inline void finish(benchmark::State& st, const Operands& o, bool layer) {
  set_flops(st, 2.0 * static_cast<double>(o.m * o.n * o.k));
  if (layer) st.SetBytesProcessed(st.iterations() * o.k * o.n * static_cast<int64_t>(sizeof(float)));
  const std::string err = o.check();
  if (!err.empty()) st.SkipWithError(err.c_str());
}

// Head to head: nnasm's call and a library's, timed in alternating blocks of `calls` calls inside
// each benchmark iteration; the best time per call of each. A shared VM's clock moves over
// seconds, so rows measured one after the other (the median rows above) can differ by more than
// the difference between the two codes (docs/benchmarks.md); alternating blocks see the same clock. Counters: each
// side's GFLOP/s at its best block, and nnasm's time over the library's (below 1: nnasm faster).
// With `settle_ms`, each block starts with an untimed call and is followed by a pause that long:
// for threaded runs, so that neither side's threads are still spinning (OpenMP's spin for
// milliseconds after a parallel region) while the other side's block runs.
template <class Nnasm, class Library>
void head_to_head(benchmark::State& st, double flops_per_call, Nnasm&& nnasm, Library&& library, int settle_ms = 0) {
  using clock = std::chrono::steady_clock;
  // Blocks of ≥ ~20 µs; settled ones of ≥ ~10 ms, so that the pause is far from the timed calls.
  const double block_flops = settle_ms ? 2e9 : 2e7;
  const int calls = static_cast<int>(std::clamp(block_flops / flops_per_call, 1.0, 1000.0));
  auto block = [&](auto& f) {
    if (settle_ms) f();
    const auto t0 = clock::now();
    for (int i = 0; i < calls; ++i) f();
    const double t = std::chrono::duration<double>(clock::now() - t0).count() / calls;
    if (settle_ms) std::this_thread::sleep_for(std::chrono::milliseconds(settle_ms));
    return t;
  };
  double best_nnasm = 1e30, best_library = 1e30;
  for (auto _ : st) {
    best_nnasm = std::min(best_nnasm, block(nnasm));
    best_library = std::min(best_library, block(library));
  }
  st.counters["nnasm_GFLOPS"] = flops_per_call / best_nnasm * 1e-9;
  st.counters["lib_GFLOPS"] = flops_per_call / best_library * 1e-9;
  st.counters["time_ratio"] = best_nnasm / best_library;
}

// The row a baseline leaves when its library was not there at build time.
inline void missing(benchmark::State& st, const char* package) {
  const std::string msg = std::string(package) + " not installed when the benchmark was built: make bench-deps";
  st.SkipWithError(msg.c_str());
}

}  // namespace nnasm::baselines
