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
// Kernels    reference: one pass over the weight. JIT: the same pass as one multi-input,
//            multi-output elementwise kernel (jit/elementwise.h), f32_<op>__avx2 / __avx512,
//            with the reference's operations in the reference's order, so bitwise equal to it.
//            ADAM/ADAMW get lr, the bias corrections 1 − βᵗ (in double, as the reference) and lr·λ
//            from a host function the kernel calls once per run.
// Parts      weights of ≥ 64K elements split into disjoint runs (≥ 32K elements each, whole cache
//            lines) as the unary ops; each part's kernel runs the host function itself, which
//            depends on lr, t and the immediates only, so all parts use the same scalars.
#include <cmath>

#include "jit/elementwise.h"
#include "ops/optim/optim_common.h"

namespace nnasm {
namespace {

const float* in_f(const KernelArgs* k, int i) { return static_cast<const float*>(k->in[i]); }
float* out_f(const KernelArgs* k, int i) { return static_cast<float*>(k->out[i]); }

// ---- SGD: w, g, v, lr -> w, v ----

Status sgd_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(check_operands(ins, in, {1, 2}, {3}));
  return inplace_outputs(ins, in, out, {0, 2});
}

void sgd_ref(const KernelArgs* k) {
  const float mu = static_cast<float>(k->ins->f(NNASM_IMM(SGD, momentum))), wd = static_cast<float>(k->ins->f(NNASM_IMM(SGD, weight_decay)));
  const bool nesterov = k->ins->i(NNASM_IMM(SGD, nesterov));
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
// ADAM and ADAMW share one layout.
#define NNASM_ADAM_IMM(key) NNASM_IMM_SHARED(key, Opcode::ADAM, Opcode::ADAMW)
constexpr int ADAM_BETA1 = NNASM_ADAM_IMM(beta1), ADAM_BETA2 = NNASM_ADAM_IMM(beta2), ADAM_EPS = NNASM_ADAM_IMM(eps),
              ADAM_DECAY = NNASM_ADAM_IMM(weight_decay);
#undef NNASM_ADAM_IMM

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

Status rmsprop_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(check_operands(ins, in, {1, 2}, {3}));
  return inplace_outputs(ins, in, out, {0, 2});
}

void rmsprop_ref(const KernelArgs* k) {
  const float a = static_cast<float>(k->ins->f(NNASM_IMM(RMSPROP, alpha))), eps = static_cast<float>(k->ins->f(NNASM_IMM(RMSPROP, eps)));
  const float wd = static_cast<float>(k->ins->f(NNASM_IMM(RMSPROP, weight_decay))), lr = *in_f(k, 3);
  const float* g = in_f(k, 1);
  float *w = out_f(k, 0), *s = out_f(k, 1);
  const int64_t n = k->in_type[0].shape.numel();
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] + wd * w[i];
    s[i] = a * s[i] + (1 - a) * gi * gi;
    w[i] -= lr * gi / (std::sqrt(s[i]) + eps);
  }
}

// ---- JIT: src = the inputs (then host scalars), dst = the updated operands; dst[0] is w's
// register, so it is written last ----
using Xbyak::CodeGenerator;
using Xbyak::Xmm;
using Regs = std::vector<Xmm>;

Result<KernelRef> optim_kernel(const JitRequest& r, KernelCache& cache, EwSpec s) {
  const int64_t n = r.in[0].shape.numel();
  if (n <= 0) return KernelRef();
  s.isa = r.isa;
  s.inner = n;
  elementwise_part(&s, r.part, r.n_parts);
  return elementwise_kernel(s, cache);
}

