// Splitting a shape around one axis (outer × len × inner), shared by the ops that work along an
// axis: softmax, reductions, concat, slice.
#pragma once
#include <cstdint>

#include "engine/status.h"
#include "isa/instruction.h"
#include "ops/op.h"

namespace nnasm {

struct AxisSplit {
  int64_t outer = 1, len = 1, inner = 1;
};

inline AxisSplit split_at(const Shape& s, int axis) {
  AxisSplit r;
  for (int i = 0; i < axis; ++i) r.outer *= s[i];
  r.len = s[axis];
  r.inner = s.stride(axis);
  return r;
}

// The split of a kernel's first input around the axis held in immediate `imm_k` (already
// verified by shape inference).
inline AxisSplit split_at(const KernelArgs* k, int imm_k) {
  const Shape& s = k->in_type[0].shape;
  return split_at(s, normalize_axis(k->ins->i(imm_k), s.rank));
}

// Normalizes immediate `imm_k` as an axis of `t`; error names the op and operand.
inline Status axis_of(const Instruction& ins, int imm_k, const TensorType& t, int* axis) {
  const int64_t a = ins.i(imm_k);
  *axis = normalize_axis(a, t.shape.rank);
  if (*axis < 0)
    return Status::errorf("{}: axis {} is out of range for {}", ins.info().mnemonic, a, operand_str(ins, 0, t));
  return Status::ok();
}

}  // namespace nnasm
