// The activations' scalar functions: the reference of the activation ops (unary.cpp), of
// LINEAR's fused activation (ops/linalg/linear.cpp) and of their derivatives (act_bwd.cpp).
// `a` is the activation's own immediate (slope, alpha, threshold, beta).
#pragma once
#include <cmath>

#include "jit/act_snippet.h"

namespace nnasm::act {

inline float sigmoid(float x) {
  // Split by sign so e^(−x) never overflows.
  if (x >= 0) return 1.f / (1.f + std::exp(-x));
  const float e = std::exp(x);
  return e / (1.f + e);
}
inline float relu(float x) { return std::isnan(x) ? x : (x > 0 ? x : 0.f); }
inline float leakyrelu(float x, float a) { return x > 0 ? x : a * x; }
inline float elu(float x, float a) { return x > 0 ? x : a * std::expm1(x); }
inline float clipped_relu(float x, float a) { return std::isnan(x) ? x : std::fmin(std::fmax(x, 0.f), a); }
inline float gelu(float x) { return 0.5f * x * (1.f + std::erf(x * 0.7071067811865476f)); }
inline float gelu_tanh(float x) {
  const float k = 0.7978845608028654f;  // √(2/π)
  return 0.5f * x * (1.f + std::tanh(k * (x + 0.044715f * x * x * x)));
}
inline float swish(float x, float a) { return x * sigmoid(a * x); }

static_assert(ACTIVATION_COUNT == 10, "a new activation needs its scalar function here");
// f(x) for one of LINEAR's `act` choices.
inline float apply(Activation f, float x, float a) {
  switch (f) {
    case Activation::NONE: return x;
    case Activation::RELU: return relu(x);
    case Activation::LEAKYRELU: return leakyrelu(x, a);
    case Activation::ELU: return elu(x, a);
    case Activation::CLIPPED_RELU: return clipped_relu(x, a);
    case Activation::SIGMOID: return sigmoid(x);
    case Activation::TANH: return std::tanh(x);
    case Activation::GELU: return gelu(x);
    case Activation::GELU_TANH: return gelu_tanh(x);
    case Activation::SWISH: return swish(x, a);
  }
  return x;
}

}  // namespace nnasm::act
