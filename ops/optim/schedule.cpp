// ADVANCE and LR_SCHEDULE: an optimizer's step counter and its learning rate, as instructions at
// the top of the update: section, so a listing shows the whole schedule.
//
// Computes   ADVANCE      t = t + 1.
//            LR_SCHEDULE  lr = base·t/warmup while t ≤ warmup (if warmup > 0), then by kind:
//                           constant  base
//                           step      base·gamma^⌊(t − warmup − 1)/step_size⌋
//                           cosine    min + (base − min)·(1 + cos(π·p))/2,
//                                     p = min(1, (t − warmup)/(total − warmup))
// Inputs     t: f32[] (a state tensor; f32 counts exactly to 2^24 steps).
// Outputs    ADVANCE: t, updated in place. LR_SCHEDULE: lr: f32[].
// Immediates LR_SCHEDULE: kind (constant|step|cosine), base (required), warmup (0), step_size
//            (1), gamma (0.1), total (1), min (0).
// Gradient   none: update instructions are never differentiated.
// Kernels    scalar arithmetic; nothing to generate.
#include <algorithm>
#include <cmath>

#include "ops/optim/optim_common.h"

namespace nnasm {
namespace {


Status advance_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(check_operands(ins, in, {}, {0}));
  return inplace_outputs(ins, in, out, {0});
}

void advance_ref(const KernelArgs* k) { *static_cast<float*>(k->out[0]) = *static_cast<const float*>(k->in[0]) + 1; }

Status schedule_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(check_operands(ins, in, {}, {0}));
  if (ins.i(NNASM_IMM(LR_SCHEDULE, step_size)) < 1 || ins.i(NNASM_IMM(LR_SCHEDULE, total)) < 1 ||
      ins.i(NNASM_IMM(LR_SCHEDULE, warmup)) < 0)
    return Status::error("LR_SCHEDULE: step_size and total must be ≥ 1 and warmup ≥ 0");
  (*out)[0] = in[0];
  return Status::ok();
}

void schedule_ref(const KernelArgs* k) {
  const Instruction& ins = *k->ins;
  const double t = *static_cast<const float*>(k->in[0]), base = ins.f(NNASM_IMM(LR_SCHEDULE, base));
  const double warmup = static_cast<double>(ins.i(NNASM_IMM(LR_SCHEDULE, warmup)));
  double lr;
  if (warmup > 0 && t <= warmup) {  // no warm-up steps: no warm-up phase (and no 0/0 at t = 0)
    lr = base * t / warmup;
  } else {
    const int64_t kind = ins.i(NNASM_IMM(LR_SCHEDULE, kind));
    if (kind == NNASM_CHOICE(LR_SCHEDULE, kind, step)) {
      lr = base * std::pow(ins.f(NNASM_IMM(LR_SCHEDULE, gamma)),
                           std::floor((t - warmup - 1) / static_cast<double>(ins.i(NNASM_IMM(LR_SCHEDULE, step_size)))));
    } else if (kind == NNASM_CHOICE(LR_SCHEDULE, kind, cosine)) {
      const double span = std::max(1.0, static_cast<double>(ins.i(NNASM_IMM(LR_SCHEDULE, total))) - warmup);
      const double p = std::min(1.0, (t - warmup) / span);
      const double lo = ins.f(NNASM_IMM(LR_SCHEDULE, min));
      lr = lo + (base - lo) * 0.5 * (1 + std::cos(3.141592653589793 * p));
    } else {  // constant
      lr = base;
    }
  }
  *static_cast<float*>(k->out[0]) = static_cast<float>(lr);
}

}  // namespace

OpHooks op_hooks_ADVANCE() { return {advance_shape, advance_ref}; }
OpHooks op_hooks_LR_SCHEDULE() { return {schedule_shape, schedule_ref}; }

}  // namespace nnasm
