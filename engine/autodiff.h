// Reverse-mode autodiff over the instruction stream. Gradients are generated lazily, the first
// time they are asked for, as instructions appended to the program's backward: section — the
// same instruction set, printable, parsable and run by the same executor. Asking again returns
// what was generated. Not thread-safe (it edits the program).
#pragma once
#include <utility>
#include <vector>

#include "isa/program.h"
#include "isa/status.h"

namespace nnasm {

// d(Σ y)/dx for each x in `wrt` (any tensors of the program: params, inputs, intermediates). A
// gradient is a tensor named X.grad (X.grad.1, ... if taken), or NO_TENSOR's zero stand-in: a
// FILL of zeros when y does not depend on x. Only instructions on a path from some x to y get
// backward code; gradients of several uses of a tensor accumulate. Errors: y or an x not in the
// program, y not computed by the forward section, an op on the path without a backward rule
// (naming the instruction and its position), an x of a reduced-precision type (bf16, i8, u8).
Result<std::vector<TensorId>> grad(Program& p, TensorId y, const std::vector<TensorId>& wrt);

// The gradients of a scalar loss with respect to every param it depends on, as (param, gradient)
// pairs in declaration order. For a program whose listing already holds its backward section,
// the gradients are found by name (PARAM.grad) instead of being generated again.
Result<std::vector<std::pair<TensorId, TensorId>>> backward(Program& p, TensorId loss);

// OK for an f32 or i32 tensor; for a reduced-precision one the error training reports: only f32
// params are trained (train in f32, then quantize the inference model).
Status check_trainable_type(const TensorDesc& d);

}  // namespace nnasm
