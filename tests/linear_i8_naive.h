// The naive LINEAR_I8 that tests/linear_i8_test.cpp and the parity case compare against, written
// apart from the op: the packing from scratch, the quantization with numpy's rint (the MXCSR's
// default rounding, halves to even) on the f32 quotient, the integer sum exact in int64 over the
// unpacked weight, then the f32 epilogue the contract names (one fma), and the caller's `f`.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>

#include "tests/op_harness.h"

namespace nnasm::test {

inline HostTensor random_i8(const Shape& s, std::mt19937& rng) {
  std::uniform_int_distribution<int> u(-128, 127);
  HostTensor h{TensorType{DType::I8, s}, {}};
  for (int64_t i = 0; i < count_of(s); ++i) h.v.push_back(u(rng));
  return h;
}

// w i8[K, O] -> wp i8[⌈K/4⌉, O, 4], colsum i32[O].
inline std::vector<HostTensor> naive_pack_i8(const HostTensor& w) {
  const int64_t k = w.type.shape[0], o = w.type.shape[1], nq = (k + 3) / 4;
  HostTensor wp{TensorType{DType::I8, Shape{nq, o, 4}}, std::vector<double>(static_cast<size_t>(nq * o * 4), 0)};
  HostTensor cs{TensorType{DType::I32, Shape{o}}, std::vector<double>(static_cast<size_t>(o), 0)};
  for (int64_t kk = 0; kk < k; ++kk)
    for (int64_t c = 0; c < o; ++c) {
      wp.v[static_cast<size_t>(((kk / 4) * o + c) * 4 + kk % 4)] = w.v[static_cast<size_t>(kk * o + c)];
      cs.v[static_cast<size_t>(c)] += w.v[static_cast<size_t>(kk * o + c)];
    }
  return {wp, cs};
}

// The quantization of the group x.v[g0, g1) as DynamicQuantizeLinear defines it: sx, zp (0 where
// sx is 0 or a value is not finite) and q of a value.
struct NaiveQuant {
  float sx = 0;
  int64_t zp = 0;
  bool finite = true;
  int64_t q(float v) const { return q_with(v, zp); }
  int64_t q_with(float v, int64_t z) const {
    if (sx == 0) return 0;
    const float r = std::nearbyint(v / sx);
    return std::min<int64_t>(255, std::max<int64_t>(0, static_cast<int64_t>(r) + z));
  }
};

inline NaiveQuant naive_quant(const HostTensor& x, int64_t g0, int64_t g1) {
  float lo = 0, hi = 0;
  NaiveQuant nq;
  for (int64_t i = g0; i < g1; ++i) {
    const float v = static_cast<float>(x.v[static_cast<size_t>(i)]);
    nq.finite = nq.finite && std::isfinite(v);
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  nq.sx = (hi - lo) / 255.f;
  nq.zp = nq.sx == 0 || !nq.finite ? 0 : nq.q_with(-lo, 0);
  return nq;
}

// y = f(fma(f32(Σ (q − zp)·w), sx·s, b) + p) for x [..., K], w i8 [K, O], scale [O] or [1], b [O];
// `tensor`: one sx and zp for all of x. Exact (tolerance 0) unless `tol` says otherwise.
inline Expected naive_linear_i8(const HostTensor& x, const HostTensor& w, const HostTensor& scale, const HostTensor& b,
                                bool tensor, const std::function<float(float)>& f, Tolerance tol = {0, 0}) {
  const int64_t k = w.type.shape[0], o = w.type.shape[1];
  const int64_t rows = k ? count_of(x.type.shape) / k : 0;
  Shape ys = x.type.shape;
  ys[ys.rank - 1] = o;
  Expected e{HostTensor{TensorType{DType::F32, ys}, {}}, {}, tol};
  const int64_t group = tensor ? rows * k : k;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t g0 = tensor ? 0 : r * k;
    const NaiveQuant nq = naive_quant(x, g0, g0 + group);
    const float sx = nq.sx;
    const int64_t zp = nq.zp;
    for (int64_t c = 0; c < o; ++c) {
      if (!nq.finite) {
        e.t.v.push_back(std::numeric_limits<double>::quiet_NaN());
        continue;
      }
      int64_t acc = 0;
      for (int64_t kk = 0; kk < k; ++kk)
        acc += (nq.q(static_cast<float>(x.v[static_cast<size_t>(r * k + kk)])) - zp) *
               static_cast<int64_t>(w.v[static_cast<size_t>(kk * o + c)]);
      const float s = static_cast<float>(scale.v[scale.v.size() == 1 ? 0 : static_cast<size_t>(c)]);
      const float t = sx * s;
      const float y = std::fma(static_cast<float>(acc), t, static_cast<float>(b.v[static_cast<size_t>(c)])) + 0.f;
      e.t.v.push_back(f(y));
    }
  }
  return e;
}

// A generated kernel's output y against the reference kernel's `want`: bitwise where `exact`
// (NaN for NaN), else within the activation snippets' few ulps; the first 5 differences reported.
inline void expect_kernel_equals_reference(const std::vector<float>& y, const std::vector<float>& want, bool exact) {
  int bad = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const bool same = std::isnan(want[i]) ? std::isnan(y[i]) : std::memcmp(&y[i], &want[i], 4) == 0;
    const bool close =
        std::isnan(want[i]) ? std::isnan(y[i]) : std::fabs(y[i] - want[i]) <= 1e-6 + 4e-6 * std::fabs(want[i]);
    if (!(exact ? same : close) && bad++ < 5) ADD_FAILURE() << "at " << i << ": got " << y[i] << ", reference " << want[i];
  }
}

