// The naive CONV2D_I8 that tests/conv_i8_test.cpp and the parity case compare against, written
// apart from the op: the packing from scratch, the quantization with rint (the MXCSR's default
// rounding, halves to even) on the f32 quotient, the padding as x = 0 quantized, the integer sum
// exact in int64 over the unpacked weight, then the f32 epilogue the contract names (one fma).
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "tests/linear_i8_naive.h"
#include "tests/op_harness.h"

namespace nnasm::test {

// w i8[O, C, kh, kw] -> wp i8[O, ⌈C/4⌉, kh, kw, 4], colsum i32[O].
inline std::vector<HostTensor> naive_pack_conv_i8(const HostTensor& w) {
  const Shape& s = w.type.shape;
  const int64_t o = s[0], c = s[1], kh = s[2], kw = s[3], c4 = (c + 3) / 4;
  HostTensor wp{TensorType{DType::I8, Shape{o, c4, kh, kw, 4}}, std::vector<double>(static_cast<size_t>(o * c4 * kh * kw * 4), 0)};
  HostTensor cs{TensorType{DType::I32, Shape{o}}, std::vector<double>(static_cast<size_t>(o), 0)};
  for (int64_t oo = 0; oo < o; ++oo)
    for (int64_t cc = 0; cc < c; ++cc)
      for (int64_t i = 0; i < kh; ++i)
        for (int64_t j = 0; j < kw; ++j) {
          const double v = w.v[static_cast<size_t>(((oo * c + cc) * kh + i) * kw + j)];
          wp.v[static_cast<size_t>((((oo * c4 + cc / 4) * kh + i) * kw + j) * 4 + cc % 4)] = v;
          cs.v[static_cast<size_t>(oo)] += v;
        }
  return {wp, cs};
}

struct ConvI8Geom {
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
};

// y = f(fma(f32(Σ (q − zp)·w), sx·s, b) + p) for x [N, C, H, W], w i8 [O, C, kh, kw], scale [O]
// or [1], b [O] (empty: none); `tensor`: one sx and zp for all of x. Exact unless `tol` says.
// `given` (x_scale=given): sx and zp, q = naive_given_q; an image with a NaN or ±inf, or a NaN sx,
// gives NaN outputs.
struct GivenQ {
  float sx;
  int64_t zp;
};
inline Expected naive_conv2d_i8(const HostTensor& x, const HostTensor& w, const HostTensor& scale, const HostTensor& b,
                                const ConvI8Geom& g, bool tensor, const std::function<float(float)>& f,
                                Tolerance tol = {0, 0}, const GivenQ* given = nullptr) {
  const Shape& xs = x.type.shape;
  const Shape& ws = w.type.shape;
  const int64_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3], o = ws[0], kh = ws[2], kw = ws[3];
  const int64_t ho = (h + 2 * g.ph - g.dh * (kh - 1) - 1) / g.sh + 1, wo = (wd + 2 * g.pw - g.dw * (kw - 1) - 1) / g.sw + 1;
  Expected e{HostTensor{TensorType{DType::F32, Shape{n, o, ho, wo}}, {}}, {}, tol};
  const int64_t image = c * h * wd;
  for (int64_t nn = 0; nn < n; ++nn) {
    const int64_t g0 = tensor ? 0 : nn * image, g1 = tensor ? n * image : (nn + 1) * image;
    NaiveQuant nq = naive_quant(x, g0, g1);
    if (given) nq.finite = nq.finite && !std::isnan(given->sx);
    const float sx = given ? given->sx : nq.sx;
    const int64_t zp = given ? given->zp : nq.zp;
    auto q = [&](float v) { return given ? naive_given_q(v, sx, zp) : nq.q(v); };
    for (int64_t oo = 0; oo < o; ++oo)
      for (int64_t oy = 0; oy < ho; ++oy)
        for (int64_t ox = 0; ox < wo; ++ox) {
          if (!nq.finite) {
            e.t.v.push_back(std::numeric_limits<double>::quiet_NaN());
            continue;
          }
          int64_t acc = 0;
          for (int64_t cc = 0; cc < c; ++cc)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t iy = oy * g.sh - g.ph + i * g.dh, ix = ox * g.sw - g.pw + j * g.dw;
                const float v = iy >= 0 && iy < h && ix >= 0 && ix < wd
                                    ? static_cast<float>(x.v[static_cast<size_t>(((nn * c + cc) * h + iy) * wd + ix)])
                                    : 0.f;
                acc += (q(v) - zp) * static_cast<int64_t>(w.v[static_cast<size_t>(((oo * c + cc) * kh + i) * kw + j)]);
              }
          const float s = static_cast<float>(scale.v[scale.v.size() == 1 ? 0 : static_cast<size_t>(oo)]);
          const float bo = b.v.empty() ? 0.f : static_cast<float>(b.v[static_cast<size_t>(oo)]);
          e.t.v.push_back(f(std::fma(static_cast<float>(acc), sx * s, bo) + 0.f));
        }
  }
  return e;
}

}  // namespace nnasm::test
