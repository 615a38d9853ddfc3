// The rounding QUANTIZE and LINEAR_I8's activation quantization share, so that the reference
// kernels of both round alike (their JIT kernels use vroundps / vrndscaleps with the
// round-to-nearest-even immediate, which this equals).
#pragma once
#include <cmath>

namespace nnasm {

// Halves to even by comparison, so the result does not depend on the MXCSR's rounding mode (the
// host's; the JIT's vroundps takes the mode as an immediate). q − floor(q) is exact where a tie
// is possible, and where it rounds (q in (−0.5, 0)) it can reach 0.5 only from above, which rounds
// to 0 either way. ±inf: the fraction is NaN and q stays.
inline float round_half_even(float q) {
  float r = std::floor(q);
  const float frac = q - r;
  if (frac > 0.5f || (frac == 0.5f && std::fmod(r, 2.f) != 0)) r += 1;
  return r;
}

// Every |q| ≥ 512 saturates whatever the zero point (|zero point| ≤ 255), so clamping there first
// keeps the conversion to i32 exact.
constexpr float QCLAMP = 512.f;

}  // namespace nnasm