// QuantizeLinear's q = sat_u8(rint(v / sx) + zp), dividing by 1 where sx is 0 (the ops'
// x_scale=given), for a finite v and a non-NaN sx.
inline int64_t naive_given_q(float v, float sx, int64_t zp) {
  float r = std::nearbyint(v / (sx == 0 ? 1.f : sx));
  r = std::isnan(r) ? -512.f : std::min(512.f, std::max(-512.f, r));
  return std::min<int64_t>(255, std::max<int64_t>(0, static_cast<int64_t>(r) + zp));
}

// x_scale=given: sx and zp given (a static QDQ model's QuantizeLinear), q = sat_u8(rint(x / sx) + zp)
// (x / 1 where sx is 0), y = f(fma(f32(Σ (q − zp)·w), sx·s, b) + 0); a row with a NaN or ±inf, or
// a NaN sx, gives NaN outputs.
inline Expected naive_linear_i8_given(const HostTensor& x, const HostTensor& w, const HostTensor& scale,
                                      const HostTensor& b, float sx, int64_t zp, const std::function<float(float)>& f,
                                      Tolerance tol = {0, 0}) {
  const int64_t k = w.type.shape[0], o = w.type.shape[1];
  const int64_t rows = k ? count_of(x.type.shape) / k : 0;
  Shape ys = x.type.shape;
  ys[ys.rank - 1] = o;
  Expected e{HostTensor{TensorType{DType::F32, ys}, {}}, {}, tol};
  auto q = [&](float v) { return naive_given_q(v, sx, zp); };
  for (int64_t r = 0; r < rows; ++r) {
    bool finite = !std::isnan(sx);
    for (int64_t kk = 0; kk < k; ++kk) finite = finite && std::isfinite(x.v[static_cast<size_t>(r * k + kk)]);
    for (int64_t c = 0; c < o; ++c) {
      if (!finite) {
        e.t.v.push_back(std::numeric_limits<double>::quiet_NaN());
        continue;
      }
      int64_t acc = 0;
      for (int64_t kk = 0; kk < k; ++kk)
        acc += (q(static_cast<float>(x.v[static_cast<size_t>(r * k + kk)])) - zp) *
               static_cast<int64_t>(w.v[static_cast<size_t>(kk * o + c)]);
      const float s = static_cast<float>(scale.v[scale.v.size() == 1 ? 0 : static_cast<size_t>(c)]);
      const float y = std::fma(static_cast<float>(acc), sx * s, static_cast<float>(b.v[static_cast<size_t>(c)])) + 0.f;
      e.t.v.push_back(f(y));
    }
  }
  return e;
}

}  // namespace nnasm::test
