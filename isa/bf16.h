// bf16 conversions: the top 16 bits of an f32 (1 sign, 8 exponent, 7 mantissa bits). Values are
// rounded to the nearest bf16, ties to even, as vcvtneps2bf16 does, so that what the listing, the
// initializers and the kernels store for one number is the same bit pattern.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace nnasm {

inline float bf16_to_f32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// The bf16 nearest to `v` (ties to even; NaN stays a quiet NaN, ±inf stays ±inf). Rounds the
// double directly, not through f32, so that a value just above a tie is not first rounded onto it.
// `*overflow` (when given) is set when a finite `v` rounds to infinity.
inline uint16_t bf16_from_double(double v, bool* overflow = nullptr) {
  if (overflow) *overflow = false;
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  if (std::isnan(v)) return sign | 0x7fc0;
  if (std::isinf(v)) return sign | 0x7f80;
  const double a = std::fabs(v);
  // The bf16 just below |v| (by truncating its f32), then the nearer of it and the next one up.
  // The f32 may have rounded up across a bf16 boundary, so the one below that is a candidate too.
  const float f = a >= 0x1p128 ? INFINITY : static_cast<float>(a);
  uint32_t fb;
  std::memcpy(&fb, &f, 4);
  uint32_t h = (fb >> 16) > 0x7f7f ? 0x7f7f : fb >> 16;
  auto value = [](uint32_t x) { return x >= 0x7f80 ? 0x1p128 : static_cast<double>(bf16_to_f32(static_cast<uint16_t>(x))); };
  if (h > 0 && value(h) > a) --h;
  const double lo = value(h), hi = value(h + 1);
  const double dlo = a - lo, dhi = hi - a;
  if (dhi < dlo || (dhi == dlo && (h & 1))) ++h;
  if (h >= 0x7f80) {
    if (overflow) *overflow = true;
    h = 0x7f80;
  }
  return static_cast<uint16_t>(sign | h);
}

inline uint16_t bf16_from_f32(float v) { return bf16_from_double(static_cast<double>(v)); }

}  // namespace nnasm
