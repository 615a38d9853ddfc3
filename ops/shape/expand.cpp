// EXPAND: broadcast a tensor to a larger shape (numpy.broadcast_to, ONNX Expand).
//
// Computes   y = x repeated along the dimensions where x has 1 (or lacks them).
// Inputs     x: f32 or i32.
// Outputs    y: x's dtype, `shape`.
// Immediates shape: ints, required; x must broadcast to it exactly (trailing dimensions aligned,
//            each equal or 1 in x).
// Gradient   dy summed over the stretched dimensions.
// Kernels    reference: row copies through the broadcast walk. No JIT: copies only (a broadcast
//            operand of an elementwise op never needs EXPAND: the generator broadcasts in place).
#include "ops/elementwise/broadcast.h"
#include "ops/op.h"

namespace nnasm {
namespace {


Status expand_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  const std::vector<int64_t>& want = ins.ints(NNASM_IMM(EXPAND, shape));
  if (static_cast<int>(want.size()) > MAX_RANK || static_cast<int>(want.size()) < in[0].shape.rank)
    return Status::errorf("EXPAND: shape [{}] must have rank {}..{} for {}", fmt::join(want, ","), in[0].shape.rank,
                          MAX_RANK, operand_str(ins, 0, in[0]));
  Shape y = Shape::of(want.data(), static_cast<int>(want.size())), b;
  if (!broadcast_shapes(in[0].shape, y, &b) || b != y)
    return Status::errorf("EXPAND: {} does not broadcast to [{}]", operand_str(ins, 0, in[0]), fmt::join(want, ","));
  (*out)[0] = TensorType{in[0].dtype, y};
  return Status::ok();
}

void expand_ref(const KernelArgs* k) {
  const uint32_t* x = static_cast<const uint32_t*>(k->in[0]);
  uint32_t* y = static_cast<uint32_t*>(k->out[0]);
  const Shape& xs = k->in_type[0].shape;
  BroadcastWalk(k->out_type[0].shape, xs, xs)
      .for_each_row([&](int64_t o, int64_t ox, int64_t, int64_t n, int64_t sx, int64_t) {
        for (int64_t j = 0; j < n; ++j) y[o + j] = x[ox + j * sx];
      });
}

Status expand_grad(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy, const std::vector<bool>&,
                   std::vector<TensorId>* dx) {
  (*dx)[0] = b.sum_to(dy[0], b.type(ins.in[0]).shape);
  return b.status();
}

}  // namespace

OpHooks op_hooks_EXPAND() { return {expand_shape, expand_ref, nullptr, expand_grad}; }

}  // namespace nnasm