// Parts: disjoint runs of the weight (and its state), as unary_parts. Every element gets the
// whole-step kernel's arithmetic; ADAM's host function reads only lr, t and the immediates, so
// every part computes the same per-run scalars.
int optim_parts(const JitRequest& r, int threads) {
  EwSpec s;
  s.inner = r.in[0].shape.numel();
  s.in = {Feed::STREAM};
  // The weight, its gradient and its state, read and written: the memory the step touches.
  int arrays = 0;
  for (size_t k = 0; k < r.ins.in.size(); ++k) arrays += r.in[k].shape.numel() == s.inner;
  for (size_t k = 0; k < r.ins.out.size(); ++k) arrays += r.out[k].shape.numel() == s.inner;
  return elementwise_max_parts(s, threads, arrays);
}

Result<KernelRef> sgd_jit(const JitRequest& r, KernelCache& cache) {
  const float mu = static_cast<float>(r.ins.f(NNASM_IMM(SGD, momentum))), wd = static_cast<float>(r.ins.f(NNASM_IMM(SGD, weight_decay)));
  const bool nesterov = r.ins.i(NNASM_IMM(SGD, nesterov));
  EwSpec s;
  s.op = "sgd";
  s.imms = fmt::format("momentum={},nesterov={},weight_decay={}", mu, nesterov, wd);
  s.in = {Feed::STREAM, Feed::STREAM, Feed::STREAM, Feed::SCALAR};  // w, g, v, lr
  s.n_out = 2;                                                       // w, v
  s.n_tmp = 2;
  s.body = [mu, wd, nesterov](VecGen& v, const Regs& d, const Regs& x, const Regs& t) {
    CodeGenerator& g = v.g;
    g.vmulps(t[0], x[0], v.cst(wd));
    g.vaddps(t[0], x[1], t[0]);  // g' = g + λw
    g.vmulps(d[1], x[2], v.cst(mu));
    g.vaddps(d[1], d[1], t[0]);  // v = μv + g'
    Xmm step = d[1];
    if (nesterov) {
      g.vmulps(t[1], d[1], v.cst(mu));
      g.vaddps(t[1], t[0], t[1]);
      step = t[1];
    }
    g.vmulps(t[1], x[3], step);
    g.vsubps(d[0], x[0], t[1]);
  };
  return optim_kernel(r, cache, s);
}

// lr, 1 − β₁ᵗ, 1 − β₂ᵗ and lr·λ, computed as adam_ref does.
void adam_host(const KernelArgs* k, float* out) {
  const double b1 = k->ins->f(ADAM_BETA1), b2 = k->ins->f(ADAM_BETA2);
  const float lr = *in_f(k, 4), wd = static_cast<float>(k->ins->f(ADAM_DECAY));
  const double t = *in_f(k, 5);
  out[0] = lr;
  out[1] = static_cast<float>(1 - std::pow(b1, t));
  out[2] = static_cast<float>(1 - std::pow(b2, t));
  out[3] = lr * wd;
}

