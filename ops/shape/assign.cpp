// ASSIGN: writes a value into a tensor that persists, in place — how a program leaves state for
// its next run (a recurrent layer stepped once per frame writes its new h and c back).
//
// Computes   dst = src: dst's bytes are overwritten; the one output is dst itself.
// Inputs     dst: f32 or i32, any shape, the tensor updated in place (a state tensor in practice;
//            the program refuses a const); src: dst's dtype and shape.
// Outputs    dst, updated in place (OPF_INPLACE).
// Immediates none.
// Gradient   none: a side effect for the next run. Within a run, the instructions before it read
//            dst's old value and none reads what it wrote, so no gradient flows through it.
// Kernels    reference only: a memmove of a few cache lines, which a generated loop would not
//            beat (the dispatch stream calls the reference directly).
// Notes      OPF_INPLACE keeps it where it is: dead-code elimination never removes it, CSE,
//            constant folding and derive hoisting skip it and every reader of dst (Uses marks dst
//            updated in place), and the memory planner never gives dst an arena slot. An instance
//            (Executor::instantiate) owns its copy of every tensor the forward section writes in
//            place, and Executor::reset_state sets them back to their initial values. src may be
//            dst itself (a no-op).
#include <cstring>

#include "ops/op.h"

namespace nnasm {
namespace {

Status assign_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  if (!(in[1] == in[0]))
    return Status::errorf("ASSIGN: src {} must have dst's type {}", operand_str(ins, 1, in[1]), in[0].str());
  (*out)[0] = in[0];
  return Status::ok();
}

void assign_ref(const KernelArgs* k) {
  std::memmove(k->out[0], k->in[1], static_cast<size_t>(k->in_type[0].shape.numel()) * dtype_size(k->in_type[0].dtype));
}

}  // namespace

OpHooks op_hooks_ASSIGN() { return {assign_shape, assign_ref, nullptr, nullptr}; }

}  // namespace nnasm
