// This machine's fp32 FMA peak for tests/bench/models/bench_models.py: twelve independent chains
// of vector FMAs (enough to cover the latency of two FMA pipes) in a loop, on the widest vectors
// the CPU has (AVX-512, else AVX2), timed on one thread and on each of `threads` threads at once.
// Prints one line of JSON: {"isa": ..., "gflops_1": ..., "gflops_n": ..., "threads": n}.
//
//   fma_peak [THREADS] [SECONDS]
#include <immintrin.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

constexpr int CHAINS = 12;

// Runs `iterations` rounds of CHAINS FMAs on `lanes`-float vectors; returns a value that depends
// on every chain, so the compiler keeps them.
__attribute__((target("avx512f"))) float fma_avx512(long iterations) {
  __m512 acc[CHAINS];
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int i = 0; i < CHAINS; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  for (long k = 0; k < iterations; ++k) {
#pragma GCC unroll 12  // the chains in registers, not in the array's memory
    for (int i = 0; i < CHAINS; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  __m512 s = acc[0];
  for (int i = 1; i < CHAINS; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) float fma_avx2(long iterations) {
  __m256 acc[CHAINS];
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int i = 0; i < CHAINS; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  for (long k = 0; k < iterations; ++k) {
#pragma GCC unroll 12
    for (int i = 0; i < CHAINS; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  __m256 s = acc[0];
  for (int i = 1; i < CHAINS; ++i) s = _mm256_add_ps(s, acc[i]);
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0] + out[7];
}

struct Probe {
  const char* isa;
  int lanes;
  float (*run)(long);
};

// GFLOP/s of `threads` threads each running the probe for about `seconds`, in all.
double measure(const Probe& p, int threads, double seconds) {
  using Clock = std::chrono::steady_clock;
  long iterations = 1 << 20;
  for (;;) {  // grow the count until one run takes a tenth of the time
    const auto t0 = Clock::now();
    p.run(iterations);
    if (std::chrono::duration<double>(Clock::now() - t0).count() > seconds / 10) break;
    iterations *= 2;
  }
  iterations *= 10;
  std::atomic<int> ready{0};
  std::vector<std::thread> pool;
  std::vector<double> took(static_cast<size_t>(threads));
  std::atomic<float> sink{0};
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < threads) {
      }
      const auto t0 = Clock::now();
      sink.store(p.run(iterations));
      took[static_cast<size_t>(t)] = std::chrono::duration<double>(Clock::now() - t0).count();
    });
  for (std::thread& th : pool) th.join();
  double slowest = 0;
  for (double s : took) slowest = s > slowest ? s : slowest;
  return 2.0 * p.lanes * CHAINS * static_cast<double>(iterations) * threads / slowest / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const double seconds = argc > 2 ? std::atof(argv[2]) : 1.0;
  __builtin_cpu_init();
  Probe p{"avx2", 8, fma_avx2};
  if (__builtin_cpu_supports("avx512f")) p = Probe{"avx512", 16, fma_avx512};
  else if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    std::printf("{\"isa\": \"none\"}\n");
    return 0;
  }
  const double one = measure(p, 1, seconds), many = measure(p, threads < 1 ? 1 : threads, seconds);
  std::printf("{\"isa\": \"%s\", \"gflops_1\": %.1f, \"gflops_n\": %.1f, \"threads\": %d}\n", p.isa, one, many, threads);
  return 0;
}
