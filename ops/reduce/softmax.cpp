// SOFTMAX and LOGSOFTMAX along one axis.
//
// Computes   SOFTMAX     y = e^(x − m) / Σ e^(x − m)
//            LOGSOFTMAX  y = x − m − ln Σ e^(x − m),  m = max of x along the axis.
// Inputs     x: f32, rank ≥ 1.
// Outputs    y: f32, x's shape.
// Immediates axis: i64, default −1 (negative counts from the end).
// Gradient   SOFTMAX: y·(dy − Σ dy·y); LOGSOFTMAX: dy − e^y·Σ dy (sums along the axis, kept as
//            dimensions of 1 so they broadcast back).
// Kernels    reference: three passes per row (max, sum of exponentials, normalize).
// Notes      Subtracting the max keeps e^ finite for any finite input; a row containing +inf
//            gives NaN, as in PyTorch.
#include <cmath>

#include "ops/reduce/axis.h"

namespace nnasm {
namespace {

enum { AXIS };

Status softmax_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(require_f32(ins, in));
  int axis;
  NNASM_TRY(axis_of(ins, AXIS, in[0], &axis));
  (*out)[0] = in[0];
  return Status::ok();
}

template <bool LOG>
void softmax_ref(const KernelArgs* k) {
  const AxisSplit sp = split_at(k, AXIS);
  const float* x = static_cast<const float*>(k->in[0]);
  float* y = static_cast<float*>(k->out[0]);
  for (int64_t o = 0; o < sp.outer; ++o)
    for (int64_t i = 0; i < sp.inner; ++i) {
      const int64_t base = o * sp.len * sp.inner + i;
      float m = -INFINITY;
      for (int64_t j = 0; j < sp.len; ++j) m = std::fmax(m, x[base + j * sp.inner]);
      float sum = 0;
      for (int64_t j = 0; j < sp.len; ++j) sum += std::exp(x[base + j * sp.inner] - m);
      if (LOG) {
        // (x − m) − ln Σ, in that order: folding m into ln Σ first would round it at m's scale.
        const float ls = std::log(sum);
        for (int64_t j = 0; j < sp.len; ++j) y[base + j * sp.inner] = (x[base + j * sp.inner] - m) - ls;
      } else {
        const float inv = 1.f / sum;
        for (int64_t j = 0; j < sp.len; ++j) y[base + j * sp.inner] = std::exp(x[base + j * sp.inner] - m) * inv;
      }
    }
}

template <bool LOG>
Status softmax_grad(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy, const std::vector<bool>&,
                    std::vector<TensorId>* dx) {
  const TensorId y = ins.out[0];
  auto sum = [&](TensorId t) {
    return b.emit(Opcode::REDUCE_SUM, {t}, {{"axis", imm_i(ins.i(AXIS))}, {"keepdims", imm_i(1)}});
  };
  if (LOG)
    (*dx)[0] = b.emit(Opcode::SUB, {dy[0], b.emit(Opcode::MUL, {b.emit(Opcode::EXP, {y}), sum(dy[0])})});
  else
    (*dx)[0] = b.emit(Opcode::MUL, {y, b.emit(Opcode::SUB, {dy[0], sum(b.emit(Opcode::MUL, {dy[0], y}))})});
  return b.status();
}

}  // namespace

OpHooks op_hooks_SOFTMAX() { return {softmax_shape, softmax_ref<false>, nullptr, softmax_grad<false>}; }
OpHooks op_hooks_LOGSOFTMAX() { return {softmax_shape, softmax_ref<true>, nullptr, softmax_grad<true>}; }

}  // namespace nnasm
