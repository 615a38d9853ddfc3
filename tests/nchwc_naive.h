// The blocked channel layout (ops/layout/nchwc.h) written out by the tests from its definition:
// where an element of a plain tensor or of conv weights lands in the blocked one. Nothing here
// comes from ops/; the parity tests (tests/parity_cases_nchwc.h) and the kernel tests
// (tests/nchwc_test.cpp) compare the ops against these.
#pragma once
#include <cstdint>
#include <vector>

namespace nnasm::test {

inline int64_t nchwc_naive_blocks(int64_t c, int64_t b) {
  int64_t blocks = 0;
  while (blocks * b < c) ++blocks;
  return blocks;
}

// x [n, c, h·w] → [n, ⌈c/b⌉, h·w, b], padding lanes 0. T: float or double.
template <class T>
std::vector<T> naive_to_nchwc(const std::vector<T>& x, int64_t n, int64_t c, int64_t hw, int64_t b) {
  const int64_t cb = nchwc_naive_blocks(c, b);
  std::vector<T> y(static_cast<size_t>(n * cb * hw * b), T(0));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t p = 0; p < hw; ++p) y[static_cast<size_t>(((i * cb + k / b) * hw + p) * b + k % b)] = x[static_cast<size_t>((i * c + k) * hw + p)];
  return y;
}

// x [n, cb, h·w, b] → its first c channels as [n, c, h·w].
template <class T>
std::vector<T> naive_to_nchw(const std::vector<T>& x, int64_t n, int64_t c, int64_t hw, int64_t b) {
  const int64_t cb = nchwc_naive_blocks(c, b);
  std::vector<T> y(static_cast<size_t>(n * c * hw));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t p = 0; p < hw; ++p) y[static_cast<size_t>((i * c + k) * hw + p)] = x[static_cast<size_t>(((i * cb + k / b) * hw + p) * b + k % b)];
  return y;
}

// Dense conv weights w [o, c, taps] → [⌈o/b⌉, ⌈c/b⌉, taps, b (input channel), b (output channel)].
template <class T>
std::vector<T> naive_pack_dense(const std::vector<T>& w, int64_t o, int64_t c, int64_t taps, int64_t b) {
  const int64_t ob = nchwc_naive_blocks(o, b), cb = nchwc_naive_blocks(c, b);
  std::vector<T> y(static_cast<size_t>(ob * cb * taps * b * b), T(0));
  for (int64_t oo = 0; oo < o; ++oo)
    for (int64_t cc = 0; cc < c; ++cc)
      for (int64_t t = 0; t < taps; ++t)
        y[static_cast<size_t>((((oo / b) * cb + cc / b) * taps + t) * b * b + (cc % b) * b + oo % b)] =
            w[static_cast<size_t>((oo * c + cc) * taps + t)];
  return y;
}

// Depthwise conv weights w [c, 1, taps] → [⌈c/b⌉, taps, b].
template <class T>
std::vector<T> naive_pack_depthwise(const std::vector<T>& w, int64_t c, int64_t taps, int64_t b) {
  std::vector<T> y(static_cast<size_t>(nchwc_naive_blocks(c, b) * taps * b), T(0));
  for (int64_t cc = 0; cc < c; ++cc)
    for (int64_t t = 0; t < taps; ++t) y[static_cast<size_t>(((cc / b) * taps + t) * b + cc % b)] = w[static_cast<size_t>(cc * taps + t)];
  return y;
}

}  // namespace nnasm::test