template <bool DECOUPLED>
Result<KernelRef> adam_jit(const JitRequest& r, KernelCache& cache) {
  const float b1 = static_cast<float>(r.ins.f(ADAM_BETA1)), b2 = static_cast<float>(r.ins.f(ADAM_BETA2));
  const float eps = static_cast<float>(r.ins.f(ADAM_EPS)), wd = static_cast<float>(r.ins.f(ADAM_DECAY));
  EwSpec s;
  s.op = DECOUPLED ? "adamw" : "adam";
  s.imms = fmt::format("beta1={},beta2={},eps={},weight_decay={}", b1, b2, eps, wd);
  // w, g, m, v, lr, t; lr and t reach the body through the host scalars.
  s.in = {Feed::STREAM, Feed::STREAM, Feed::STREAM, Feed::STREAM, Feed::NONE, Feed::NONE};
  s.n_out = 3;  // w, m, v
  s.n_tmp = 4;
  s.host = adam_host;
  s.n_host = 4;
  s.body = [b1, b2, eps, wd](VecGen& v, const Regs& d, const Regs& x, const Regs& t) {
    // x: w, g, m, v, -, -, lr, 1 − β₁ᵗ, 1 − β₂ᵗ, lr·λ.  t0: g', t1: w after decay, t2, t3: scratch
    CodeGenerator& g = v.g;
    Xmm gi = x[1], w = x[0];
    if (DECOUPLED) {
      g.vmulps(t[1], x[9], x[0]);
      g.vsubps(t[1], x[0], t[1]);  // w −= lr·λ·w
      w = t[1];
    } else {
      g.vmulps(t[0], x[0], v.cst(wd));
      g.vaddps(t[0], x[1], t[0]);  // g' = g + λw
      gi = t[0];
    }
    g.vmulps(d[1], x[2], v.cst(b1));
    g.vmulps(t[2], gi, v.cst(1 - b1));
    g.vaddps(d[1], d[1], t[2]);  // m = β₁m + (1 − β₁)g'
    g.vmulps(d[2], x[3], v.cst(b2));
    g.vmulps(t[2], gi, v.cst(1 - b2));
    g.vmulps(t[2], t[2], gi);
    g.vaddps(d[2], d[2], t[2]);  // v = β₂v + (1 − β₂)g'²
    g.vdivps(t[2], d[1], x[7]);
    g.vmulps(t[2], x[6], t[2]);  // lr·(m/c₁)
    g.vdivps(t[3], d[2], x[8]);
    g.vsqrtps(t[3], t[3]);
    g.vaddps(t[3], t[3], v.cst(eps));
    g.vdivps(t[2], t[2], t[3]);
    g.vsubps(d[0], w, t[2]);
  };
  return optim_kernel(r, cache, s);
}

Result<KernelRef> rmsprop_jit(const JitRequest& r, KernelCache& cache) {
  const float a = static_cast<float>(r.ins.f(NNASM_IMM(RMSPROP, alpha))), eps = static_cast<float>(r.ins.f(NNASM_IMM(RMSPROP, eps)));
  const float wd = static_cast<float>(r.ins.f(NNASM_IMM(RMSPROP, weight_decay)));
  EwSpec s;
  s.op = "rmsprop";
  s.imms = fmt::format("alpha={},eps={},weight_decay={}", a, eps, wd);
  s.in = {Feed::STREAM, Feed::STREAM, Feed::STREAM, Feed::SCALAR};  // w, g, s, lr
  s.n_out = 2;                                                       // w, s
  s.n_tmp = 2;
  s.body = [a, eps, wd](VecGen& v, const Regs& d, const Regs& x, const Regs& t) {
    CodeGenerator& g = v.g;
    g.vmulps(t[0], x[0], v.cst(wd));
    g.vaddps(t[0], x[1], t[0]);  // g' = g + λw
    g.vmulps(d[1], x[2], v.cst(a));
    g.vmulps(t[1], t[0], v.cst(1 - a));
    g.vmulps(t[1], t[1], t[0]);
    g.vaddps(d[1], d[1], t[1]);  // s = αs + (1 − α)g'²
    g.vmulps(t[0], x[3], t[0]);  // lr·g'
    g.vsqrtps(t[1], d[1]);
    g.vaddps(t[1], t[1], v.cst(eps));
    g.vdivps(t[0], t[0], t[1]);
    g.vsubps(d[0], x[0], t[0]);
  };
  return optim_kernel(r, cache, s);
}

}  // namespace

OpHooks op_hooks_SGD() { return {sgd_shape, sgd_ref, nullptr, nullptr, sgd_jit, optim_parts}; }
OpHooks op_hooks_ADAM() { return {adam_shape, adam_ref<false>, nullptr, nullptr, adam_jit<false>, optim_parts}; }
OpHooks op_hooks_ADAMW() { return {adam_shape, adam_ref<true>, nullptr, nullptr, adam_jit<true>, optim_parts}; }
OpHooks op_hooks_RMSPROP() { return {rmsprop_shape, rmsprop_ref, nullptr, nullptr, rmsprop_jit, optim_parts}; }

}  // namespace nnasm
