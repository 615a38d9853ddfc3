// The naive CONV2D_BF16 that tests/conv_bf16_test.cpp and the parity cases compare against,
// written apart from the op: each output a loop over the patch in PyTorch's weight layout, x
// rounded to bf16, the exact products summed in double, the bias, then the caller's activation.
// The tolerance is LINEAR_BF16's (tests/linear_bf16_naive.h) with in = C·kh·kw.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>

#include "isa/bf16.h"
#include "tests/linear_bf16_naive.h"
#include "tests/op_harness.h"

namespace nnasm::test {

struct ConvBf16Geom {
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
};

// wt[c, i, j, o] = w[o, c, i, j]: CONV_WEIGHTS_BF16's layout, from w bf16[O, C, kh, kw].
inline HostTensor transpose_conv_weight(const HostTensor& w) {
  const Shape& s = w.type.shape;
  const int64_t o = s[0], k = s[1] * s[2] * s[3];
  HostTensor t{TensorType{DType::BF16, Shape{s[1], s[2], s[3], s[0]}}, std::vector<double>(w.v.size())};
  for (int64_t r = 0; r < o; ++r)
    for (int64_t c = 0; c < k; ++c) t.v[static_cast<size_t>(c * o + r)] = w.v[static_cast<size_t>(r * k + c)];
  return t;
}

// y = f(conv(bf16(x), w) + b) for x [N, C, H, W], w [O, C, kh, kw], b [O] (no values: no bias).
inline Expected naive_conv2d_bf16(const HostTensor& x, const HostTensor& w, const HostTensor& b, const ConvBf16Geom& g,
                                  const std::function<double(double)>& f) {
  const Shape &xs = x.type.shape, &ws = w.type.shape;
  const int64_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3], o = ws[0], kh = ws[2], kw = ws[3];
  const int64_t ho = (h + 2 * g.ph - g.dh * (kh - 1) - 1) / g.sh + 1, wo = (wd + 2 * g.pw - g.dw * (kw - 1) - 1) / g.sw + 1;
  const double eps = std::ldexp(1.0, -23);
  const double k = static_cast<double>(c * kh * kw);
  Expected e{HostTensor{TensorType{DType::F32, Shape{n, o, ho, wo}}, {}}, {}, Tolerance{2e-6, 1.2 * (k + 2) * eps + 1e-6}};
  for (int64_t in = 0; in < n; ++in)
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t oy = 0; oy < ho; ++oy)
        for (int64_t ox = 0; ox < wo; ++ox) {
          double z = 0, mag = 0;
          for (int64_t ic = 0; ic < c; ++ic)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t iy = oy * g.sh - g.ph + i * g.dh, ix = ox * g.sw - g.pw + j * g.dw;
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                const double xv = bf16_to_f32(bf16_from_double(static_cast<float>(x.v[static_cast<size_t>(((in * c + ic) * h + iy) * wd + ix)])));
                const double p = xv * w.v[static_cast<size_t>(((oc * c + ic) * kh + i) * kw + j)];
                z += p;
                mag += std::fabs(p);
              }
          if (!b.v.empty()) {
            z += b.v[static_cast<size_t>(oc)];
            mag += std::fabs(b.v[static_cast<size_t>(oc)]);
          }
          e.t.v.push_back(f(z));
          e.mag.push_back(mag);
        }
  return e;
}

}  // namespace nnasm::test
