// DROPOUT: zeroes elements at random while training, scaling the rest to keep the expectation.
//
// Computes   training (RunState::training): y = x·mask/(1 − rate), where element i is kept when
//            u_i ≥ ⌊rate·2³²⌋, u_i = the high 32 bits of mix(S + (i + 1)·G), S = mix(mix(mix(seed)
//            + key·G) + run_index·G), mix = splitmix64's output function and G its increment
//            (jit/rng.h). rate = 0: y = x.
//            inference: y = x.
// Inputs     x: f32, any shape.
// Outputs    y: like x.
// Immediates rate in [0, 1) (default 0.5); key (default 0): the instruction's random stream.
//            Give each dropout of a program its own key (the shell numbers them); two with one
//            key draw the same mask.
// Gradient   dx = DROPOUT(dy) with the same rate and key: dropout is linear in x, and the
//            backward instruction redraws the forward's mask because the mask depends on the
//            seed, the key and the run index only, and backward runs with the index of the
//            forward run before it (ops/op.h, RunState). Nothing is saved between sections.
// Kernels    f32_dropout__avx512, f32_dropout__avx2 (ops/random/dropout_jit.cpp): the
//            reference's mask and y bit for bit, splitmix64 on 64-bit counter lanes (vpmullq;
//            AVX2 builds each 64-bit product from three vpmuludq and still wins), the exact size
//            with a masked tail, split into parts like the elementwise ops (each part draws from
//            its own first element). Inference or rate 0: a copy, none when y is x's memory.
//            Timed by tests/bench/dropout_bench.cpp (docs/benchmarks.md). The reference: one
//            64-bit hash per element and a branch on it (at rate 0.5 mispredicted half the
//            time).
// Notes      Counter-based: element i's draw does not depend on the others', so the mask is
//            the same for any thread count or split. OPF_RANDOM and OPF_MODE: the passes never
//            merge two dropouts or fold one into a constant. NaN and ±inf in x stay where kept
//            and become 0 where dropped (0·inf is not formed).
#include "ops/random/dropout.h"

#include <cmath>

#include "jit/elementwise.h"

namespace nnasm {


DropoutMask dropout_mask(const Instruction& ins) {
  const double rate = static_cast<float>(ins.f(NNASM_IMM(DROPOUT, rate)));
  DropoutMask m;
  m.identity = rate == 0;
  m.threshold = static_cast<uint32_t>(std::floor(rate * 4294967296.0));
  m.scale = static_cast<float>(1.0 / (1.0 - rate));
  m.key = static_cast<uint64_t>(ins.i(NNASM_IMM(DROPOUT, key)));
  return m;
}

namespace {

Status dropout_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(require_f32(ins, in));
  const double rate = ins.f(NNASM_IMM(DROPOUT, rate));
  if (!(rate >= 0 && rate < 1)) return Status::errorf("DROPOUT: rate={} must be in [0, 1)", rate);
  (*out)[0] = in[0];
  return Status::ok();
}

void dropout_ref(const KernelArgs* a) {
  const float* x = static_cast<const float*>(a->in[0]);
  float* y = static_cast<float*>(a->out[0]);
  const int64_t n = a->in_type[0].shape.numel();
  const DropoutMask m = dropout_mask(*a->ins);
  if (!a->state || !a->state->training || m.identity) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i];
    return;
  }
  uint64_t c = dropout_stream(a->state->seed, m.key, a->state->run_index);
  for (int64_t i = 0; i < n; ++i) {
    c += Rng::GOLDEN;
    const uint32_t u = static_cast<uint32_t>(Rng::mix(c) >> 32);
    y[i] = u >= m.threshold ? x[i] * m.scale : 0.f;
  }
}

Status dropout_grad(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy, const std::vector<bool>& need,
                    std::vector<TensorId>* dx) {
  if (need[0]) (*dx)[0] = b.emit(Opcode::DROPOUT, {dy[0]}, {{"rate", ins.imm[NNASM_IMM(DROPOUT, rate)]}, {"key", ins.imm[NNASM_IMM(DROPOUT, key)]}});
  return b.status();
}

}  // namespace

OpHooks op_hooks_DROPOUT() { return {dropout_shape, dropout_ref, nullptr, dropout_grad, dropout_jit, unary_parts}; }

}  // namespace nnasm
