// COPY and FILL: the data ops.
//
// Computes   COPY  y = x.     FILL  y = value everywhere, shaped like x (x's data is not read).
// Inputs     x: f32 or i32, any shape.
// Outputs    y: x's dtype and shape.
// Immediates FILL: value: f32, default 0 (for i32 it must be a whole number in i32 range).
// Gradient   COPY passes dy through; FILL's output does not depend on x: zero.
// Kernels    memcpy / a fill loop; nothing to generate.
#include <cmath>
#include <cstring>

#include "ops/op.h"

namespace nnasm {
namespace {


Status same_shape(const Instruction&, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  (*out)[0] = in[0];
  return Status::ok();
}

Status fill_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  const double v = ins.f(NNASM_IMM(FILL, value));
  if (in[0].dtype == DType::I32 && !(std::trunc(v) == v && v >= -2147483648.0 && v <= 2147483647.0))
    return Status::errorf("FILL: value {} is not an i32 for {}", v, operand_str(ins, 0, in[0]));
  (*out)[0] = in[0];
  return Status::ok();
}

void copy_ref(const KernelArgs* k) {
  std::memcpy(k->out[0], k->in[0], static_cast<size_t>(k->in_type[0].shape.numel()) * 4);
}

void fill_ref(const KernelArgs* k) {
  const int64_t n = k->out_type[0].shape.numel();
  if (k->out_type[0].dtype == DType::I32) {
    int32_t* y = static_cast<int32_t*>(k->out[0]);
    const int32_t v = static_cast<int32_t>(k->ins->f(NNASM_IMM(FILL, value)));
    for (int64_t i = 0; i < n; ++i) y[i] = v;
  } else {
    float* y = static_cast<float*>(k->out[0]);
    const float v = static_cast<float>(k->ins->f(NNASM_IMM(FILL, value)));
    for (int64_t i = 0; i < n; ++i) y[i] = v;
  }
}

Status copy_grad(GradBuilder& b, const Instruction&, const std::vector<TensorId>& dy, const std::vector<bool>&,
                 std::vector<TensorId>* dx) {
  (*dx)[0] = dy[0];
  return b.status();
}

}  // namespace

OpHooks op_hooks_COPY() { return {same_shape, copy_ref, nullptr, copy_grad}; }
OpHooks op_hooks_FILL() { return {fill_shape, fill_ref, nullptr, no_gradient}; }

}  // namespace nnasm
