// DWCONV2D_NCHWC's oracle for the tests (tests/nchwc_dwconv_test.cpp and the parity table): a
// depthwise convolution in plain NCHW written as naive loops in double, and the test's own packing
// of NCHW data into the blocked layout of ops/layout/nchwc.h, element by element from its
// definition there (nothing from ops/).
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace nnasm::test {

// One depthwise convolution: C channels of N images H × W, a kh × kw kernel per channel.
struct DwCase {
  int64_t n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw;
  bool bias;
  std::string act;  // "none", "relu" or "clipped_relu" (with act_alpha 6: ReLU6)
  int64_t ho() const { return (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1; }
  int64_t wo() const { return (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1; }
};

constexpr double DW_RELU6 = 6;

inline double dw_act(const std::string& act, double z) {
  if (act == "relu") return z > 0 ? z : 0;
  if (act == "clipped_relu") return z < 0 ? 0 : (z > DW_RELU6 ? DW_RELU6 : z);
  return z;
}

// y [N, C, Ho, Wo] = act(bias + Σ taps) from x [N, C, H, W], w [C, 1, kh, kw], bias [C] (empty:
// none); mag: Σ|terms| per output, what its rounding error scales with.
inline void dw_naive(const DwCase& k, const std::vector<double>& x, const std::vector<double>& w,
                     const std::vector<double>& bias, std::vector<double>* y, std::vector<double>* mag) {
  const int64_t ho = k.ho(), wo = k.wo();
  y->assign(static_cast<size_t>(k.n * k.c * ho * wo), 0);
  mag->assign(y->size(), 0);
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t c = 0; c < k.c; ++c)
      for (int64_t oy = 0; oy < ho; ++oy)
        for (int64_t ox = 0; ox < wo; ++ox) {
          double s = bias.empty() ? 0 : bias[c], m = std::fabs(s);
          for (int64_t i = 0; i < k.kh; ++i)
            for (int64_t j = 0; j < k.kw; ++j) {
              const int64_t iy = oy * k.sh - k.ph + i * k.dh, ix = ox * k.sw - k.pw + j * k.dw;
              if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;
              const double t = w[(c * k.kh + i) * k.kw + j] * x[((n * k.c + c) * k.h + iy) * k.w + ix];
              s += t;
              m += std::fabs(t);
            }
          const size_t o = static_cast<size_t>(((n * k.c + c) * ho + oy) * wo + ox);
          (*y)[o] = dw_act(k.act, s);
          (*mag)[o] = m;
        }
}

// Blocks of b channels holding c.
inline int64_t dw_blocks(int64_t c, int64_t b) { return (c + b - 1) / b; }

// f32[N, C, H, W] → f32[N, ⌈C/b⌉, H, W, b]: element (n, c, h, w) at [n, c / b, h, w, c mod b],
// the lanes past C zero.
inline std::vector<double> dw_pack_activations(const std::vector<double>& x, int64_t n, int64_t c, int64_t h, int64_t w,
                                               int64_t b) {
  const int64_t cb = dw_blocks(c, b);
  std::vector<double> out(static_cast<size_t>(n * cb * h * w * b), 0);
  for (int64_t in = 0; in < n; ++in)
    for (int64_t ic = 0; ic < c; ++ic)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t xx = 0; xx < w; ++xx)
          out[static_cast<size_t>((((in * cb + ic / b) * h + y) * w + xx) * b + ic % b)] =
              x[static_cast<size_t>(((in * c + ic) * h + y) * w + xx)];
  return out;
}

// w [C, 1, kh, kw] → [⌈C/b⌉, kh, kw, b]: element [cb, i, j, l] = w[cb·b + l, 0, i, j], zero past C.
inline std::vector<double> dw_pack_weights(const std::vector<double>& w, int64_t c, int64_t kh, int64_t kw, int64_t b) {
  const int64_t cb = dw_blocks(c, b);
  std::vector<double> out(static_cast<size_t>(cb * kh * kw * b), 0);
  for (int64_t ic = 0; ic < c; ++ic)
    for (int64_t i = 0; i < kh; ++i)
      for (int64_t j = 0; j < kw; ++j)
        out[static_cast<size_t>(((ic / b * kh + i) * kw + j) * b + ic % b)] = w[static_cast<size_t>((ic * kh + i) * kw + j)];
  return out;
}

// The tolerance of a sum of k f32 terms relative to Σ|terms| (recursive summation errs by about
// k·u), as the parity tests allow.
inline double dw_allowed_error(int64_t k, double mag) { return 1e-6 + (2e-6 + 1.2e-7 * static_cast<double>(k)) * mag; }

}  // namespace nnasm::test
