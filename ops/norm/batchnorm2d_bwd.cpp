// BATCHNORM2D_BWD: the gradient of BATCHNORM2D, all three of its inputs' in one op.
//
// Computes   per channel c, with M values per channel and x̂ the normalized input:
//            training: μ, σ² from x as the forward computes them, r = 1/√(σ² + eps),
//              x̂ = (x − μ)·r, dβ = Σ dy, dγ = Σ dy·x̂, dx = γ·r·(dy − dβ/M − x̂·dγ/M)
//              (the gradient through the batch statistics).
//            inference: r = 1/√(rσ² + eps), x̂ = (x − rμ)·r, dβ = Σ dy, dγ = Σ dy·x̂,
//              dx = γ·r·dy.
// Inputs     x: f32[N, C, ...]; γ, rμ, rσ²: f32[C]; dy: like x.
// Outputs    dx: like x; dγ, dβ: f32[C].
// Immediates eps, as the forward's.
// Gradient   none (second derivatives of batch normalization are not supported).
// Kernels    reference: per channel the statistics pass (shared with the forward,
//            ops/norm/batchnorm.h), one pass for Σ dy and Σ dy·x̂, one for dx. JIT
//            (ops/norm/batchnorm_jit.cpp, `f32_batchnorm2d_bwd__avx512`): the same passes, the
//            sums in double vectors, dx one elementwise kernel over the whole tensor; one part.
// Notes      One op rather than a dozen forward ops: the sums and dx need the same statistics,
//            which the forward does not save (its listing form keeps one output), so one kernel
//            recomputes them once. The mode comes from the run, as the forward's does.
#include "ops/norm/batchnorm.h"

namespace nnasm {
namespace {

Status batchnorm2d_bwd_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(bn_check(ins, in, {1, 2, 3}, {"gamma", "running_mean", "running_var"}));
  if (!(in[4] == in[0]))
    return Status::errorf("BATCHNORM2D_BWD: dy {} must match x {}", operand_str(ins, 4, in[4]), operand_str(ins, 0, in[0]));
  (*out)[0] = in[0];
  (*out)[1] = in[1];
  (*out)[2] = in[1];
  return Status::ok();
}

void batchnorm2d_bwd_ref(const KernelArgs* a) {
  const BnGeom g = bn_geom(a->in_type[0].shape);
  const float* x = bn_in(a, 0);
  const float* gamma = bn_in(a, 1);
  const float* rmean = bn_in(a, 2);
  const float* rvar = bn_in(a, 3);
  const float* dy = bn_in(a, 4);
  float* dx = static_cast<float*>(a->out[0]);
  float* dgamma = static_cast<float*>(a->out[1]);
  float* dbeta = static_cast<float*>(a->out[2]);
  const double eps = a->ins->f(0);
  const bool training = a->state && a->state->training;
  const double count = static_cast<double>(g.count());
  for (int64_t ch = 0; ch < g.c; ++ch) {
    double mean, var;
    bn_stats(x, g, ch, training, rmean, rvar, &mean, &var);
    const double r = bn_rstd(var, eps);
    double sdy = 0, sdyx = 0;
    for (int64_t i = 0; i < g.n; ++i) {
      const float *xp = x + g.at(i, ch), *dp = dy + g.at(i, ch);
      for (int64_t j = 0; j < g.plane; ++j) {
        sdy += dp[j];
        sdyx += dp[j] * (xp[j] - mean);
      }
    }
    sdyx *= r;  // Σ dy·x̂
    dbeta[ch] = static_cast<float>(sdy);
    dgamma[ch] = static_cast<float>(sdyx);
    const double k = gamma[ch] * r;
    // dx = k·dy + cx·(x − μ) + c0: cx = −k·r·Σdy·x̂/M, c0 = −k·Σdy/M; zero when not training.
    const float a_dy = static_cast<float>(k), fm = static_cast<float>(mean);
    const float cx = static_cast<float>(training ? -k * r * sdyx / count : 0);
    const float c0 = static_cast<float>(training ? -k * sdy / count : 0);
    for (int64_t i = 0; i < g.n; ++i) {
      const float *xp = x + g.at(i, ch), *dp = dy + g.at(i, ch);
      float* out = dx + g.at(i, ch);
      for (int64_t j = 0; j < g.plane; ++j) out[j] = a_dy * dp[j] + cx * (xp[j] - fm) + c0;
    }
  }
}

}  // namespace

OpHooks op_hooks_BATCHNORM2D_BWD() {
  OpHooks h{batchnorm2d_bwd_shape, batchnorm2d_bwd_ref, bn_jit_scratch};
  h.jit = [](const JitRequest& r, KernelCache& cache) { return bn_jit(r, cache, true); };
  return h;
}

}  // namespace nnasm
