// BATCHNORM2D: batch normalization over channels (axis 1), PyTorch's BatchNorm2d.
//
// Computes   training (RunState::training): per channel c, μ and σ² (biased) of x over the
//            batch and the plane (every axis but 1), y = γ·(x − μ)/√(σ² + eps) + β; then the
//            running statistics, as PyTorch: rμ ← (1 − m)·rμ + m·μ, rσ² ← (1 − m)·rσ² +
//            m·σ²·M/(M − 1), M = values per channel (M = 1: σ² itself, which is 0).
//            inference: y = γ·(x − rμ)/√(rσ² + eps) + β; nothing is updated.
// Inputs     x: f32[N, C, ...] (rank ≥ 2: [N, C] and [N, C, L] work too); γ, β, rμ, rσ²: f32[C].
// Outputs    y: like x.
// Immediates eps (default 1e-5, ≥ 0), momentum m (default 0.1, in [0, 1]).
// Gradient   BATCHNORM2D_BWD(x, γ, rμ, rσ², dy) -> dx, dγ, dβ, in the mode of the run: training
//            differentiates through the batch statistics (recomputed from x, so the listing keeps
//            one output and nothing extra is saved), inference is the per-channel affine map.
//            No gradient with respect to rμ, rσ² (state, not trained).
// Kernels    reference: per channel two passes for the statistics (double sums) and one for
//            y = (x − μ)·s + β with s = γ·r per channel. JIT (ops/norm/batchnorm_jit.cpp,
//            `f32_batchnorm2d__avx512`): the same passes, the sums in double vectors, the map one
//            elementwise kernel over the whole tensor; one part.
// Notes      In-place update of the running statistics: the listing form has one output
//            (`BATCHNORM2D %x, @g, @b, @rm, @rv -> %y eps=1e-05 momentum=0.1`), so rμ and rσ²
//            are inputs the op writes when training, not outputs. The opcode says so with
//            OPF_UPDATES_STATE and its hooks' state_inputs (inputs 4 and 5). Inference only reads
//            them, so any tensor will do (a const, an initializer an exporter shared with β).
//            Training requires them to be writable (Program::check_state_writable: declared up
//            front, state, param or input, never a constant or a temporary, distinct from the
//            other operands and from any other instruction's statistics); a program that trains
//            (mode training, an update section) fails finish(), and Executor::set_training(true)
//            is refused, with a message naming the fix, so a read-only statistic is never
//            written. The passes treat them as updated in place and
//            never merge, fold or remove the instruction (OPF_MODE: its result depends on the
//            mode, which Executor::set_training changes between runs).
#include <fmt/format.h>

#include "ops/norm/batchnorm.h"

namespace nnasm {

constexpr int BN_EPS = NNASM_IMM_SHARED(eps, Opcode::BATCHNORM2D, Opcode::BATCHNORM2D_BWD);

Status bn_check(const Instruction& ins, const std::vector<TensorType>& in, const std::vector<int>& per_channel,
                const std::vector<const char*>& what) {
  NNASM_TRY(require_f32(ins, in));
  const char* mn = ins.info().mnemonic;
  if (in[0].shape.rank < 2)
    return Status::errorf("{}: x {} must have rank ≥ 2, channels on axis 1", mn, operand_str(ins, 0, in[0]));
  const int64_t c = in[0].shape[1];
  for (size_t k = 0; k < per_channel.size(); ++k) {
    const TensorType& t = in[static_cast<size_t>(per_channel[k])];
    if (t.shape.rank != 1 || t.shape[0] != c)
      return Status::errorf("{}: {} {} must be f32[{}], one per channel of x {}", mn, what[k],
                            operand_str(ins, per_channel[k], t), c, in[0].str());
  }
  const double eps = ins.f(BN_EPS);
  if (!(eps >= 0) || !std::isfinite(eps)) return Status::errorf("{}: eps={} must be finite and ≥ 0", mn, eps);
  return Status::ok();
}

namespace {


Status batchnorm2d_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(bn_check(ins, in, {1, 2, 3, 4}, {"gamma", "beta", "running_mean", "running_var"}));
  const double m = ins.f(NNASM_IMM(BATCHNORM2D, momentum));
  if (!(m >= 0 && m <= 1)) return Status::errorf("BATCHNORM2D: momentum={} must be in [0, 1]", m);
  (*out)[0] = in[0];
  return Status::ok();
}

void batchnorm2d_ref(const KernelArgs* a) {
  const BnGeom g = bn_geom(a->in_type[0].shape);
  const float* x = bn_in(a, 0);
  const float* gamma = bn_in(a, 1);
  const float* beta = bn_in(a, 2);
  // The running statistics are inputs this op updates when training (see Notes).
  float* rmean = const_cast<float*>(bn_in(a, 3));
  float* rvar = const_cast<float*>(bn_in(a, 4));
  float* y = static_cast<float*>(a->out[0]);
  const double eps = a->ins->f(BN_EPS), mom = a->ins->f(NNASM_IMM(BATCHNORM2D, momentum));
  const bool training = a->state && a->state->training;
  const int64_t count = g.count();
  for (int64_t ch = 0; ch < g.c; ++ch) {
    double mean, var;
    bn_stats(x, g, ch, training, rmean, rvar, &mean, &var);
    const double s = gamma[ch] * bn_rstd(var, eps);
    const float fs = static_cast<float>(s), fm = static_cast<float>(mean), fb = beta[ch];
    for (int64_t i = 0; i < g.n; ++i) {
      const float* xp = x + g.at(i, ch);
      float* yp = y + g.at(i, ch);
      for (int64_t j = 0; j < g.plane; ++j) yp[j] = (xp[j] - fm) * fs + fb;
    }
    if (training) {
      const double unbiased = count > 1 ? var * static_cast<double>(count) / static_cast<double>(count - 1) : var;
      rmean[ch] = static_cast<float>((1 - mom) * rmean[ch] + mom * mean);
      rvar[ch] = static_cast<float>((1 - mom) * rvar[ch] + mom * unbiased);
    }
  }
}

Status batchnorm2d_grad(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy,
                        const std::vector<bool>& need, std::vector<TensorId>* dx) {
  if (need[3] || need[4])
    return Status::error("BATCHNORM2D: no gradient with respect to the running statistics (state, not trained)");
  const std::vector<TensorId> g = b.emit_all(Opcode::BATCHNORM2D_BWD, {ins.in[0], ins.in[1], ins.in[3], ins.in[4], dy[0]},
                                             {{"eps", ins.imm[BN_EPS]}});
  if (g.size() == 3)
    for (int k = 0; k < 3; ++k)
      if (need[static_cast<size_t>(k)]) (*dx)[static_cast<size_t>(k)] = g[static_cast<size_t>(k)];
  return b.status();
}

}  // namespace

OpHooks op_hooks_BATCHNORM2D() {
  OpHooks h{batchnorm2d_shape, batchnorm2d_ref, bn_jit_scratch, batchnorm2d_grad};
  h.jit = [](const JitRequest& r, KernelCache& cache) { return bn_jit(r, cache, false); };
  h.state_inputs = 1u << 3 | 1u << 4;
  return h;
}

}  // namespace nnasm
