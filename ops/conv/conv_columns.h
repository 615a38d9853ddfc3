// A row's columns dealt to two planes, even and odd, as the strided direct kernel's padded copy
// (conv_direct.h) and Winograd's input transform (conv_winograd.h) keep them: then the columns a
// stride-2 read takes are consecutive. Inline, so that a caller compiled for a wider instruction
// set (conv_winograd.cpp's per-level copies) vectorizes the loop at its width.
#pragma once
#include <cstdint>

namespace nnasm {

// a[k] = src[2k], b[k] = src[2k + 1] for the n values of src (a takes the last one when n is odd).
inline void deinterleave(const float* __restrict src, int64_t n, float* __restrict a, float* __restrict b) {
  for (int64_t k = 0; k < n / 2; ++k) {
    a[k] = src[2 * k];
    b[k] = src[2 * k + 1];
  }
  if (n % 2) a[n / 2] = src[n - 1];
}

// The n values of src as padded columns pw, pw + 1, …: column X to even[X / 2] or odd[X / 2].
inline void split_columns(const float* src, int64_t n, int64_t pw, float* even, float* odd) {
  if (pw % 2 == 0) deinterleave(src, n, even + pw / 2, odd + pw / 2);
  else deinterleave(src, n, odd + pw / 2, even + pw / 2 + 1);
}

}  // namespace nnasm
