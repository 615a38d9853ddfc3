// The backward of a fused activation epilogue (LINEAR's and CONV2D's act=): the instruction
// does not keep its pre-activation z, so dZ = dY·act'(z) is read off the output y where that is
// exact — relu and clipped_relu as ACT_BWD(dY, y) (y > 0 ⇔ z > 0, 0 < y < t ⇔ 0 < z < t),
// leakyrelu likewise for a slope ≥ 0, sigmoid dY·(y − y²), tanh dY·(1 − y²). The others (elu,
// gelu, gelu_tanh, swish, leakyrelu with a negative slope) are an error telling the user to
// write the activation as its own instruction.
#pragma once
#include "ops/grad.h"

namespace nnasm {

// dZ for `ins`, an op with a fused activation (isa/activation.h's fused_act).
Result<TensorId> act_grad_from_output(GradBuilder& b, const Instruction& ins, TensorId dy);

}  // namespace nnasm
