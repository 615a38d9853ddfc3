// This machine's L2 read bandwidth for tests/bench/recurrent.sh: one thread sums a buffer that fits
// the L2 cache but not L1 (256 KiB, the size of one LSTM(128) layer's recurrent weights) with
// sixteen independent vector adds, the best of many whole passes, on the widest vectors the CPU
// has. Prints one line: "L2 read bandwidth: N GB/s (BYTES bytes, ISA)".
//
//   l2_read [KIB]
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr int ACC = 16;

__attribute__((target("avx512f"))) float pass_avx512(const float* p, size_t n) {
  __m512 acc[ACC];
  for (int i = 0; i < ACC; ++i) acc[i] = _mm512_setzero_ps();
  for (size_t k = 0; k + 16 * ACC <= n; k += 16 * ACC) {
#pragma GCC unroll 16
    for (int i = 0; i < ACC; ++i) acc[i] = _mm512_add_ps(acc[i], _mm512_load_ps(p + k + 16 * i));
  }
  for (int i = 1; i < ACC; ++i) acc[0] = _mm512_add_ps(acc[0], acc[i]);
  return _mm512_reduce_add_ps(acc[0]);
}

__attribute__((target("avx2"))) float pass_avx2(const float* p, size_t n) {
  __m256 acc[ACC];
  for (int i = 0; i < ACC; ++i) acc[i] = _mm256_setzero_ps();
  for (size_t k = 0; k + 8 * ACC <= n; k += 8 * ACC) {
#pragma GCC unroll 16
    for (int i = 0; i < ACC; ++i) acc[i] = _mm256_add_ps(acc[i], _mm256_load_ps(p + k + 8 * i));
  }
  for (int i = 1; i < ACC; ++i) acc[0] = _mm256_add_ps(acc[0], acc[i]);
  float out[8];
  _mm256_storeu_ps(out, acc[0]);
  return out[0] + out[7];
}

}  // namespace

int main(int argc, char** argv) {
  const size_t kib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 256;
  const size_t n = kib * 1024 / sizeof(float);
  float* buf = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
  if (!buf || n < 256) return 1;
  for (size_t i = 0; i < n; ++i) buf[i] = static_cast<float>(i % 7);
  const bool wide = __builtin_cpu_supports("avx512f");
  float (*pass)(const float*, size_t) = wide ? pass_avx512 : pass_avx2;
  using Clock = std::chrono::steady_clock;
  volatile float sink = 0;
  double best = 1e30;
  for (int round = 0; round < 2000; ++round) {
    const auto t0 = Clock::now();
    sink = sink + pass(buf, n);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::printf("L2 read bandwidth: %.0f GB/s (%zu bytes, %s)\n", static_cast<double>(n * sizeof(float)) / best / 1e9,
              n * sizeof(float), wide ? "avx512" : "avx2");
  std::free(buf);
  return 0;
}
