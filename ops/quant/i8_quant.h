// The dynamic quantization of f32 activations to u8 that LINEAR_I8 and CONV2D_I8 share (ONNX's
// DynamicQuantizeLinear): the parameters of a group of values (a row, an image or the tensor) and
// the quantization of one value, as their reference kernels compute them and their JIT kernels
// equal bitwise.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "ops/quant/round.h"

namespace nnasm {

// What quantizes one group: sx, the divisor (sx, or 1 where sx is 0, so that the quotients round
// to q = zp = 0), the zero point and p (0, or NaN for a non-finite x).
struct I8QParams {
  float sx, div, p;
  int32_t zp;
};

// sat_u8(rne(v) + zp), NaN as −QCLAMP (then 0 or whatever the zero point lifts it to: the output
// is NaN through p anyway).
inline int32_t quantize_u8(float v, int32_t zp) {
  float r = round_half_even(v);
  r = std::isnan(r) ? -QCLAMP : std::min(std::max(r, -QCLAMP), QCLAMP);
  return std::min(std::max(static_cast<int32_t>(r) + zp, 0), 255);
}

// The parameters from lo = min(0, min x), hi = max(0, max x) and p = Σ x·0 of a group:
// sx = (hi − lo) / 255, zp = sat_u8(rne(−lo / sx)). (A JIT kernel's lane order may keep another
// NaN or zero sign in lo and hi; then p is NaN, or zp and sx come out the same.)
inline I8QParams i8_qparams_finish(float lo, float hi, float p) {
  I8QParams q;
  q.sx = (hi - lo) / 255.f;
  q.div = q.sx == 0 ? 1.f : q.sx;
  q.p = p;
  q.zp = quantize_u8(-lo / q.div, 0);
  return q;
}

// The parameters of the n values at x.
inline I8QParams i8_qparams(const float* x, int64_t n) {
  float lo = 0, hi = 0, p = 0;
  for (int64_t k = 0; k < n; ++k) {
    lo = std::min(lo, x[k]);
    hi = std::max(hi, x[k]);
    p += x[k] * 0.f;
  }
  return i8_qparams_finish(lo, hi, p);
}

// A given scale and zero point (a static QDQ model's, x_scale=given): the divisor 1 for sx = 0, as
// above, and p of the n values at x.
inline I8QParams i8_given_qparams(float sx, int32_t zp, const float* x, int64_t n) {
  I8QParams q;
  q.sx = sx;
  q.div = sx == 0 ? 1.f : sx;
  q.zp = zp;
  q.p = 0;
  for (int64_t k = 0; k < n; ++k) q.p += x[k] * 0.f;
  return q;
}

}  // namespace nnasm
