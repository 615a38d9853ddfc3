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
//   ERF            erf x
//   CLAMP [min, max] x < min ? min : (x > max ? max : x); NaN stays NaN, a NaN bound is no bound,
//                  min > max gives max (as torch.clamp and ONNX Clip)
//   RECIPROCAL     1/x (±inf at ±0)      FLOOR, CEIL  ⌊x⌋, ⌈x⌉ (±0, ±inf and NaN unchanged)
//   ROUND          the nearest whole number, halves to the even one (ONNX Round, numpy.round,
//                  torch.round: 2.5 → 2, −0.5 → −0); ±0, ±inf and NaN unchanged
//   SIGN           1 for x > 0, −1 for x < 0, x itself for ±0 and NaN
//   SOFTPLUS       ln(1 + e^x), as max(x, 0) + log1p(e^−|x|) (no overflow; ONNX Softplus)
//   HARDSIGMOID [alpha, beta] max(0, min(1, alpha·x + beta)) (ONNX's defaults 0.2, 0.5; PyTorch's
//                  nn.Hardsigmoid is alpha = 1/6)
//   HARDSWISH      x·max(0, min(1, x/6 + 1/2)) (ONNX HardSwish; hardswish(−inf) = NaN, as there)
//   SELU [alpha, gamma] gamma·(x > 0 ? x : alpha·(e^x − 1)) (ONNX's and PyTorch's constants)
// Inputs     x: f32, any shape (rank 0–6).
// Outputs    y: f32, x's shape.
// Gradient   SCALE: alpha·dy. NEG: −dy. EXP: dy·y. LOG: dy/x. SQRT: ½dy/y. SQUARE: 2x·dy. The
//            activations and ABS: one fused ACT_BWD (dy·f'(x)); relu, clipped_relu and leakyrelu
//            (slope ≥ 0) pass y rather than x, the same derivative read off the output, so the
//            input stays private to the activation (fusable). STEP: zero (no gradient flows).
//            ERF: dy·(2/√π)·e^(−x²). CLAMP: dy where min ≤ x ≤ max, 0 elsewhere and for NaN x
//            (PyTorch's clamp: the bounds themselves pass the gradient), by GREATER_EQUAL,
//            LESS_EQUAL, MUL and WHERE. RECIPROCAL: −dy·y². FLOOR, CEIL, ROUND, SIGN: zero (as
//            PyTorch: piecewise constant).
//            SOFTPLUS: dy·sigmoid(x). HARDSIGMOID: alpha·dy where 0 < y < 1, else 0. HARDSWISH, as
//            PyTorch: 0 for x < −3, dy·(x/3 + 1/2) for −3 ≤ x ≤ 3, dy above. SELU: gamma times
//            ACT_BWD's elu derivative. All from forward ops and ACT_BWD.
// Kernels    reference loop here. JIT: one register snippet per op for the shared elementwise
//            generator (jit/elementwise.h), f32_<op>__avx2 / __avx512. SCALE, NEG, SQRT, ABS,
//            SQUARE, RELU, LEAKYRELU, CLIPPED_RELU, STEP, CLAMP, RECIPROCAL, FLOOR, CEIL, ROUND,
//            SIGN, HARDSIGMOID and HARDSWISH are bitwise equal to the reference; EXP, LOG, ELU, SIGMOID,
//            TANH, GELU, SWISH, ERF, SOFTPLUS and SELU use jit/vmath.h and differ from it by
//            the bounds documented there.
//            SOFTPLUS, HARDSIGMOID, HARDSWISH and SELU are plain unary ops, not OPF_ACTIVATION:
//            a fused GEMM/CONV epilogue for them would need each in the Activation enum, the
//            act= schemas, act_snippet, ACT_BWD's fn list and LINEAR's backward rule.
//            Each op is one ElementwiseOp (elementwise_op.h): its reference loop and its snippet
//            are what CALC composes, callable there as scale, neg, ..., step, erf, ..., selu.
// Notes      NaN in gives NaN out for every op, RELU and CLIPPED_RELU included (as PyTorch).
#include <cfloat>
#include <cmath>

