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
//            activations and ABS: one fused ACT_BWD (dy·f'(x)); relu, clipped_relu and leakyrelu
//            (slope ≥ 0) pass y rather than x, the same derivative read off the output, so the
//            input stays private to the activation (fusable). STEP: zero (no gradient flows).
// Kernels    reference loop here. JIT: one register snippet per op for the shared elementwise
//            generator (engine/jit/elementwise.h), f32_<op>__avx2 / __avx512. SCALE, NEG, SQRT, ABS,
//            SQUARE, RELU, LEAKYRELU, CLIPPED_RELU and STEP are bitwise equal to the reference; EXP,
//            LOG, ELU, SIGMOID, TANH, GELU and SWISH use engine/jit/vmath.h and differ from it by
//            the bounds documented there.
// Notes      NaN in gives NaN out for every op, RELU and CLIPPED_RELU included (as PyTorch).
#include <cfloat>
#include <cmath>

#include "engine/jit/act_snippet.h"
#include "engine/jit/elementwise.h"
#include "ops/elementwise/activation.h"
#include "ops/op.h"

namespace nnasm {
namespace {

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
float f_relu(float x, Params) { return act::relu(x); }
float f_leakyrelu(float x, Params p) { return act::leakyrelu(x, p.a); }
float f_elu(float x, Params p) { return act::elu(x, p.a); }
float f_clipped_relu(float x, Params p) { return act::clipped_relu(x, p.a); }
float f_sigmoid(float x, Params) { return act::sigmoid(x); }
float f_tanh(float x, Params) { return std::tanh(x); }
float f_gelu(float x, Params p) { return p.tanh_form ? act::gelu_tanh(x) : act::gelu(x); }
float f_swish(float x, Params p) { return act::swish(x, p.a); }
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
  const double alpha = has_alpha ? ins.f(0) : 0;
  // relu, clipped_relu and leakyrelu with a slope ≥ 0 read their derivative off the output
  // (y > 0 ⇔ x > 0; 0 < y < t ⇔ 0 < x < t), so the input is read by nobody but the activation
  // and the optimizer may fuse the activation into the instruction making it (LINEAR act=).
  const bool from_output = A == Act::RELU || A == Act::CLIPPED_RELU || (A == Act::LEAKYRELU && alpha >= 0);
  (*dx)[0] = b.emit(Opcode::ACT_BWD, {dy[0], from_output ? ins.out[0] : ins.in[0]},
                    {{"fn", imm_i(fn)}, {"alpha", imm_f(alpha)}});
  return b.status();
}

// ---- JIT snippets: y = f(x[0]); t are scratch registers (see engine/jit/elementwise.h) ----
using Xbyak::Xmm;
using Regs = std::vector<Xmm>;
using J = Result<KernelRef>;

float imm0(const JitRequest& r) { return static_cast<float>(r.ins.f(0)); }

J j_scale(const JitRequest& r, KernelCache& c) {
  const float a = imm0(r);
  return unary_jit(r, c, "scale", fmt::format("alpha={}", a), 0,
                   [a](VecGen& v, const Xmm& y, const Regs& x, const Regs&) { v.g.vmulps(y, x[0], v.cst(a)); });
}
J j_neg(const JitRequest& r, KernelCache& c) {
  return unary_jit(r, c, "neg", "", 0, [](VecGen& v, const Xmm& y, const Regs& x, const Regs&) {
    v.g.vxorps(y, x[0], v.cst_bits(0x80000000u));
  });
}
J j_exp(const JitRequest& r, KernelCache& c) {
  return unary_jit(r, c, "exp", "", vmath::EXP_TMPS,
                   [](VecGen& v, const Xmm& y, const Regs& x, const Regs& t) { vmath::exp(v, y, x[0], t); });
}
J j_log(const JitRequest& r, KernelCache& c) {
  return unary_jit(r, c, "log", "", vmath::LOG_TMPS,
                   [](VecGen& v, const Xmm& y, const Regs& x, const Regs& t) { vmath::log(v, y, x[0], t); });
}
J j_sqrt(const JitRequest& r, KernelCache& c) {
  return unary_jit(r, c, "sqrt", "", 0,
                   [](VecGen& v, const Xmm& y, const Regs& x, const Regs&) { v.g.vsqrtps(y, x[0]); });
}
J j_abs(const JitRequest& r, KernelCache& c) {
  return unary_jit(r, c, "abs", "", 0, [](VecGen& v, const Xmm& y, const Regs& x, const Regs&) {
    v.g.vandps(y, x[0], v.cst_bits(0x7fffffffu));
  });
}
J j_square(const JitRequest& r, KernelCache& c) {
  return unary_jit(r, c, "square", "", 0,
                   [](VecGen& v, const Xmm& y, const Regs& x, const Regs&) { v.g.vmulps(y, x[0], x[0]); });
}
// The activations' snippets are shared with LINEAR's fused epilogue (engine/jit/act_snippet.h).
J act_unary_jit(const JitRequest& r, KernelCache& c, Activation f, const std::string& imms, float a) {
  ActSnippet s = act_snippet(f, a);
  return unary_jit(r, c, activation_name(f), imms, s.n_tmp,
                   [body = std::move(s.body)](VecGen& v, const Xmm& y, const Regs& x, const Regs& t) {
                     body(v, y, x[0], t);
                   });
}
J j_relu(const JitRequest& r, KernelCache& c) { return act_unary_jit(r, c, Activation::RELU, "", 0); }
J j_leakyrelu(const JitRequest& r, KernelCache& c) {
  return act_unary_jit(r, c, Activation::LEAKYRELU, fmt::format("slope={}", imm0(r)), imm0(r));
}
J j_elu(const JitRequest& r, KernelCache& c) {
  return act_unary_jit(r, c, Activation::ELU, fmt::format("alpha={}", imm0(r)), imm0(r));
}
J j_clipped_relu(const JitRequest& r, KernelCache& c) {
  return act_unary_jit(r, c, Activation::CLIPPED_RELU, fmt::format("threshold={}", imm0(r)), imm0(r));
}
J j_sigmoid(const JitRequest& r, KernelCache& c) { return act_unary_jit(r, c, Activation::SIGMOID, "", 0); }
J j_tanh(const JitRequest& r, KernelCache& c) { return act_unary_jit(r, c, Activation::TANH, "", 0); }
J j_gelu(const JitRequest& r, KernelCache& c) {
  return act_unary_jit(r, c, r.ins.i(0) == 1 ? Activation::GELU_TANH : Activation::GELU, "", 0);
}
J j_swish(const JitRequest& r, KernelCache& c) {
  return act_unary_jit(r, c, Activation::SWISH, fmt::format("beta={}", imm0(r)), imm0(r));
}
J j_step(const JitRequest& r, KernelCache& c) {
  return unary_jit(r, c, "step", "", 2, [](VecGen& v, const Xmm& y, const Regs& x, const Regs& t) {
    const VMask m = v.mask(0, t[0]);
    v.cmp(m, x[0], v.cst(0.f), VecGen::CMP_GE);
    v.g.vmovups(t[1], v.cst(1.f));
    v.keep(y, m, t[1]);
  });
}

}  // namespace

