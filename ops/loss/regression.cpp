// MSE and BCE_LOGITS: the elementwise losses, averaged to a scalar.
//
// Computes   MSE         loss = mean of (a − b)².
//            BCE_LOGITS  loss = mean of max(x,0) − x·t + log(1 + e^−|x|), the binary cross-
//                        entropy of sigmoid(x) against t, without overflow for any x.
// Inputs     two f32 tensors of one shape (MSE: prediction, target; BCE_LOGITS: logits x,
//            targets t in [0, 1]).
// Outputs    loss: f32[] (rank 0).
// Gradient   MSE: ±2(a − b)·dloss/n. BCE_LOGITS: (sigmoid(x) − t)·dloss/n for x, −x·dloss/n for t.
//            Built from forward ops (SUB, SCALE, MUL, SIGMOID): no fused kernel needed.
// Kernels    reference: one pass, accumulated in double.
#include <cmath>

#include "ops/op.h"

namespace nnasm {
namespace {

Status loss_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(require_f32(ins, in));
  if (in[0].shape != in[1].shape)
    return Status::errorf("{}: {} and {} must have one shape", ins.info().mnemonic, operand_str(ins, 0, in[0]),
                          operand_str(ins, 1, in[1]));
  (*out)[0] = TensorType{DType::F32, Shape{}};
  return Status::ok();
}

template <double (*TERM)(float, float)>
void loss_ref(const KernelArgs* k) {
  const float* a = static_cast<const float*>(k->in[0]);
  const float* b = static_cast<const float*>(k->in[1]);
  const int64_t n = k->in_type[0].shape.numel();
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += TERM(a[i], b[i]);
  *static_cast<float*>(k->out[0]) = static_cast<float>(s / static_cast<double>(n));
}

double mse_term(float a, float b) {
  const double d = static_cast<double>(a) - b;
  return d * d;
}

double bce_term(float x, float t) {
  const double xd = x;
  return std::fmax(xd, 0.0) - xd * t + std::log1p(std::exp(-std::fabs(xd)));
}

double inv_n(GradBuilder& b, TensorId x) { return 1.0 / static_cast<double>(b.type(x).shape.numel()); }

Status mse_grad(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy,
                const std::vector<bool>& need, std::vector<TensorId>* dx) {
  const TensorId g =
      b.emit(Opcode::MUL, {b.scale(b.emit(Opcode::SUB, {ins.in[0], ins.in[1]}), 2 * inv_n(b, ins.in[0])), dy[0]});
  if (need[0]) (*dx)[0] = g;
  if (need[1]) (*dx)[1] = b.emit(Opcode::NEG, {g});
  return b.status();
}

Status bce_grad(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy,
                const std::vector<bool>& need, std::vector<TensorId>* dx) {
  const double s = inv_n(b, ins.in[0]);
  if (need[0]) {
    const TensorId p = b.emit(Opcode::SUB, {b.emit(Opcode::SIGMOID, {ins.in[0]}), ins.in[1]});
    (*dx)[0] = b.emit(Opcode::MUL, {b.scale(p, s), dy[0]});
  }
  if (need[1]) (*dx)[1] = b.emit(Opcode::MUL, {b.scale(ins.in[0], -s), dy[0]});
  return b.status();
}

}  // namespace

OpHooks op_hooks_MSE() { return {loss_shape, loss_ref<mse_term>, nullptr, mse_grad}; }
OpHooks op_hooks_BCE_LOGITS() { return {loss_shape, loss_ref<bce_term>, nullptr, bce_grad}; }

}  // namespace nnasm
