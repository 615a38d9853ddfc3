// The blocked channel layout (ops/layout/nchwc.h) written out for tests, from its definition and
// nothing of ops/: element (n, c, h, w) of an NCHW tensor sits at [n, c / b, h, w, c mod b].
#pragma once
#include <cstdint>
#include <vector>

namespace nnasm {

// x, row-major [N, C, H·W], as [N, ⌈C/b⌉, H·W, b], the lanes past C holding `fill`.
template <class T>
std::vector<T> nchw_to_blocked(const std::vector<T>& x, int64_t n, int64_t c, int64_t hw, int64_t b, T fill = T()) {
  const int64_t cb = (c + b - 1) / b;
  std::vector<T> y(static_cast<size_t>(n * cb * hw * b), fill);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t p = 0; p < hw; ++p)
        y[static_cast<size_t>(((i * cb + k / b) * hw + p) * b + k % b)] = x[static_cast<size_t>((i * c + k) * hw + p)];
  return y;
}

// The inverse: y, row-major [N, ⌈C/b⌉, H·W, b], as [N, C, H·W] (the lanes past C dropped).
template <class T>
std::vector<T> blocked_to_nchw(const std::vector<T>& y, int64_t n, int64_t c, int64_t hw, int64_t b) {
  const int64_t cb = (c + b - 1) / b;
  std::vector<T> x(static_cast<size_t>(n * c * hw));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t p = 0; p < hw; ++p)
        x[static_cast<size_t>((i * c + k) * hw + p)] = y[static_cast<size_t>(((i * cb + k / b) * hw + p) * b + k % b)];
  return x;
}

}  // namespace nnasm
