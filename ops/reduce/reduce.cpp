// REDUCE_SUM, REDUCE_MEAN, REDUCE_MAX, REDUCE_MIN, REDUCE_PROD along one axis.
//
// Computes   y = Σ x, mean x, max x, min x or Π x along `axis`.
// Inputs     x: f32, rank ≥ 1.
// Outputs    y: f32, x's shape without the axis (or with it as 1 when keepdims=1).
// Immediates axis: i64, default −1; keepdims: bool, default 0.
// Gradient   dy expanded back along the axis (EXPAND); MEAN also scales by 1/len; MAX and MIN send
//            it to every element equal to the extremum (a STEP mask; ties share the full
//            gradient). PROD: dy·y/x, as PyTorch with zeros handled: a row without zeros gets
//            dy·p/x (p the product of its nonzero entries, = y), a row with one zero gets dy·p at
//            the zero and 0 elsewhere, a row with more gets 0 (EQUAL, REDUCE_SUM, REDUCE_PROD, DIV,
//            WHERE).
// Kernels    reference: one pass per output element, f32 accumulation in index order.
//            JIT (jit/rowwise.h), AVX2/AVX-512, one pass: last axis `f32_reduce_sum__<isa>_row`
//            (4 vector accumulators, a fixed pairwise tree, then a fixed lane tree: SUM/MEAN within
//            (⌈len/(4W)⌉ + log2(4W))·ulp·Σ|x| of the exact sum); other axes `_col` (each lane one
//            output, index order: bitwise the reference). MAX and MIN are exact (a zero extremum may
//            differ in its sign on the row layout) and NaN-propagating. PROD is SUM with products
//            (identity 1): on the row layout within (len − 1)·ulp relative of the reference, which
//            multiplies in index order, and the same except where a partial product overflows or
//            underflows in one order and not in the other; on the col layout bitwise the
//            reference. Bitwise deterministic per ISA.
// Notes      REDUCE_MAX and REDUCE_MIN propagate NaN (the first NaN of a row is the result).
#include <cmath>

#include "jit/rowwise.h"
#include "ops/reduce/axis.h"

