// CONCAT and SLICE: joining and cutting along one axis.
//
// Computes   CONCAT  y = the inputs joined along `axis`, in operand order.
//            SLICE   y = x[..., start:end, ...] along `axis`.
// Inputs     CONCAT: one or more tensors of one dtype (f32 or i32) and rank, equal in every
//            dimension but `axis`. SLICE: x, f32 or i32.
// Outputs    y: the inputs' dtype.
// Immediates CONCAT: axis: i64, default 0. SLICE: axis, start, end: i64, required. start and end
//            follow Python: negative counts from the end, out-of-range values clamp; the slice
//            must not be empty.
// Gradient   CONCAT: a SLICE of dy per input. SLICE: dy PADded with zeros back to x's shape.
// Kernels    row copies (memcpy per outer index). No JIT: the work is the copies, which run at
//            memory bandwidth already; a generated kernel would only save the memcpy calls.
#include <algorithm>
#include <cstring>

#include "ops/reduce/axis.h"

namespace nnasm {
namespace {


Status concat_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  int axis;
  NNASM_TRY(axis_of(ins, NNASM_IMM(CONCAT, axis), in[0], &axis));
  Shape y = in[0].shape;
  for (size_t k = 1; k < in.size(); ++k) {
    const int kk = static_cast<int>(k);
    if (in[k].dtype != in[0].dtype || in[k].shape.rank != y.rank)
      return Status::errorf("CONCAT: {} does not match {} in dtype and rank", operand_str(ins, kk, in[k]),
                            operand_str(ins, 0, in[0]));
    for (int d = 0; d < y.rank; ++d)
      if (d != axis && in[k].shape[d] != y[d])
        return Status::errorf("CONCAT: {} differs from {} in dimension {} (only axis {} may differ)",
                              operand_str(ins, kk, in[k]), operand_str(ins, 0, in[0]), d, axis);
    y[axis] += in[k].shape[axis];
  }
  (*out)[0] = TensorType{in[0].dtype, y};
  return Status::ok();
}

void concat_ref(const KernelArgs* k) {
  const Shape& ys = k->out_type[0].shape;
  const int axis = normalize_axis(k->ins->i(NNASM_IMM(CONCAT, axis)), ys.rank);
  const AxisSplit out = split_at(ys, axis);
  char* y = static_cast<char*>(k->out[0]);
  int64_t offset = 0;  // elements into an output row
  for (int i = 0; i < k->n_in; ++i) {
    const AxisSplit s = split_at(k->in_type[i].shape, axis);
    const int64_t row = s.len * s.inner;
    const char* x = static_cast<const char*>(k->in[i]);
    for (int64_t o = 0; o < s.outer; ++o)
      std::memcpy(y + (o * out.len * out.inner + offset) * 4, x + o * row * 4, static_cast<size_t>(row) * 4);
    offset += row;
  }
}

// Python-style bounds of a slice of a dimension of length n.
void slice_bounds(int64_t start, int64_t end, int64_t n, int64_t* lo, int64_t* hi) {
  if (start < 0) start += n;
  if (end < 0) end += n;
  *lo = std::clamp<int64_t>(start, 0, n);
  *hi = std::clamp<int64_t>(end, 0, n);
}

Status slice_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  int axis;
  NNASM_TRY(axis_of(ins, NNASM_IMM(SLICE, axis), in[0], &axis));
  int64_t lo, hi;
  slice_bounds(ins.i(NNASM_IMM(SLICE, start)), ins.i(NNASM_IMM(SLICE, end)), in[0].shape[axis], &lo, &hi);
  if (hi <= lo)
    return Status::errorf("SLICE: [{}:{}] along axis {} of {} is empty", ins.i(NNASM_IMM(SLICE, start)), ins.i(NNASM_IMM(SLICE, end)), axis,
                          operand_str(ins, 0, in[0]));
  Shape y = in[0].shape;
  y[axis] = hi - lo;
  (*out)[0] = TensorType{in[0].dtype, y};
  return Status::ok();
}

void slice_ref(const KernelArgs* k) {
  const Shape& xs = k->in_type[0].shape;
  const int axis = normalize_axis(k->ins->i(NNASM_IMM(SLICE, axis)), xs.rank);
  const AxisSplit s = split_at(xs, axis);
  int64_t lo, hi;
  slice_bounds(k->ins->i(NNASM_IMM(SLICE, start)), k->ins->i(NNASM_IMM(SLICE, end)), s.len, &lo, &hi);
  const int64_t row = (hi - lo) * s.inner;
  const char* x = static_cast<const char*>(k->in[0]);
  char* y = static_cast<char*>(k->out[0]);
  for (int64_t o = 0; o < s.outer; ++o)
    std::memcpy(y + o * row * 4, x + (o * s.len + lo) * s.inner * 4, static_cast<size_t>(row) * 4);
}

Status concat_grad(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy,
                   const std::vector<bool>& need, std::vector<TensorId>* dx) {
  const int axis = normalize_axis(ins.i(NNASM_IMM(CONCAT, axis)), b.type(ins.in[0]).shape.rank);
  int64_t offset = 0;
  for (size_t k = 0; k < ins.in.size(); ++k) {
    const int64_t len = b.type(ins.in[k]).shape[axis];
    if (need[k])
      (*dx)[k] = b.emit(Opcode::SLICE, {dy[0]},
                        {{"axis", imm_i(axis)}, {"start", imm_i(offset)}, {"end", imm_i(offset + len)}});
    offset += len;
  }
  return b.status();
}

Status slice_grad(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy, const std::vector<bool>&,
                  std::vector<TensorId>* dx) {
  const Shape& xs = b.type(ins.in[0]).shape;
  const int axis = normalize_axis(ins.i(NNASM_IMM(SLICE, axis)), xs.rank);
  int64_t lo, hi;
  slice_bounds(ins.i(NNASM_IMM(SLICE, start)), ins.i(NNASM_IMM(SLICE, end)), xs[axis], &lo, &hi);
  std::vector<int64_t> pads(2 * static_cast<size_t>(xs.rank), 0);
  pads[static_cast<size_t>(axis)] = lo;
  pads[static_cast<size_t>(xs.rank + axis)] = xs[axis] - hi;
  (*dx)[0] = b.emit(Opcode::PAD, {dy[0]}, {{"pads", imm_ints(pads)}});
  return b.status();
}

}  // namespace

OpHooks op_hooks_CONCAT() { return {concat_shape, concat_ref, nullptr, concat_grad}; }
OpHooks op_hooks_SLICE() { return {slice_shape, slice_ref, nullptr, slice_grad}; }

}  // namespace nnasm
