// The unary elementwise family: one scalar function per op, applied by one shared reference loop.
//
// Computes   y[i] = f(x[i]) for each op below (immediates in brackets):
//   SCALE [alpha]  alpha·x            NEG          −x
//   EXP            e^x                LOG          ln x (−inf at 0, NaN below)
//   SQRT           √x (NaN below 0)   ABS          |x|
//   SQUARE         x²                 RELU         max(x, 0)
//   LEAKYRELU [slope] x>0 ? x : slope·x
//   ELU [alpha]    x>0 ? x : alpha·(e^x − 1)
//   CLIPPED_RELU [threshold] min(max(x, 0), threshold)
//   SIGMOID        1/(1+e^−x), computed without overflow for large |x|
//   TANH           tanh x
//   GELU [approx=none|tanh] x·½(1+erf(x/√2)), or ½x(1+tanh(√(2/π)(x+0.044715x³)))
//   SWISH [beta]   x·sigmoid(beta·x)
//   STEP           x >= 0 ? 1 : 0 (NaN gives 0)
// Inputs     x: f32, any shape (rank 0–6).
// Outputs    y: f32, x's shape.
// Gradient   SCALE: alpha·dy. NEG: −dy. EXP: dy·y. LOG: dy/x. SQRT: ½dy/y. SQUARE: 2x·dy. The
//            activations and ABS: one fused ACT_BWD (dy·f'(x)). STEP: zero (no gradient flows).
// Kernels    reference loop here; JIT snippets come with the shared elementwise generator.
// Notes      NaN in gives NaN out for every op, RELU and CLIPPED_RELU included (as PyTorch).
#include <cmath>

#include "ops/op.h"

