// The optimizer steps: SGD (momentum, Nesterov, weight decay), ADAM, ADAMW, RMSPROP. Each
// updates a weight and its state in place from the weight's gradient and a learning-rate tensor,
// with PyTorch's semantics (torch.optim) so results can be compared step by step.
//
// Computes   (λ = weight_decay, g' = g + λw for the L2 forms)
//   SGD      v = μ·v + g';  w −= lr·(nesterov ? g' + μ·v : v)
//   ADAM     m = β₁m + (1−β₁)g';  v = β₂v + (1−β₂)g'²;
//            w −= lr·(m/(1−β₁ᵗ)) / (√(v/(1−β₂ᵗ)) + eps)      (bias correction by the step t;
//            the moments themselves are never rescaled)
//   ADAMW    w −= lr·λ·w, then ADAM's step with g (decay decoupled from the moments)
//   RMSPROP  s = αs + (1−α)g'²;  w −= lr·g'/(√s + eps)
// Inputs     SGD: w, g, v, lr. ADAM/ADAMW: w, g, m, v, lr, t. RMSPROP: w, g, s, lr.
//            g and the state match w; lr and t are f32[] (t already advanced: 1 on the first step).
// Outputs    SGD: w, v. ADAM/ADAMW: w, m, v. RMSPROP: w, s — the inputs, updated in place.
// Gradient   none: update instructions are never differentiated.
// Kernels    reference: one pass over the weight; a fused JIT loop comes with the JIT issue.
#include <cmath>

#include "ops/optim/optim_common.h"

namespace nnasm {
namespace {

const float* in_f(const KernelArgs* k, int i) { return static_cast<const float*>(k->in[i]); }
float* out_f(const KernelArgs* k, int i) { return static_cast<float*>(k->out[i]); }

// ---- SGD: w, g, v, lr -> w, v ----
enum { SGD_MOMENTUM, SGD_NESTEROV, SGD_DECAY };

Status sgd_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(check_operands(ins, in, {1, 2}, {3}));
  return inplace_outputs(ins, in, out, {0, 2});
}

void sgd_ref(const KernelArgs* k) {
  const float mu = static_cast<float>(k->ins->f(SGD_MOMENTUM)), wd = static_cast<float>(k->ins->f(SGD_DECAY));
  const bool nesterov = k->ins->i(SGD_NESTEROV);
  const float lr = *in_f(k, 3);
  const float* g = in_f(k, 1);
  float *w = out_f(k, 0), *v = out_f(k, 1);
  const int64_t n = k->in_type[0].shape.numel();
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] + wd * w[i];
    v[i] = mu * v[i] + gi;
    w[i] -= lr * (nesterov ? gi + mu * v[i] : v[i]);
  }
}

// ---- ADAM / ADAMW: w, g, m, v, lr, t -> w, m, v ----
enum { ADAM_BETA1, ADAM_BETA2, ADAM_EPS, ADAM_DECAY };

Status adam_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(check_operands(ins, in, {1, 2, 3}, {4, 5}));
  return inplace_outputs(ins, in, out, {0, 2, 3});
}

template <bool DECOUPLED>
void adam_ref(const KernelArgs* k) {
  const double b1 = k->ins->f(ADAM_BETA1), b2 = k->ins->f(ADAM_BETA2);
  const float eps = static_cast<float>(k->ins->f(ADAM_EPS)), wd = static_cast<float>(k->ins->f(ADAM_DECAY));
  const float lr = *in_f(k, 4);
  const double t = *in_f(k, 5);
  const float c1 = static_cast<float>(1 - std::pow(b1, t)), c2 = static_cast<float>(1 - std::pow(b2, t));
  const float fb1 = static_cast<float>(b1), fb2 = static_cast<float>(b2);
  const float* g = in_f(k, 1);
  float *w = out_f(k, 0), *m = out_f(k, 1), *v = out_f(k, 2);
  const int64_t n = k->in_type[0].shape.numel();
  for (int64_t i = 0; i < n; ++i) {
    float gi = g[i];
    if (DECOUPLED) w[i] -= lr * wd * w[i];
    else gi += wd * w[i];
    m[i] = fb1 * m[i] + (1 - fb1) * gi;
    v[i] = fb2 * v[i] + (1 - fb2) * gi * gi;
    w[i] -= lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + eps);
  }
}

// ---- RMSPROP: w, g, s, lr -> w, s ----
enum { RMS_ALPHA, RMS_EPS, RMS_DECAY };

Status rmsprop_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(check_operands(ins, in, {1, 2}, {3}));
  return inplace_outputs(ins, in, out, {0, 2});
}

void rmsprop_ref(const KernelArgs* k) {
  const float a = static_cast<float>(k->ins->f(RMS_ALPHA)), eps = static_cast<float>(k->ins->f(RMS_EPS));
  const float wd = static_cast<float>(k->ins->f(RMS_DECAY)), lr = *in_f(k, 3);
  const float* g = in_f(k, 1);
  float *w = out_f(k, 0), *s = out_f(k, 1);
  const int64_t n = k->in_type[0].shape.numel();
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] + wd * w[i];
    s[i] = a * s[i] + (1 - a) * gi * gi;
    w[i] -= lr * gi / (std::sqrt(s[i]) + eps);
  }
}

}  // namespace

OpHooks op_hooks_SGD() { return {sgd_shape, sgd_ref}; }
OpHooks op_hooks_ADAM() { return {adam_shape, adam_ref<false>}; }
OpHooks op_hooks_ADAMW() { return {adam_shape, adam_ref<true>}; }
OpHooks op_hooks_RMSPROP() { return {rmsprop_shape, rmsprop_ref}; }

}  // namespace nnasm