namespace nnasm {
namespace {

// The REDUCE_* family shares one layout.
#define NNASM_REDUCE_IMM(key) \
  NNASM_IMM_SHARED(key, Opcode::REDUCE_SUM, Opcode::REDUCE_MEAN, Opcode::REDUCE_MAX, Opcode::REDUCE_MIN, Opcode::REDUCE_PROD)
constexpr int AXIS = NNASM_REDUCE_IMM(axis), KEEPDIMS = NNASM_REDUCE_IMM(keepdims);
#undef NNASM_REDUCE_IMM
enum class Kind { SUM, MEAN, MAX, MIN, PROD };
constexpr bool extremum(Kind k) { return k == Kind::MAX || k == Kind::MIN; }

Status reduce_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(require_f32(ins, in));
  int axis;
  NNASM_TRY(axis_of(ins, AXIS, in[0], &axis));
  (*out)[0] = TensorType{DType::F32, reduced_shape(in[0].shape, axis, ins.i(KEEPDIMS))};
  return Status::ok();
}

template <Kind K>
void reduce_ref(const KernelArgs* k) {
  const AxisSplit sp = split_at(k, AXIS);
  const float* x = static_cast<const float*>(k->in[0]);
  float* y = static_cast<float*>(k->out[0]);
  for_each_line(sp, x, [&](const float* xr, int64_t out) {
    float acc = K == Kind::MAX ? -INFINITY : K == Kind::MIN ? INFINITY : K == Kind::PROD ? 1.f : 0.f;
    for (int64_t j = 0; j < sp.len; ++j) {
      const float v = xr[j * sp.inner];
      if (K == Kind::MAX) acc = (std::isnan(v) || v > acc) ? v : acc;
      else if (K == Kind::MIN) acc = (std::isnan(v) || v < acc) ? v : acc;
      else if (K == Kind::PROD) acc *= v;
      else acc += v;
      if (extremum(K) && std::isnan(acc)) break;
    }
    y[out] = K == Kind::MEAN ? acc / static_cast<float>(sp.len) : acc;
  });
}

template <Kind K>
Status reduce_grad(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy, const std::vector<bool>&,
                   std::vector<TensorId>* dx) {
  const Shape& xs = b.type(ins.in[0]).shape;
  const int axis = normalize_axis(ins.i(AXIS), xs.rank);
  Shape kept = xs;
  kept[axis] = 1;
  const TensorId dyk = b.reshape(dy[0], kept);
  const TensorId x = ins.in[0];
  if (extremum(K)) {
    const TensorId yk = b.reshape(ins.out[0], kept);
    const TensorId mask = b.emit(Opcode::STEP, {K == Kind::MAX ? b.emit(Opcode::SUB, {x, yk}) : b.emit(Opcode::SUB, {yk, x})});
    (*dx)[0] = b.emit(Opcode::MUL, {mask, dyk});
  } else if (K == Kind::PROD) {
    auto along = [&](Opcode op, TensorId t) {
      return b.emit(op, {t}, {{"axis", imm_i(axis)}, {"keepdims", imm_i(1)}});
    };
    const TensorId zero = b.constant(0.f), one = b.constant(1.f);
    const TensorId is_zero = b.emit(Opcode::EQUAL, {x, zero});
    const TensorId zeros = along(Opcode::REDUCE_SUM, is_zero);  // per row
    const TensorId p = along(Opcode::REDUCE_PROD, b.emit(Opcode::WHERE, {is_zero, one, x}));
    const TensorId one_zero = b.emit(Opcode::WHERE, {b.emit(Opcode::EQUAL, {zeros, one}), b.emit(Opcode::WHERE, {is_zero, p, zero}), zero});
    const TensorId d = b.emit(Opcode::WHERE, {zeros, one_zero, b.emit(Opcode::DIV, {p, x})});
    (*dx)[0] = b.emit(Opcode::MUL, {d, dyk});
  } else {
    (*dx)[0] = b.expand(K == Kind::MEAN ? b.scale(dyk, 1.0 / static_cast<double>(xs[axis])) : dyk, xs);
  }
  return b.status();
}

template <Kind K>
Result<KernelRef> reduce_jit(const JitRequest& r, KernelCache& cache) {
  const int axis = normalize_axis(r.ins.i(AXIS), r.in[0].shape.rank);
  if (axis < 0) return KernelRef();
  const AxisSplit sp = split_at(r.in[0].shape, axis);
  const RowOp op = K == Kind::SUM    ? RowOp::SUM
                   : K == Kind::MEAN ? RowOp::MEAN
                   : K == Kind::MAX  ? RowOp::MAX
                   : K == Kind::MIN  ? RowOp::MIN
                                     : RowOp::PROD;
  return rowwise_kernel(RowSpec{op, r.isa, sp.outer, sp.len, sp.inner}, cache);
}

}  // namespace

OpHooks op_hooks_REDUCE_SUM() {
  return {reduce_shape, reduce_ref<Kind::SUM>, nullptr, reduce_grad<Kind::SUM>, reduce_jit<Kind::SUM>};
}
OpHooks op_hooks_REDUCE_MEAN() {
  return {reduce_shape, reduce_ref<Kind::MEAN>, nullptr, reduce_grad<Kind::MEAN>, reduce_jit<Kind::MEAN>};
}
OpHooks op_hooks_REDUCE_MAX() {
  return {reduce_shape, reduce_ref<Kind::MAX>, nullptr, reduce_grad<Kind::MAX>, reduce_jit<Kind::MAX>};
}
OpHooks op_hooks_REDUCE_MIN() {
  return {reduce_shape, reduce_ref<Kind::MIN>, nullptr, reduce_grad<Kind::MIN>, reduce_jit<Kind::MIN>};
}
OpHooks op_hooks_REDUCE_PROD() {
  return {reduce_shape, reduce_ref<Kind::PROD>, nullptr, reduce_grad<Kind::PROD>, reduce_jit<Kind::PROD>};
}

}  // namespace nnasm
