// UPSAMPLE_NEAREST: nearest-neighbour upsampling of NCHW images by whole-number factors
// (PyTorch's nn.Upsample(mode="nearest") and ONNX Resize (nearest) with integer scales).
//
// Computes   y[n, c, h, w] = x[n, c, ⌊h / sh⌋, ⌊w / sw⌋]: each pixel becomes an sh × sw block.
// Inputs     x: f32 or i32 [N, C, H, W].
// Outputs    y: x's dtype [N, C, H·sh, W·sw].
// Immediates scale: ints [sh, sw], default [2, 2]; each ≥ 1.
// Gradient   dx[n, c, h, w] = Σ of dy over the block: dy RESHAPEd to [N, C, H, sh, W, sw], then
//            REDUCE_SUM over the sw axis and over the sh axis (a factor of 1 is left out of the
//            reshape and its sum skipped; scale [1, 1] passes dy through).
//            A fused *_BWD op would save the reshape's copy, which is not worth an opcode here.
// Kernels    reference: per input row, the first output row repeats each element sw times, the
//            other sh − 1 rows are memcpys of it. No JIT: the work is those copies, which a
//            generated kernel would not make faster.
// Notes      Moves 4-byte words, so NaN payloads and i32 values are copied exactly.
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ops/op.h"

namespace nnasm {
namespace {


Status upsample_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  const Shape& x = in[0].shape;
  if (x.rank != 4) return Status::errorf("UPSAMPLE_NEAREST: input {} must be NCHW (rank 4)", operand_str(ins, 0, in[0]));
  const std::vector<int64_t>& s = ins.ints(NNASM_IMM(UPSAMPLE_NEAREST, scale));
  if (s.size() != 2) return Status::errorf("UPSAMPLE_NEAREST: scale must have 2 entries [h, w], got [{}]", fmt::join(s, ","));
  if (s[0] < 1 || s[1] < 1 || s[0] > MAX_TENSOR_ELEMENTS || s[1] > MAX_TENSOR_ELEMENTS)
    return Status::errorf("UPSAMPLE_NEAREST: scale [{}] must be whole numbers from 1 to {}", fmt::join(s, ","),
                          MAX_TENSOR_ELEMENTS);
  // numel · sh · sw ≤ the limit, by divisions that cannot overflow.
  if (s[0] > MAX_TENSOR_ELEMENTS / x[0] / x[1] / x[2] / x[3] / s[1])
    return Status::errorf("UPSAMPLE_NEAREST: {} scaled by [{}] exceeds {} elements", operand_str(ins, 0, in[0]),
                          fmt::join(s, ","), MAX_TENSOR_ELEMENTS);
  (*out)[0] = TensorType{in[0].dtype, Shape{x[0], x[1], x[2] * s[0], x[3] * s[1]}};
  return Status::ok();
}

void upsample_ref(const KernelArgs* k) {
  const Shape& xs = k->in_type[0].shape;
  const int64_t sh = k->ins->ints(NNASM_IMM(UPSAMPLE_NEAREST, scale))[0], sw = k->ins->ints(NNASM_IMM(UPSAMPLE_NEAREST, scale))[1];
  const int64_t rows = xs[0] * xs[1] * xs[2], w = xs[3], yw = w * sw;
  const uint32_t* x = static_cast<const uint32_t*>(k->in[0]);
  uint32_t* y = static_cast<uint32_t*>(k->out[0]);
  for (int64_t r = 0; r < rows; ++r) {
    const uint32_t* xr = x + r * w;
    uint32_t* y0 = y + r * sh * yw;
    for (int64_t j = 0; j < w; ++j)
      for (int64_t t = 0; t < sw; ++t) y0[j * sw + t] = xr[j];
    for (int64_t i = 1; i < sh; ++i) std::memcpy(y0 + i * yw, y0, static_cast<size_t>(yw) * 4);
  }
}

Status upsample_grad(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy, const std::vector<bool>&,
                     std::vector<TensorId>* dx) {
  const Shape& xs = b.type(ins.in[0]).shape;
  const int64_t sh = ins.ints(NNASM_IMM(UPSAMPLE_NEAREST, scale))[0], sw = ins.ints(NNASM_IMM(UPSAMPLE_NEAREST, scale))[1];
  // dy as [N, C, H, sh, W, sw] without the factors that are 1, whose sums would be copies.
  Shape blocks{xs[0], xs[1], xs[2]};
  int h_axis = -1, w_axis = -1;
  if (sh > 1) blocks.dims[h_axis = blocks.rank++] = sh;
  blocks.dims[blocks.rank++] = xs[3];
  if (sw > 1) blocks.dims[w_axis = blocks.rank++] = sw;
  TensorId g = b.reshape(dy[0], blocks);
  if (w_axis >= 0) g = b.emit(Opcode::REDUCE_SUM, {g}, {{"axis", imm_i(w_axis)}});
  if (h_axis >= 0) g = b.emit(Opcode::REDUCE_SUM, {g}, {{"axis", imm_i(h_axis)}});
  (*dx)[0] = g;
  return b.status();
}

}  // namespace

OpHooks op_hooks_UPSAMPLE_NEAREST() { return {upsample_shape, upsample_ref, nullptr, upsample_grad}; }

}  // namespace nnasm
