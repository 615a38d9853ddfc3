// CAST: converts between nnasm's two dtypes (ONNX Cast between FLOAT and the integers, an index
// computed in floats used to GATHER, an i32 compared as f32).
//
// Computes   y = x as dtype `to`, elementwise.
//              f32 → i32: truncated toward zero, as C's and ONNX's casts; values outside i32's
//                         range saturate to INT32_MIN / INT32_MAX and NaN gives 0 (where C leaves
//                         those undefined; Java's and Rust's casts do the same).
//              i32 → f32: rounded to the nearest float, ties to even (exact up to 2^24).
//              f32 → f32, i32 → i32: a copy.
// Inputs     x: f32 or i32, any shape (rank 0–6).
// Outputs    y: dtype `to`, x's shape.
// Immediates to: f32 or i32 (required).
// Gradient   across dtypes none (a zero gradient, as ARGMAX's): an integer carries no gradient, so
//            neither does the i32 output of f32 → i32 (its steps make it piecewise constant) nor
//            the i32 input of i32 → f32. A same-dtype cast is a copy: dx = dy.
// Kernels    reference loop here. JIT (jit/elementwise.h), bitwise equal to the reference:
//            f32_cast_to_i32__<isa> is vcvttps2dq (which gives INT32_MIN for NaN and every value
//            out of range) with the saturation fixed up by two compares; f32_cast_from_i32__<isa>
//            is vcvtdq2ps (the default rounding mode, which nnasm never changes); a same-dtype
//            cast is f32_cast_copy__<isa>. The generator moves 32-bit lanes, whatever they hold.
// Notes      Not a CALC building block: CALC computes in f32 only.
#include <cmath>
#include <cstdint>

#include "jit/elementwise.h"
#include "ops/op.h"

namespace nnasm {
namespace {

DType target(const Instruction& ins) {
  return ins.i(NNASM_IMM(CAST, to)) == NNASM_CHOICE(CAST, to, i32) ? DType::I32 : DType::F32;
}

Status cast_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  if (in[0].dtype != DType::F32 && in[0].dtype != DType::I32)
    return Status::errorf("CAST: {} must be f32 or i32", operand_str(ins, 0, in[0]));
  (*out)[0] = TensorType{target(ins), in[0].shape};
  return Status::ok();
}

// 2^31, the first float above INT32_MAX; −2^31 is INT32_MIN itself.
constexpr float TWO_31 = 2147483648.f;

int32_t to_i32(float x) {
  if (std::isnan(x)) return 0;
  if (x >= TWO_31) return INT32_MAX;
  if (x < -TWO_31) return INT32_MIN;
  return static_cast<int32_t>(x);  // in range: truncation toward zero is defined
}

// Element by element, reading x[i] before writing y[i] (y may be x: ops/op.h).
void cast_ref(const KernelArgs* a) {
  const int64_t n = a->in_type[0].shape.numel();
  const DType from = a->in_type[0].dtype, to = a->out_type[0].dtype;
  if (from == DType::F32 && to == DType::I32) {
    const float* x = static_cast<const float*>(a->in[0]);
    int32_t* y = static_cast<int32_t*>(a->out[0]);
    for (int64_t i = 0; i < n; ++i) y[i] = to_i32(x[i]);
  } else if (from == DType::I32 && to == DType::F32) {
    const int32_t* x = static_cast<const int32_t*>(a->in[0]);
    float* y = static_cast<float*>(a->out[0]);
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(x[i]);
  } else {
    const uint32_t* x = static_cast<const uint32_t*>(a->in[0]);
    uint32_t* y = static_cast<uint32_t*>(a->out[0]);
    for (int64_t i = 0; i < n; ++i) y[i] = x[i];
  }
}

Status cast_grad(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy, const std::vector<bool>& need,
                 std::vector<TensorId>* dx) {
  if (need[0] && b.type(ins.in[0]).dtype == DType::F32 && b.type(ins.out[0]).dtype == DType::F32) (*dx)[0] = dy[0];
  return b.status();
}

// ---- JIT: y = cast(x[0]); t are scratch registers (jit/elementwise.h) ----
using Xbyak::Xmm;
using Regs = std::vector<Xmm>;

OpSnippet to_i32_snippet() {
  // t0: the AVX2 mask. Lanes of x at or above 2^31 become INT32_MAX, NaN lanes 0; those below
  // −2^31 are already INT32_MIN. x is read by both compares, so y is written last.
  return {"cast_to_i32", "", 2, [](VecGen& v, const Xmm& y, const Regs& x, const Regs& t) {
            v.g.vcvttps2dq(t[1], x[0]);
            const VMask m = v.mask(0, t[0]);
            v.cmp(m, x[0], v.cst(TWO_31), VecGen::CMP_GE);
            v.move_if(t[1], m, v.cst_bits(0x7fffffffu));
            v.cmp(m, x[0], x[0], VecGen::CMP_UNORD);
            v.move_if(t[1], m, v.cst_bits(0));
            v.g.vmovaps(y, t[1]);
          }};
}
OpSnippet from_i32_snippet() {
  return {"cast_from_i32", "", 0, [](VecGen& v, const Xmm& y, const Regs& x, const Regs&) { v.g.vcvtdq2ps(y, x[0]); }};
}
OpSnippet copy_snippet() {
  return {"cast_copy", "", 0, [](VecGen& v, const Xmm& y, const Regs& x, const Regs&) { v.g.vmovaps(y, x[0]); }};
}

Result<KernelRef> cast_jit(const JitRequest& r, KernelCache& cache) {
  const DType from = r.in[0].dtype, to = r.out[0].dtype;
  if (from == to) return unary_jit(r, cache, copy_snippet());
  return unary_jit(r, cache, to == DType::I32 ? to_i32_snippet() : from_i32_snippet());
}

}  // namespace

OpHooks op_hooks_CAST() { return {cast_shape, cast_ref, nullptr, cast_grad, cast_jit, unary_parts}; }

}  // namespace nnasm
