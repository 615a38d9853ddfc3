// RESHAPE and FLATTEN: the same elements under a new shape. FLATTEN is RESHAPE with the shape
// derived from an axis, so the two share their kernel and backward rule.
//
// RESHAPE
// Computes   y = x viewed as `shape` (row-major order unchanged).
// Inputs     x: f32 or i32, any shape.
// Outputs    y: x's dtype, `shape`; one entry may be −1 (inferred from the element count).
// Immediates shape: ints, required.
// Gradient   dy reshaped back to x's shape.
// Kernels    a copy (the memory planner of a later issue can make it free by aliasing).
//
// FLATTEN (ONNX Flatten)
// Computes   y = x viewed as [prod(dims[:axis]), prod(dims[axis:])] (row-major order unchanged;
//            an empty product is 1).
// Inputs     x: f32 or i32, any rank (rank 0 gives [1, 1]).
// Outputs    y: x's dtype, rank 2.
// Immediates axis: i64, default 1; −rank ≤ axis ≤ rank, negative counts from the end (axis =
//            rank gives [numel, 1], axis = 0 gives [1, numel]).
// Gradient   dy reshaped back to x's shape (RESHAPE), as RESHAPE's.
// Kernels    a copy; no JIT (a memcpy is already at memory bandwidth). Where x dies at the
//            instruction, the memory planner gives y x's bytes and the copy is skipped.
#include <cstring>

#include "ops/op.h"

namespace nnasm {
namespace {


Status reshape_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  const std::vector<int64_t>& want = ins.ints(NNASM_IMM(RESHAPE, shape));
  if (static_cast<int>(want.size()) > MAX_RANK)
    return Status::errorf("RESHAPE: shape has rank {}, at most {} allowed", want.size(), MAX_RANK);
  Shape y;
  y.rank = static_cast<int>(want.size());
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < y.rank; ++i) {
    if (want[i] == -1) {
      if (infer >= 0)
        return Status::errorf("RESHAPE: shape [{}] for {} has more than one -1", fmt::join(want, ","),
                              operand_str(ins, 0, in[0]));
      infer = i;
      continue;
    }
    if (want[i] <= 0) return Status::errorf("RESHAPE: dimension {} is {}, must be positive or -1", i, want[i]);
    // This dimension takes the product past the element count: a mismatch. Tested before
    // multiplying, so the product never overflows.
    if (want[i] > in[0].shape.numel() / known) {
      known = in[0].shape.numel() + 1;
      break;
    }
    y[i] = want[i];
    known *= want[i];
  }
  const int64_t n = in[0].shape.numel();
  if (infer >= 0 ? n % known != 0 : known != n)
    return Status::errorf("RESHAPE: {} has {} elements, which shape [{}] cannot hold", operand_str(ins, 0, in[0]), n,
                          fmt::join(want, ","));
  if (infer >= 0) y[infer] = n / known;
  (*out)[0] = TensorType{in[0].dtype, y};
  return Status::ok();
}


Status flatten_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  const Shape& x = in[0].shape;
  const int64_t a = ins.i(NNASM_IMM(FLATTEN, axis));
  if (a < -x.rank || a > x.rank)
    return Status::errorf("FLATTEN: axis {} is out of range for {} (allowed {}..{})", a, operand_str(ins, 0, in[0]),
                          -x.rank, x.rank);
  const int axis = static_cast<int>(a < 0 ? a + x.rank : a);
  int64_t rows = 1;
  for (int d = 0; d < axis; ++d) rows *= x[d];
  (*out)[0] = TensorType{in[0].dtype, Shape{rows, x.numel() / rows}};
  return Status::ok();
}

void copy_bytes(const KernelArgs* k) {
  // The memory planner may give the output the input's own bytes (engine/memory_plan.h): then
  // there is nothing to copy.
  if (k->out[0] != k->in[0]) std::memcpy(k->out[0], k->in[0], static_cast<size_t>(k->in_type[0].shape.numel()) * 4);
}

Status reshape_grad(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy, const std::vector<bool>&,
                    std::vector<TensorId>* dx) {
  (*dx)[0] = b.reshape(dy[0], b.type(ins.in[0]).shape);
  return b.status();
}

}  // namespace

OpHooks op_hooks_RESHAPE() { return {reshape_shape, copy_bytes, nullptr, reshape_grad}; }
OpHooks op_hooks_FLATTEN() { return {flatten_shape, copy_bytes, nullptr, reshape_grad}; }

}  // namespace nnasm
