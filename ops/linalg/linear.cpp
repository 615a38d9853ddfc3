// LINEAR: a dense layer.
//
// Computes   y = x·W + b.
// Inputs     x: f32[..., in] (rank ≥ 1); W: f32[in, out] (stored input-major, as the listing and
//            the shell's linear() create it); b: f32[out].
// Outputs    y: f32[..., out].
// Gradient   added with autodiff (training issue).
// Kernels    reference: row-by-row i-p-j loop; JIT GEMM with a bias epilogue in the JIT issue.
#include "ops/op.h"

namespace nnasm {
namespace {

Status linear_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(require_f32(ins, in));
  const Shape &x = in[0].shape, &w = in[1].shape, &b = in[2].shape;
  if (x.rank < 1) return Status::errorf("LINEAR: {} must have rank 1 or more", operand_str(ins, 0, in[0]));
  if (w.rank != 2) return Status::errorf("LINEAR: weight {} must have rank 2 [in, out]", operand_str(ins, 1, in[1]));
  if (w[0] != x[x.rank - 1])
    return Status::errorf("LINEAR: {} has {} features but weight {} expects {}", operand_str(ins, 0, in[0]),
                          x[x.rank - 1], operand_str(ins, 1, in[1]), w[0]);
  if (b.rank != 1 || b[0] != w[1])
    return Status::errorf("LINEAR: bias {} must be [{}] to match weight {}", operand_str(ins, 2, in[2]), w[1],
                          operand_str(ins, 1, in[1]));
  Shape y = x;
  y[y.rank - 1] = w[1];
  (*out)[0] = TensorType{DType::F32, y};
  return Status::ok();
}

void linear_ref(const KernelArgs* k) {
  const Shape& ws = k->in_type[1].shape;
  const int64_t nin = ws[0], nout = ws[1], rows = k->in_type[0].shape.numel() / nin;
  const float* x = static_cast<const float*>(k->in[0]);
  const float* w = static_cast<const float*>(k->in[1]);
  const float* b = static_cast<const float*>(k->in[2]);
  float* y = static_cast<float*>(k->out[0]);
  for (int64_t r = 0; r < rows; ++r) {
    float* yr = y + r * nout;
    for (int64_t j = 0; j < nout; ++j) yr[j] = b[j];
    for (int64_t p = 0; p < nin; ++p) {
      const float xv = x[r * nin + p];
      const float* wr = w + p * nout;
      for (int64_t j = 0; j < nout; ++j) yr[j] += xv * wr[j];
    }
  }
}

}  // namespace

OpHooks op_hooks_LINEAR() { return {linear_shape, linear_ref}; }

}  // namespace nnasm