#include "jit/act_snippet.h"
#include "ops/elementwise/activation.h"
#include "ops/elementwise/elementwise_op.h"

namespace nnasm {
namespace {

struct Params {
  float a = 0, b = 0;  // the op's float immediates, if any
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
float f_erf(float x, Params) { return std::erf(x); }
// In this order, so that a NaN x or bound falls through every compare (and matches vmaxps and
// vminps, which return their second operand on NaN and on equal values).
float f_clamp(float x, Params p) {
  const float y = x < p.a ? p.a : x;
  return y > p.b ? p.b : y;
}

float f_reciprocal(float x, Params) { return 1.f / x; }
float f_floor(float x, Params) { return std::floor(x); }
float f_ceil(float x, Params) { return std::ceil(x); }
// Half to even from floor, so the result does not hang on the thread's rounding mode (the JIT's
// vroundps/vrndscaleps name theirs in the immediate too). x − ⌊x⌋ is exact in float; the sign is
// x's, so −0.3 gives −0 as vroundps does.
float f_round(float x, Params) {
  float r = std::floor(x);
  const float frac = x - r;  // NaN for ±inf: no compare below holds, r stays x
  if (frac > 0.5f || (frac == 0.5f && std::fmod(r, 2.f) != 0)) r += 1;
  return std::copysign(r, x);
}
float f_sign(float x, Params) { return x > 0 ? 1.f : x < 0 ? -1.f : x; }
float f_softplus(float x, Params) {
  return std::isnan(x) ? x : (x > 0 ? x : 0.f) + std::log1p(std::exp(-std::fabs(x)));
}
// max(0, min(1, t)) with t's NaN kept.
float unit_clamp(float t) { return f_clamp(t, Params{0.f, 1.f}); }
constexpr float SIXTH = 1.f / 6;
float f_hardsigmoid(float x, Params p) { return unit_clamp(p.a * x + p.b); }
float f_hardswish(float x, Params) { return x * unit_clamp(x * SIXTH + 0.5f); }
float f_selu(float x, Params p) { return x > 0 ? p.b * x : p.b * (p.a * std::expm1(x)); }

// a and b are the op's first and second immediates, whichever they are (f_selu: alpha, gamma);
// only GELU has an enum one.
Params params(const EwImms& m) { return Params{m.f[0], m.f[1], m.i[0] == NNASM_CHOICE(GELU, approx, tanh)}; }

template <float (*F)(float, Params)>
void unary_block(const float* const* x, float* y, int64_t n, const EwImms& m) {
  const Params p = params(m);
  const float* xr = x[0];  // no __restrict: y may be x (in place, ops/op.h)
  for (int64_t i = 0; i < n; ++i) y[i] = F(xr[i], p);
}

template <float (*F)(float, Params)>
void unary_ref(const KernelArgs* a) {
  const float* x = static_cast<const float*>(a->in[0]);
  unary_block<F>(&x, static_cast<float*>(a->out[0]), a->in_type[0].shape.numel(), ew_imms(a->ins->imm));
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
  (*dx)[0] = b.scale(dy[0], ins.f(NNASM_IMM(SCALE, alpha)));
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

Status g_erf(GradBuilder& b, const Instruction& ins, Dy dy, Need, Dx dx) {
  const TensorId e = b.emit(Opcode::EXP, {b.emit(Opcode::NEG, {b.emit(Opcode::SQUARE, {ins.in[0]})})});
  (*dx)[0] = b.emit(Opcode::MUL, {dy[0], b.scale(e, 1.1283791670955126)});
  return b.status();
}
Status g_clamp(GradBuilder& b, const Instruction& ins, Dy dy, Need, Dx dx) {
  const TensorId x = ins.in[0];
  const TensorId inside = b.emit(Opcode::MUL, {b.emit(Opcode::GREATER_EQUAL, {x, b.constant(static_cast<float>(ins.f(NNASM_IMM(CLAMP, min))))}),
                                               b.emit(Opcode::LESS_EQUAL, {x, b.constant(static_cast<float>(ins.f(NNASM_IMM(CLAMP, max))))})});
  (*dx)[0] = b.emit(Opcode::WHERE, {inside, dy[0], b.constant(0.f)});
  return b.status();
}

Status g_reciprocal(GradBuilder& b, const Instruction& ins, Dy dy, Need, Dx dx) {
  (*dx)[0] = b.emit(Opcode::NEG, {b.emit(Opcode::MUL, {dy[0], b.emit(Opcode::SQUARE, {ins.out[0]})})});
  return b.status();
}
Status g_softplus(GradBuilder& b, const Instruction& ins, Dy dy, Need, Dx dx) {
  (*dx)[0] = b.emit(Opcode::MUL, {dy[0], b.emit(Opcode::SIGMOID, {ins.in[0]})});
  return b.status();
}
Status g_hardsigmoid(GradBuilder& b, const Instruction& ins, Dy dy, Need, Dx dx) {
  const TensorId y = ins.out[0];
  const TensorId inside = b.emit(Opcode::MUL, {b.emit(Opcode::GREATER, {y, b.constant(0.f)}),
                                               b.emit(Opcode::LESS, {y, b.constant(1.f)})});
  (*dx)[0] = b.emit(Opcode::WHERE, {inside, b.scale(dy[0], ins.f(NNASM_IMM(HARDSIGMOID, alpha))), b.constant(0.f)});
  return b.status();
}
Status g_hardswish(GradBuilder& b, const Instruction& ins, Dy dy, Need, Dx dx) {
  const TensorId x = ins.in[0];
  const TensorId slope = b.emit(Opcode::ADD, {x, b.constant(0.5f)}, {{"alpha", imm_f(1.0 / 3)}});
  const TensorId upper = b.emit(Opcode::WHERE, {b.emit(Opcode::LESS_EQUAL, {x, b.constant(3.f)}), slope, b.constant(1.f)});
  const TensorId d = b.emit(Opcode::WHERE, {b.emit(Opcode::LESS, {x, b.constant(-3.f)}), b.constant(0.f), upper});
  (*dx)[0] = b.emit(Opcode::MUL, {dy[0], d});
  return b.status();
}

Status g_selu(GradBuilder& b, const Instruction& ins, Dy dy, Need, Dx dx) {
  const TensorId d = b.emit(Opcode::ACT_BWD, {dy[0], ins.in[0]},
                            {{"fn", imm_i(act_bwd_fn(Activation::ELU))}, {"alpha", imm_f(ins.f(NNASM_IMM(SELU, alpha)))}});
  (*dx)[0] = b.scale(d, ins.f(NNASM_IMM(SELU, gamma)));
  return b.status();
}

Status g_abs(GradBuilder& b, const Instruction& ins, Dy dy, Need, Dx dx) {
  (*dx)[0] = b.emit(Opcode::ACT_BWD, {dy[0], ins.in[0]}, {{"fn", imm_i(NNASM_CHOICE(ACT_BWD, fn, abs))}, {"alpha", imm_f(0)}});
  return b.status();
}

// The activation ops (isa/activations.def): ACT_BWD with the activation's fn and immediate.
Status g_act(GradBuilder& b, const Instruction& ins, Dy dy, Need, Dx dx) {
  const Activation f = activation_of(ins);
  const double alpha = activation_alpha(ins, f);
  // relu, clipped_relu and leakyrelu with a slope ≥ 0 read their derivative off the output
  // (y > 0 ⇔ x > 0; 0 < y < t ⇔ 0 < x < t), so the input is read by nobody but the activation
  // and the optimizer may fuse the activation into the instruction making it (LINEAR act=).
  const bool from_output =
      f == Activation::RELU || f == Activation::CLIPPED_RELU || (f == Activation::LEAKYRELU && alpha >= 0);
  (*dx)[0] = b.emit(Opcode::ACT_BWD, {dy[0], from_output ? ins.out[0] : ins.in[0]},
                    {{"fn", imm_i(act_bwd_fn(f))}, {"alpha", imm_f(alpha)}});
  return b.status();
}

// ---- JIT snippets: y = f(x[0]); t are scratch registers (see jit/elementwise.h) ----
using Xbyak::Xmm;
using Regs = std::vector<Xmm>;

OpSnippet s_scale(const EwImms& m) {
  const float a = m.f[0];
  return {"scale", fmt::format("alpha={}", a), 0,
          [a](VecGen& v, const Xmm& y, const Regs& x, const Regs&) { v.g.vmulps(y, x[0], v.cst(a)); }};
}
OpSnippet s_neg(const EwImms&) {
  return {"neg", "", 0,
          [](VecGen& v, const Xmm& y, const Regs& x, const Regs&) { v.g.vxorps(y, x[0], v.cst_bits(0x80000000u)); }};
}
OpSnippet s_exp(const EwImms&) {
  return {"exp", "", vmath::EXP_TMPS,
          [](VecGen& v, const Xmm& y, const Regs& x, const Regs& t) { vmath::exp(v, y, x[0], t); }};
}
OpSnippet s_log(const EwImms&) {
  return {"log", "", vmath::LOG_TMPS,
          [](VecGen& v, const Xmm& y, const Regs& x, const Regs& t) { vmath::log(v, y, x[0], t); }};
}
OpSnippet s_sqrt(const EwImms&) {
  return {"sqrt", "", 0, [](VecGen& v, const Xmm& y, const Regs& x, const Regs&) { v.g.vsqrtps(y, x[0]); }};
}
OpSnippet s_abs(const EwImms&) {
  return {"abs", "", 0,
          [](VecGen& v, const Xmm& y, const Regs& x, const Regs&) { v.g.vandps(y, x[0], v.cst_bits(0x7fffffffu)); }};
}
OpSnippet s_square(const EwImms&) {
  return {"square", "", 0, [](VecGen& v, const Xmm& y, const Regs& x, const Regs&) { v.g.vmulps(y, x[0], x[0]); }};
}
// The activations' snippets are shared with LINEAR's fused epilogue (jit/act_snippet.h).
OpSnippet act(Activation f, const char* key, float a) {
  ActSnippet s = act_snippet(f, a);
  return {activation_name(f), key ? fmt::format("{}={}", key, a) : "", s.n_tmp,
          [body = std::move(s.body)](VecGen& v, const Xmm& y, const Regs& x, const Regs& t) { body(v, y, x[0], t); }};
}
OpSnippet s_relu(const EwImms&) { return act(Activation::RELU, nullptr, 0); }
OpSnippet s_leakyrelu(const EwImms& m) { return act(Activation::LEAKYRELU, "slope", m.f[NNASM_IMM(LEAKYRELU, slope)]); }
OpSnippet s_elu(const EwImms& m) { return act(Activation::ELU, "alpha", m.f[NNASM_IMM(ELU, alpha)]); }
OpSnippet s_clipped_relu(const EwImms& m) {
  return act(Activation::CLIPPED_RELU, "threshold", m.f[NNASM_IMM(CLIPPED_RELU, threshold)]);
}
OpSnippet s_sigmoid(const EwImms&) { return act(Activation::SIGMOID, nullptr, 0); }
OpSnippet s_tanh(const EwImms&) { return act(Activation::TANH, nullptr, 0); }
OpSnippet s_gelu(const EwImms& m) {
  const bool tanh_form = m.i[NNASM_IMM(GELU, approx)] == NNASM_CHOICE(GELU, approx, tanh);
  return act(tanh_form ? Activation::GELU_TANH : Activation::GELU, nullptr, 0);
}
OpSnippet s_swish(const EwImms& m) { return act(Activation::SWISH, "beta", m.f[NNASM_IMM(SWISH, beta)]); }
OpSnippet s_step(const EwImms&) {
  return {"step", "", 2, [](VecGen& v, const Xmm& y, const Regs& x, const Regs& t) {
            const VMask m = v.mask(0, t[0]);
            v.cmp(m, x[0], v.cst(0.f), VecGen::CMP_GE);
            v.g.vmovups(t[1], v.cst(1.f));
            v.keep(y, m, t[1]);
          }};
}

OpSnippet s_erf(const EwImms&) {
  return {"erf", "", vmath::ERF_TMPS,
          [](VecGen& v, const Xmm& y, const Regs& x, const Regs& t) { vmath::erf(v, y, x[0], t); }};
}
// y = f_clamp(x) with bounds lo, hi: tmp = max(lo, x), then y = min(hi, tmp), the bound the first
// operand each time, so vmaxps/vminps return x on NaN and on ties, as f_clamp's compares. y may
// be x; tmp must differ from both.
void emit_clamp(VecGen& v, const Xmm& y, const Xmm& x, float lo, float hi, const Xmm& tmp) {
  v.g.vmovups(tmp, v.cst(lo));
  v.g.vmaxps(tmp, tmp, x);
  v.g.vmovups(y, v.cst(hi));
  v.g.vminps(y, y, tmp);
}
OpSnippet s_clamp(const EwImms& m) {
  const float lo = m.f[0], hi = m.f[1];
  return {"clamp", fmt::format("min={},max={}", lo, hi), 1,
          [lo, hi](VecGen& v, const Xmm& y, const Regs& x, const Regs& t) { emit_clamp(v, y, x[0], lo, hi, t[0]); }};
}

OpSnippet s_reciprocal(const EwImms&) {
  return {"reciprocal", "", 1, [](VecGen& v, const Xmm& y, const Regs& x, const Regs& t) {
            v.g.vmovups(t[0], v.cst(1.f));
            v.g.vdivps(y, t[0], x[0]);
          }};
}
// Rounding to nearest, ties to even (0), toward −inf (1) or +inf (2), the precision exception
// suppressed (8).
OpSnippet rounding(const char* name, uint8_t mode) {
  return {name, "", 0, [mode](VecGen& v, const Xmm& y, const Regs& x, const Regs&) {
            if (v.avx512()) v.g.vrndscaleps(y, x[0], mode | 8);
            else v.g.vroundps(y, x[0], mode | 8);
          }};
}
OpSnippet s_floor(const EwImms&) { return rounding("floor", 1); }
OpSnippet s_ceil(const EwImms&) { return rounding("ceil", 2); }
OpSnippet s_round(const EwImms&) { return rounding("round", 0); }
OpSnippet s_sign(const EwImms&) {
  return {"sign", "", 2, [](VecGen& v, const Xmm& y, const Regs& x, const Regs& t) {
            v.g.vmovaps(t[1], x[0]);
            const VMask m = v.mask(0, t[0]);
            v.cmp(m, x[0], v.cst(0.f), VecGen::CMP_GT);
            v.move_if(t[1], m, v.cst(1.f));
            v.cmp(m, x[0], v.cst(0.f), VecGen::CMP_LT);
            v.move_if(t[1], m, v.cst(-1.f));
            v.g.vmovaps(y, t[1]);
          }};
}
OpSnippet s_softplus(const EwImms&) {
  return {"softplus", "", vmath::SOFTPLUS_TMPS,
          [](VecGen& v, const Xmm& y, const Regs& x, const Regs& t) { vmath::softplus(v, y, x[0], t); }};
}
OpSnippet s_hardsigmoid(const EwImms& m) {
  const float a = m.f[0], b = m.f[1];
  return {"hardsigmoid", fmt::format("alpha={},beta={}", a, b), 2,
          [a, b](VecGen& v, const Xmm& y, const Regs& x, const Regs& t) {
            v.g.vmulps(t[0], x[0], v.cst(a));
            v.g.vaddps(t[0], t[0], v.cst(b));
            emit_clamp(v, y, t[0], 0.f, 1.f, t[1]);
          }};
}
OpSnippet s_hardswish(const EwImms&) {
  return {"hardswish", "", 2, [](VecGen& v, const Xmm& y, const Regs& x, const Regs& t) {
            v.g.vmulps(t[0], x[0], v.cst(SIXTH));
            v.g.vaddps(t[0], t[0], v.cst(0.5f));
            emit_clamp(v, t[0], t[0], 0.f, 1.f, t[1]);
            v.g.vmulps(y, x[0], t[0]);
          }};
}
// ELU's snippet, then ·gamma: the reference's gamma·x and gamma·(alpha·expm1 x).
OpSnippet s_selu(const EwImms& m) {
  const float alpha = m.f[0], gamma = m.f[1];
  ActSnippet elu = act_snippet(Activation::ELU, alpha);
  return {"selu", fmt::format("alpha={},gamma={}", alpha, gamma), elu.n_tmp,
          [gamma, body = std::move(elu.body)](VecGen& v, const Xmm& y, const Regs& x, const Regs& t) {
            body(v, y, x[0], t);
            v.g.vmulps(y, y, v.cst(gamma));
          }};
}

}  // namespace

ELEMENTWISE_OP(unary, 1, SCALE, f_scale, g_scale, s_scale)
ELEMENTWISE_OP(unary, 1, NEG, f_neg, g_neg, s_neg)
ELEMENTWISE_OP(unary, 1, EXP, f_exp, g_exp, s_exp)
ELEMENTWISE_OP(unary, 1, LOG, f_log, g_log, s_log)
ELEMENTWISE_OP(unary, 1, SQRT, f_sqrt, g_sqrt, s_sqrt)
ELEMENTWISE_OP(unary, 1, ABS, f_abs, g_abs, s_abs)
ELEMENTWISE_OP(unary, 1, SQUARE, f_square, g_square, s_square)
ELEMENTWISE_OP(unary, 1, RELU, f_relu, g_act, s_relu)
ELEMENTWISE_OP(unary, 1, LEAKYRELU, f_leakyrelu, g_act, s_leakyrelu)
ELEMENTWISE_OP(unary, 1, ELU, f_elu, g_act, s_elu)
ELEMENTWISE_OP(unary, 1, CLIPPED_RELU, f_clipped_relu, g_act, s_clipped_relu)
ELEMENTWISE_OP(unary, 1, SIGMOID, f_sigmoid, g_act, s_sigmoid)
ELEMENTWISE_OP(unary, 1, TANH, f_tanh, g_act, s_tanh)
ELEMENTWISE_OP(unary, 1, GELU, f_gelu, g_act, s_gelu)
ELEMENTWISE_OP(unary, 1, SWISH, f_swish, g_act, s_swish)
ELEMENTWISE_OP(unary, 1, STEP, f_step, no_gradient, s_step)
ELEMENTWISE_OP(unary, 1, ERF, f_erf, g_erf, s_erf)
ELEMENTWISE_OP(unary, 1, CLAMP, f_clamp, g_clamp, s_clamp)
ELEMENTWISE_OP(unary, 1, RECIPROCAL, f_reciprocal, g_reciprocal, s_reciprocal)
ELEMENTWISE_OP(unary, 1, FLOOR, f_floor, no_gradient, s_floor)
ELEMENTWISE_OP(unary, 1, CEIL, f_ceil, no_gradient, s_ceil)
ELEMENTWISE_OP(unary, 1, ROUND, f_round, no_gradient, s_round)
ELEMENTWISE_OP(unary, 1, SIGN, f_sign, no_gradient, s_sign)
ELEMENTWISE_OP(unary, 1, SOFTPLUS, f_softplus, g_softplus, s_softplus)
ELEMENTWISE_OP(unary, 1, HARDSIGMOID, f_hardsigmoid, g_hardsigmoid, s_hardsigmoid)
ELEMENTWISE_OP(unary, 1, HARDSWISH, f_hardswish, g_hardswish, s_hardswish)
ELEMENTWISE_OP(unary, 1, SELU, f_selu, g_selu, s_selu)

}  // namespace nnasm
