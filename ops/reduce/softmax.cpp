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
//            JIT (jit/rowwise.h), AVX2/AVX-512: last axis `f32_softmax__<isa>_row` (pass 1
//            max, pass 2 e^(x − m) stored while summing, pass 3 ·1/Σ in place; LOGSOFTMAX: pass 2
//            sums only, pass 3 y = (x − m) − ln Σ); other axes `_col` (each lane one row, the same
//            passes down the axis). Error against the exact result: SOFTMAX relative ≤ 1.5 ulp (exp,
//            vmath::EXP_MAX_ULP) + 1.5 ulp (1/Σ and the product) + the error of Σ, which is at most
//            (⌈len/(4W)⌉ + log2(4W))·ulp for the row layout (4 accumulators, fixed trees) and
//            len·ulp for the col layout (index order, as the reference); LOGSOFTMAX absolute
//            ≤ ulp(x − m) + ulp(ln Σ)·(1 + LOG_MAX_ULP) + that relative error of Σ. Bitwise
//            deterministic per ISA.
// Notes      Subtracting the max keeps e^ finite for any finite input; a row containing +inf
//            gives NaN, as in PyTorch.
#include <cmath>

#include "jit/rowwise.h"
#include "ops/reduce/axis.h"

namespace nnasm {
namespace {

constexpr int AXIS = NNASM_IMM_SHARED(axis, Opcode::SOFTMAX, Opcode::LOGSOFTMAX);

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

template <bool LOG>
Result<KernelRef> softmax_jit(const JitRequest& r, KernelCache& cache) {
  const int axis = normalize_axis(r.ins.i(AXIS), r.in[0].shape.rank);
  if (axis < 0) return KernelRef();
  const AxisSplit sp = split_at(r.in[0].shape, axis);
  return rowwise_kernel(RowSpec{LOG ? RowOp::LOGSOFTMAX : RowOp::SOFTMAX, r.isa, sp.outer, sp.len, sp.inner}, cache);
}

}  // namespace

OpHooks op_hooks_SOFTMAX() {
  return {softmax_shape, softmax_ref<false>, nullptr, softmax_grad<false>, softmax_jit<false>};
}
OpHooks op_hooks_LOGSOFTMAX() {
  return {softmax_shape, softmax_ref<true>, nullptr, softmax_grad<true>, softmax_jit<true>};
}

}  // namespace nnasm