namespace nnasm {
namespace {

float sigmoid(float x) {
  // Split by sign so e^(−x) never overflows.
  if (x >= 0) return 1.f / (1.f + std::exp(-x));
  float e = std::exp(x);
  return e / (1.f + e);
}

struct Params {
  float a = 0;  // the op's one float immediate, if any
  bool tanh_form = false;
};

float f_scale(float x, Params p) { return p.a * x; }
float f_neg(float x, Params) { return -x; }
float f_exp(float x, Params) { return std::exp(x); }
float f_log(float x, Params) { return std::log(x); }
float f_sqrt(float x, Params) { return std::sqrt(x); }
float f_abs(float x, Params) { return std::fabs(x); }
float f_square(float x, Params) { return x * x; }
float f_relu(float x, Params) { return std::isnan(x) ? x : (x > 0 ? x : 0.f); }
float f_leakyrelu(float x, Params p) { return x > 0 ? x : p.a * x; }
float f_elu(float x, Params p) { return x > 0 ? x : p.a * std::expm1(x); }
float f_clipped_relu(float x, Params p) { return std::isnan(x) ? x : std::fmin(std::fmax(x, 0.f), p.a); }
float f_sigmoid(float x, Params) { return sigmoid(x); }
float f_tanh(float x, Params) { return std::tanh(x); }
float f_gelu(float x, Params p) {
  if (p.tanh_form) {
    const float k = 0.7978845608028654f;  // √(2/π)
    return 0.5f * x * (1.f + std::tanh(k * (x + 0.044715f * x * x * x)));
  }
  return 0.5f * x * (1.f + std::erf(x * 0.7071067811865476f));
}
float f_swish(float x, Params p) { return x * sigmoid(p.a * x); }
float f_step(float x, Params) { return x >= 0 ? 1.f : 0.f; }

template <float (*F)(float, Params)>
void unary_ref(const KernelArgs* a) {
  const float* x = static_cast<const float*>(a->in[0]);
  float* y = static_cast<float*>(a->out[0]);
  Params p;
  if (!a->ins->imm.empty()) {
    p.a = static_cast<float>(a->ins->imm[0].f);
    p.tanh_form = a->ins->imm[0].type == ImmType::ENUM && a->ins->imm[0].i == 1;
  }
  const int64_t n = a->in_type[0].shape.numel();
  for (int64_t i = 0; i < n; ++i) y[i] = F(x[i], p);
}

Status unary_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(require_f32(ins, in));
  (*out)[0] = in[0];
  return Status::ok();
}

// ---- gradients ----
using Dy = const std::vector<TensorId>&;
using Need = const std::vector<bool>&;
using Dx = std::vector<TensorId>*;

Status g_scale(GradBuilder& b, const Instruction& ins, Dy dy, Need, Dx dx) {
  (*dx)[0] = b.scale(dy[0], ins.f(0));
  return b.status();
}
Status g_neg(GradBuilder& b, const Instruction&, Dy dy, Need, Dx dx) {
  (*dx)[0] = b.emit(Opcode::NEG, {dy[0]});
  return b.status();
}
Status g_exp(GradBuilder& b, const Instruction& ins, Dy dy, Need, Dx dx) {
  (*dx)[0] = b.emit(Opcode::MUL, {dy[0], ins.out[0]});
  return b.status();
}
Status g_log(GradBuilder& b, const Instruction& ins, Dy dy, Need, Dx dx) {
  (*dx)[0] = b.emit(Opcode::DIV, {dy[0], ins.in[0]});
  return b.status();
}
Status g_sqrt(GradBuilder& b, const Instruction& ins, Dy dy, Need, Dx dx) {
  (*dx)[0] = b.scale(b.emit(Opcode::DIV, {dy[0], ins.out[0]}), 0.5);
  return b.status();
}
Status g_square(GradBuilder& b, const Instruction& ins, Dy dy, Need, Dx dx) {
  (*dx)[0] = b.scale(b.emit(Opcode::MUL, {dy[0], ins.in[0]}), 2.0);
  return b.status();
}

// ACT_BWD's `fn` choices, in opcodes.def order.
enum class Act { RELU, LEAKYRELU, ELU, CLIPPED_RELU, SIGMOID, TANH, GELU, GELU_TANH, SWISH, ABS };

template <Act A>
Status g_act(GradBuilder& b, const Instruction& ins, Dy dy, Need, Dx dx) {
  int64_t fn = static_cast<int64_t>(A);
  if (A == Act::GELU && ins.i(0) == 1) fn = static_cast<int64_t>(Act::GELU_TANH);
  const bool has_alpha = ins.imm.size() == 1 && ins.imm[0].type == ImmType::F32;
  (*dx)[0] = b.emit(Opcode::ACT_BWD, {dy[0], ins.in[0]}, {{"fn", imm_i(fn)}, {"alpha", imm_f(has_alpha ? ins.f(0) : 0)}});
  return b.status();
}

}  // namespace

#define UNARY_OP(NAME, FN, GRAD) \
  OpHooks op_hooks_##NAME() { return {unary_shape, unary_ref<FN>, nullptr, GRAD}; }
UNARY_OP(SCALE, f_scale, g_scale)
UNARY_OP(NEG, f_neg, g_neg)
UNARY_OP(EXP, f_exp, g_exp)
UNARY_OP(LOG, f_log, g_log)
UNARY_OP(SQRT, f_sqrt, g_sqrt)
UNARY_OP(ABS, f_abs, g_act<Act::ABS>)
UNARY_OP(SQUARE, f_square, g_square)
UNARY_OP(RELU, f_relu, g_act<Act::RELU>)
UNARY_OP(LEAKYRELU, f_leakyrelu, g_act<Act::LEAKYRELU>)
UNARY_OP(ELU, f_elu, g_act<Act::ELU>)
UNARY_OP(CLIPPED_RELU, f_clipped_relu, g_act<Act::CLIPPED_RELU>)
UNARY_OP(SIGMOID, f_sigmoid, g_act<Act::SIGMOID>)
UNARY_OP(TANH, f_tanh, g_act<Act::TANH>)
UNARY_OP(GELU, f_gelu, g_act<Act::GELU>)
UNARY_OP(SWISH, f_swish, g_act<Act::SWISH>)
UNARY_OP(STEP, f_step, no_gradient)
#undef UNARY_OP

}  // namespace nnasm
