// The naive LINEAR_BF16 that tests/linear_bf16_test.cpp and the parity case compare against,
// written apart from the op: x rounded to bf16, the exact products summed in double, the bias,
// then the caller's activation `f`. The tolerance is the f32 summation bound: a kernel sums `in`
// products in f32 in some order, each addition off by at most half an ulp of the partial sum, so
// |error| ≤ in·eps·Σ|products|, plus the bias's addition; an activation passes it on times |f'|
// (at most 1.13, gelu) and adds its own few ulps.
#pragma once
#include <cmath>
#include <cstdint>
#include <random>

#include <functional>

#include "isa/bf16.h"
#include "tests/op_harness.h"

namespace nnasm::test {

// Uniform in [lo, hi), each value rounded to bf16 (what the param holds).
inline HostTensor random_bf16(const Shape& s, std::mt19937& rng, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  HostTensor h{TensorType{DType::BF16, s}, {}};
  for (int64_t i = 0; i < count_of(s); ++i) h.v.push_back(bf16_to_f32(bf16_from_double(u(rng))));
  return h;
}

// y = f(bf16(x)·W + b) for x [..., in], W [in, out], b [out].
inline Expected naive_linear_bf16(const HostTensor& x, const HostTensor& w, const HostTensor& b,
                                  const std::function<double(double)>& f) {
  const int64_t in = w.type.shape[0], out = w.type.shape[1], rows = count_of(x.type.shape) / in;
  Shape ys = x.type.shape;
  ys[ys.rank - 1] = out;
  const double eps = std::ldexp(1.0, -23);
  Expected e{HostTensor{TensorType{DType::F32, ys}, {}}, {}, Tolerance{2e-6, 1.2 * (static_cast<double>(in) + 2) * eps + 1e-6}};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < out; ++j) {
      double z = 0, mag = 0;
      for (int64_t k = 0; k < in; ++k) {
        const double p = bf16_to_f32(bf16_from_double(static_cast<float>(x.v[r * in + k]))) * w.v[k * out + j];
        z += p;
        mag += std::fabs(p);
      }
      z += b.v[j];
      mag += std::fabs(b.v[j]);
      e.t.v.push_back(f(z));
      e.mag.push_back(mag);
    }
  return e;
}

}  // namespace nnasm::test
