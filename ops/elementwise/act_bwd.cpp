// ACT_BWD: the backward of an activation (or ABS), fused into one pass: dx = dy · f'(x).
//
// Computes   dx[i] = dy[i] · f'(x[i]) for fn =
//   relu          x > 0 ? 1 : 0                  leakyrelu  x > 0 ? 1 : alpha
//   elu           x > 0 ? 1 : alpha·e^x          clipped_relu  0 < x < alpha ? 1 : 0
//   sigmoid       s(1 − s), s = sigmoid(x)       tanh       1 − tanh²x
//   gelu          Φ(x) + x·φ(x)                  gelu_tanh  derivative of the tanh form
//   swish         s + alpha·x·s(1 − s), s = sigmoid(alpha·x)
//   abs           sign(x) (0 at 0)
// Inputs     dy: f32; x: f32 of dy's shape (the activation's input).
// Outputs    dx: f32, dy's shape.
// Immediates fn: enum, required; alpha: f32, the activation's own immediate (slope, alpha,
//            threshold, beta), default 0.
// Gradient   none (no second derivatives): autodiff reports it by name.
// Kernels    reference loop; a JIT snippet per fn comes with the shared elementwise generator.
// Notes      at a kink the derivative is the left/zero one, as PyTorch: relu'(0) = 0.
//            A fused op pays here: the composition from forward ops takes 3–6 passes.
#include <cmath>

#include "ops/op.h"

namespace nnasm {
namespace {

enum { FN, ALPHA };
enum class Act { RELU, LEAKYRELU, ELU, CLIPPED_RELU, SIGMOID, TANH, GELU, GELU_TANH, SWISH, ABS };

float sigmoid(float x) {
  if (x >= 0) return 1.f / (1.f + std::exp(-x));
  const float e = std::exp(x);
  return e / (1.f + e);
}

template <Act A>
float derivative(float x, float a) {
  switch (A) {
    case Act::RELU: return x > 0 ? 1.f : 0.f;
    case Act::LEAKYRELU: return x > 0 ? 1.f : a;
    case Act::ELU: return x > 0 ? 1.f : a * std::exp(x);
    case Act::CLIPPED_RELU: return x > 0 && x < a ? 1.f : 0.f;
    case Act::SIGMOID: {
      const float s = sigmoid(x);
      return s * (1 - s);
    }
    case Act::TANH: {
      const float t = std::tanh(x);
      return 1 - t * t;
    }
    case Act::GELU: {
      const float cdf = 0.5f * (1.f + std::erf(x * 0.7071067811865476f));
      const float pdf = 0.3989422804014327f * std::exp(-0.5f * x * x);
      return cdf + x * pdf;
    }
    case Act::GELU_TANH: {
      const float k = 0.7978845608028654f, c = 0.044715f;
      const float t = std::tanh(k * (x + c * x * x * x));
      return 0.5f * (1 + t) + 0.5f * x * (1 - t * t) * k * (1 + 3 * c * x * x);
    }
    case Act::SWISH: {
      const float s = sigmoid(a * x);
      return s + a * x * s * (1 - s);
    }
    case Act::ABS: return x > 0 ? 1.f : (x < 0 ? -1.f : 0.f);
  }
  return 0;
}

template <Act A>
void run(const float* dy, const float* x, float* dx, int64_t n, float a) {
  for (int64_t i = 0; i < n; ++i) dx[i] = std::isnan(x[i]) ? x[i] : dy[i] * derivative<A>(x[i], a);
}

void act_bwd_ref(const KernelArgs* k) {
  const float* dy = static_cast<const float*>(k->in[0]);
  const float* x = static_cast<const float*>(k->in[1]);
  float* dx = static_cast<float*>(k->out[0]);
  const int64_t n = k->out_type[0].shape.numel();
  const float a = static_cast<float>(k->ins->f(ALPHA));
  switch (static_cast<Act>(k->ins->i(FN))) {
    case Act::RELU: return run<Act::RELU>(dy, x, dx, n, a);
    case Act::LEAKYRELU: return run<Act::LEAKYRELU>(dy, x, dx, n, a);
    case Act::ELU: return run<Act::ELU>(dy, x, dx, n, a);
    case Act::CLIPPED_RELU: return run<Act::CLIPPED_RELU>(dy, x, dx, n, a);
    case Act::SIGMOID: return run<Act::SIGMOID>(dy, x, dx, n, a);
    case Act::TANH: return run<Act::TANH>(dy, x, dx, n, a);
    case Act::GELU: return run<Act::GELU>(dy, x, dx, n, a);
    case Act::GELU_TANH: return run<Act::GELU_TANH>(dy, x, dx, n, a);
    case Act::SWISH: return run<Act::SWISH>(dy, x, dx, n, a);
    case Act::ABS: return run<Act::ABS>(dy, x, dx, n, a);
  }
}

Status act_bwd_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(require_f32(ins, in));
  if (in[0].shape != in[1].shape)
    return Status::errorf("ACT_BWD: {} and {} must have one shape", operand_str(ins, 0, in[0]), operand_str(ins, 1, in[1]));
  (*out)[0] = in[0];
  return Status::ok();
}

}  // namespace

OpHooks op_hooks_ACT_BWD() { return {act_bwd_shape, act_bwd_ref}; }

}  // namespace nnasm
