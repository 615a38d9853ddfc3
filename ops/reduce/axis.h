// Splitting a shape around one axis (outer × len × inner), shared by the ops that work along an
// axis: softmax, reductions, concat, slice.
#pragma once
#include <cstdint>

#include "isa/instruction.h"
#include "isa/status.h"
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

// Calls f(line, o·inner + i) for every line along the axis (one per output of a reduction):
// `line` points at its first element, the later ones `inner` apart.
template <typename T, typename F>
void for_each_line(const AxisSplit& sp, const T* x, F&& f) {
  for (int64_t o = 0; o < sp.outer; ++o)
    for (int64_t i = 0; i < sp.inner; ++i) f(x + o * sp.len * sp.inner + i, o * sp.inner + i);
}

// `s` reduced along `axis`: the axis dropped, or kept as 1 with keepdims.
inline Shape reduced_shape(const Shape& s, int axis, bool keepdims) {
  Shape y;
  for (int i = 0; i < s.rank; ++i) {
    if (i == axis && !keepdims) continue;
    y.dims[y.rank++] = i == axis ? 1 : s[i];
  }
  return y;
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
