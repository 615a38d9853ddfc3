// REDUCE_SUM, REDUCE_MEAN, REDUCE_MAX along one axis.
//
// Computes   y = Σ x, mean x, or max x along `axis`.
// Inputs     x: f32, rank ≥ 1.
// Outputs    y: f32, x's shape without the axis (or with it as 1 when keepdims=1).
// Immediates axis: i64, default −1; keepdims: bool, default 0.
// Gradient   dy expanded back along the axis (EXPAND); MEAN also scales by 1/len; MAX sends it
//            to every element equal to the max (a STEP mask; ties share the full gradient).
// Kernels    reference: one pass per output element, f32 accumulation in index order.
//            JIT (engine/jit/rowwise.h), AVX2/AVX-512, one pass: last axis `f32_reduce_sum__<isa>_row`
//            (4 vector accumulators, a fixed pairwise tree, then a fixed lane tree: SUM/MEAN within
//            (⌈len/(4W)⌉ + log2(4W))·ulp·Σ|x| of the exact sum); other axes `_col` (each lane one
//            output, index order: bitwise the reference). MAX is exact (a zero maximum may differ in
//            its sign on the row layout) and NaN-propagating. Bitwise deterministic per ISA.
// Notes      REDUCE_MAX propagates NaN.
#include <cmath>

#include "engine/jit/rowwise.h"
#include "ops/reduce/axis.h"

namespace nnasm {
namespace {

enum { AXIS, KEEPDIMS };
enum class Kind { SUM, MEAN, MAX };

Status reduce_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(require_f32(ins, in));
  int axis;
  NNASM_TRY(axis_of(ins, AXIS, in[0], &axis));
  Shape y;
  for (int i = 0; i < in[0].shape.rank; ++i) {
    if (i == axis && !ins.i(KEEPDIMS)) continue;
    y.dims[y.rank++] = i == axis ? 1 : in[0].shape[i];
  }
  (*out)[0] = TensorType{DType::F32, y};
  return Status::ok();
}

template <Kind K>
void reduce_ref(const KernelArgs* k) {
  const AxisSplit sp = split_at(k, AXIS);
  const float* x = static_cast<const float*>(k->in[0]);
  float* y = static_cast<float*>(k->out[0]);
  for (int64_t o = 0; o < sp.outer; ++o)
    for (int64_t i = 0; i < sp.inner; ++i) {
      const float* xr = x + o * sp.len * sp.inner + i;
      float acc = K == Kind::MAX ? -INFINITY : 0.f;
      for (int64_t j = 0; j < sp.len; ++j) {
        const float v = xr[j * sp.inner];
        if (K == Kind::MAX) acc = (std::isnan(v) || v > acc) ? v : acc;
        else acc += v;
        if (K == Kind::MAX && std::isnan(acc)) break;
      }
      y[o * sp.inner + i] = K == Kind::MEAN ? acc / static_cast<float>(sp.len) : acc;
    }
}

template <Kind K>
Status reduce_grad(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy, const std::vector<bool>&,
                   std::vector<TensorId>* dx) {
  const Shape& xs = b.type(ins.in[0]).shape;
  const int axis = normalize_axis(ins.i(AXIS), xs.rank);
  Shape kept = xs;
  kept[axis] = 1;
  const TensorId dyk = b.reshape(dy[0], kept);
  if (K == Kind::MAX) {
    const TensorId mask = b.emit(Opcode::STEP, {b.emit(Opcode::SUB, {ins.in[0], b.reshape(ins.out[0], kept)})});
    (*dx)[0] = b.emit(Opcode::MUL, {mask, dyk});
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
  const RowOp op = K == Kind::SUM ? RowOp::SUM : K == Kind::MEAN ? RowOp::MEAN : RowOp::MAX;
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

}  // namespace nnasm
