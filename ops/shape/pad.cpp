// PAD: surround a tensor with a constant (ONNX Pad, constant mode).
//
// Computes   y = x placed at offset `before` inside a tensor filled with `value`.
// Inputs     x: f32 or i32.
// Outputs    y: x's dtype; y.shape[d] = before[d] + x.shape[d] + after[d].
// Immediates pads: ints [before_0, ..., before_{r−1}, after_0, ..., after_{r−1}] (ONNX order),
//            each ≥ 0; value: f32, default 0 (for i32 a whole number in i32 range).
// Gradient   dy sliced back to x's region (one SLICE per padded axis).
// Kernels    reference: fill, then one row copy per row of x. No JIT: a fill and memcpys, at
//            memory bandwidth already.
#include <array>
#include <cmath>
#include <cstring>

#include "ops/op.h"

namespace nnasm {
namespace {


Status pad_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  const std::vector<int64_t>& pads = ins.ints(NNASM_IMM(PAD, pads));
  const Shape& x = in[0].shape;
  if (static_cast<int>(pads.size()) != 2 * x.rank)
    return Status::errorf("PAD: pads [{}] needs {} entries for {}", fmt::join(pads, ","), 2 * x.rank,
                          operand_str(ins, 0, in[0]));
  Shape y = x;
  for (int d = 0; d < x.rank; ++d) {
    const int64_t lo = pads[d], hi = pads[x.rank + d];
    if (lo < 0 || hi < 0 || lo > MAX_TENSOR_ELEMENTS || hi > MAX_TENSOR_ELEMENTS)
      return Status::errorf("PAD: pads [{}] must be between 0 and {}", fmt::join(pads, ","), MAX_TENSOR_ELEMENTS);
    y[d] = x[d] + lo + hi;
  }
  const double v = ins.f(NNASM_IMM(PAD, value));
  if (in[0].dtype == DType::I32 && !(std::trunc(v) == v && v >= -2147483648.0 && v <= 2147483647.0))
    return Status::errorf("PAD: value {} is not an i32 for {}", v, operand_str(ins, 0, in[0]));
  (*out)[0] = TensorType{in[0].dtype, y};
  return Status::ok();
}

void pad_ref(const KernelArgs* k) {
  const Shape &xs = k->in_type[0].shape, &ys = k->out_type[0].shape;
  const std::vector<int64_t>& pads = k->ins->ints(NNASM_IMM(PAD, pads));
  uint32_t* y = static_cast<uint32_t*>(k->out[0]);
  const uint32_t* x = static_cast<const uint32_t*>(k->in[0]);
  uint32_t fill;
  if (k->out_type[0].dtype == DType::I32) {
    const int32_t v = static_cast<int32_t>(k->ins->f(NNASM_IMM(PAD, value)));
    std::memcpy(&fill, &v, 4);
  } else {
    const float v = static_cast<float>(k->ins->f(NNASM_IMM(PAD, value)));
    std::memcpy(&fill, &v, 4);
  }
  const int64_t n = ys.numel();
  for (int64_t i = 0; i < n; ++i) y[i] = fill;
  const int r = xs.rank;
  if (r == 0) {
    y[0] = x[0];
    return;
  }
  // Offset in y of x's first element, then walk x row by row.
  int64_t base = 0;
  for (int d = 0; d < r; ++d) base += pads[d] * ys.stride(d);
  const int64_t row = xs[r - 1], rows = xs.numel() / row;
  std::array<int64_t, MAX_RANK> idx{};
  for (int64_t q = 0; q < rows; ++q) {
    int64_t off = base;
    for (int d = 0; d < r - 1; ++d) off += idx[d] * ys.stride(d);
    std::memcpy(y + off, x + q * row, static_cast<size_t>(row) * 4);
    for (int d = r - 2; d >= 0; --d) {
      if (++idx[d] < xs[d]) break;
      idx[d] = 0;
    }
  }
}

Status pad_grad(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy, const std::vector<bool>&,
                std::vector<TensorId>* dx) {
  const std::vector<int64_t>& pads = ins.ints(NNASM_IMM(PAD, pads));
  const Shape& xs = b.type(ins.in[0]).shape;
  TensorId g = dy[0];
  for (int d = 0; d < xs.rank; ++d)
    if (pads[d] || pads[xs.rank + d])
      g = b.emit(Opcode::SLICE, {g}, {{"axis", imm_i(d)}, {"start", imm_i(pads[d])}, {"end", imm_i(pads[d] + xs[d])}});
  (*dx)[0] = g;
  return b.status();
}

}  // namespace

OpHooks op_hooks_PAD() { return {pad_shape, pad_ref, nullptr, pad_grad}; }

}  // namespace nnasm
