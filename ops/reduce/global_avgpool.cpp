// GLOBAL_AVGPOOL: the mean of each channel of each NCHW image (ONNX GlobalAveragePool).
//
// Computes   y[n, c, 0, 0] = (1 / (H·W)) · Σ_{h, w} x[n, c, h, w].
// Inputs     x: f32 [N, C, H, W].
// Outputs    y: f32 [N, C, 1, 1].
// Immediates none.
// Gradient   dx = dy · 1/(H·W) EXPANDed back to [N, C, H, W] (SCALE, EXPAND).
// Kernels    reference: one pass per channel, f32 accumulation in index order, then ÷ H·W.
//            JIT: REDUCE_MEAN's row kernel (jit/rowwise.h) over N·C rows of H·W floats,
//            `f32_reduce_mean__<isa>_row`, with that kernel's error bound.
// Notes      NaN and ±inf propagate through the sum.
#include "jit/rowwise.h"
#include "ops/op.h"

namespace nnasm {
namespace {

Status global_avgpool_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(require_f32(ins, in));
  const Shape& x = in[0].shape;
  if (x.rank != 4) return Status::errorf("GLOBAL_AVGPOOL: input {} must be NCHW (rank 4)", operand_str(ins, 0, in[0]));
  (*out)[0] = TensorType{DType::F32, Shape{x[0], x[1], 1, 1}};
  return Status::ok();
}

void global_avgpool_ref(const KernelArgs* k) {
  const Shape& xs = k->in_type[0].shape;
  const int64_t channels = xs[0] * xs[1], len = xs[2] * xs[3];
  const float* x = static_cast<const float*>(k->in[0]);
  float* y = static_cast<float*>(k->out[0]);
  for (int64_t c = 0; c < channels; ++c) {
    float acc = 0.f;
    for (int64_t j = 0; j < len; ++j) acc += x[c * len + j];
    y[c] = acc / static_cast<float>(len);
  }
}

Status global_avgpool_grad(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy,
                           const std::vector<bool>&, std::vector<TensorId>* dx) {
  const Shape& xs = b.type(ins.in[0]).shape;
  (*dx)[0] = b.expand(b.scale(dy[0], 1.0 / static_cast<double>(xs[2] * xs[3])), xs);
  return b.status();
}

Result<KernelRef> global_avgpool_jit(const JitRequest& r, KernelCache& cache) {
  const Shape& xs = r.in[0].shape;
  return rowwise_kernel(RowSpec{RowOp::MEAN, r.isa, xs[0] * xs[1], xs[2] * xs[3], 1}, cache);
}

}  // namespace

OpHooks op_hooks_GLOBAL_AVGPOOL() {
  return {global_avgpool_shape, global_avgpool_ref, nullptr, global_avgpool_grad, global_avgpool_jit};
}

}  // namespace nnasm
