// dZ of a fused activation, from the output (see the header).
#include "ops/linalg/act_grad.h"

#include "isa/activation.h"

namespace nnasm {

static_assert(ACTIVATION_COUNT == 10, "decide whether a new activation has a backward rule from its output here");
Result<TensorId> act_grad_from_output(GradBuilder& b, const Instruction& ins, TensorId dy) {
  const Activation f = fused_act(ins);
  const double a = fused_act_alpha(ins);
  const TensorId y = ins.out[0];
  switch (f) {
    case Activation::NONE: return dy;
    case Activation::LEAKYRELU:
      if (a < 0) break;
      [[fallthrough]];
    case Activation::RELU:
    case Activation::CLIPPED_RELU:
      return b.emit(Opcode::ACT_BWD, {dy, y}, {{"fn", imm_i(act_bwd_fn(f))}, {"alpha", imm_f(a)}});
    case Activation::SIGMOID: return b.emit(Opcode::MUL, {dy, b.emit(Opcode::SUB, {y, b.emit(Opcode::MUL, {y, y})})});
    case Activation::TANH: {
      const TensorId one = b.emit(Opcode::FILL, {y}, {{"value", imm_f(1)}});
      return b.emit(Opcode::MUL, {dy, b.emit(Opcode::SUB, {one, b.emit(Opcode::MUL, {y, y})})});
    }
    default: break;
  }
  return Status::errorf("{} with act={}{} has no backward rule: unfuse it", ins.info().mnemonic, activation_name(f),
                        f == Activation::LEAKYRELU ? " and a negative act_alpha" : "");
}

}  // namespace nnasm