#define UNARY_OP(NAME, FN, GRAD, JIT) \
  OpHooks op_hooks_##NAME() { return {unary_shape, unary_ref<FN>, nullptr, GRAD, JIT, unary_parts}; }
UNARY_OP(SCALE, f_scale, g_scale, j_scale)
UNARY_OP(NEG, f_neg, g_neg, j_neg)
UNARY_OP(EXP, f_exp, g_exp, j_exp)
UNARY_OP(LOG, f_log, g_log, j_log)
UNARY_OP(SQRT, f_sqrt, g_sqrt, j_sqrt)
UNARY_OP(ABS, f_abs, g_act<Act::ABS>, j_abs)
UNARY_OP(SQUARE, f_square, g_square, j_square)
UNARY_OP(RELU, f_relu, g_act<Act::RELU>, j_relu)
UNARY_OP(LEAKYRELU, f_leakyrelu, g_act<Act::LEAKYRELU>, j_leakyrelu)
UNARY_OP(ELU, f_elu, g_act<Act::ELU>, j_elu)
UNARY_OP(CLIPPED_RELU, f_clipped_relu, g_act<Act::CLIPPED_RELU>, j_clipped_relu)
UNARY_OP(SIGMOID, f_sigmoid, g_act<Act::SIGMOID>, j_sigmoid)
UNARY_OP(TANH, f_tanh, g_act<Act::TANH>, j_tanh)
UNARY_OP(GELU, f_gelu, g_act<Act::GELU>, j_gelu)
UNARY_OP(SWISH, f_swish, g_act<Act::SWISH>, j_swish)
UNARY_OP(STEP, f_step, no_gradient, j_step)
#undef UNARY_OP

}  // namespace nnasm
