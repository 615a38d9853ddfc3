// SIN and COS: positional encodings (sinusoidal tables, rotary embeddings).
//
// Computes   SIN y = sin x, COS y = cos x, x in radians (C's sinf and cosf: correctly reduced for
//            every float x, however large).
// Inputs     x: f32, any shape.
// Outputs    y: f32, x's shape.
// Gradient   SIN: dy·cos x. COS: −dy·sin x.
// Kernels    reference loop only, and no CALC building block (CALC needs a register snippet).
//            A vectorized sin needs the remainder of x modulo π/2, which for |x| beyond about
//            2^22 takes more bits of 2/π than any fixed-width reduction carries (Payne–Hanek);
//            vmath has none, and a kernel correct only on part of the float range would break the
//            bound vmath promises for every input. Models compute sines of constants (the
//            positions times the frequencies), which the const-fold pass evaluates once, at
//            optimization, so the loop rarely runs per step.
// Notes      NaN and ±inf give NaN; sin(±0) = ±0, cos(±0) = 1.
#include <cmath>

#include "ops/op.h"

namespace nnasm {
namespace {

template <float (*F)(float)>
void trig_ref(const KernelArgs* k) {
  const float* x = static_cast<const float*>(k->in[0]);
  float* y = static_cast<float*>(k->out[0]);  // may be x (in place, ops/op.h): index by index
  const int64_t n = k->in_type[0].shape.numel();
  for (int64_t i = 0; i < n; ++i) y[i] = F(x[i]);
}

float f_sin(float x) { return std::sin(x); }
float f_cos(float x) { return std::cos(x); }

Status trig_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(require_f32(ins, in));
  (*out)[0] = in[0];
  return Status::ok();
}

Status sin_grad(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy, const std::vector<bool>&,
                std::vector<TensorId>* dx) {
  (*dx)[0] = b.emit(Opcode::MUL, {dy[0], b.emit(Opcode::COS, {ins.in[0]})});
  return b.status();
}
Status cos_grad(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy, const std::vector<bool>&,
                std::vector<TensorId>* dx) {
  (*dx)[0] = b.emit(Opcode::NEG, {b.emit(Opcode::MUL, {dy[0], b.emit(Opcode::SIN, {ins.in[0]})})});
  return b.status();
}

}  // namespace

OpHooks op_hooks_SIN() { return {trig_shape, trig_ref<f_sin>, nullptr, sin_grad}; }
OpHooks op_hooks_COS() { return {trig_shape, trig_ref<f_cos>, nullptr, cos_grad}; }

}  // namespace nnasm
