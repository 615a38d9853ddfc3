// ACT_BWD: the backward of an activation (or ABS), fused into one pass: dx = dy · f'(x).
//
// Computes   dx[i] = dy[i] · f'(x[i]) for fn =
//   relu          x > 0 ? 1 : 0                  leakyrelu  x > 0 ? 1 : alpha
//   elu           x > 0 ? 1 : alpha·e^x          clipped_relu  0 < x < alpha ? 1 : 0
//   sigmoid       s(1 − s), s = sigmoid(x)       tanh       1 − tanh²x
//   gelu          Φ(x) + x·φ(x)                  gelu_tanh  derivative of the tanh form
//   swish         s + alpha·x·s(1 − s), s = sigmoid(alpha·x)
//   abs           sign(x) (0 at 0)
// Inputs     dy: f32; x: f32 of dy's shape (the activation's input).
// Outputs    dx: f32, dy's shape.
// Immediates fn: enum, required; alpha: f32, the activation's own immediate (slope, alpha,
//            threshold, beta), default 0.
// Gradient   none (no second derivatives): autodiff reports it by name.
// Kernels    reference loop; JIT: one snippet per fn for the shared elementwise generator,
//            f32_act_bwd_<fn>__avx2 / __avx512. relu, leakyrelu, clipped_relu and abs are bitwise
//            equal to the reference; the others use jit/vmath.h (gelu_tanh as
//            s + x·s(1 − s)·(2k + 6kc·x²) with s = sigmoid(2u), the same derivative without the
//            cancellation of 1 − tanh²), within the tolerances of tests/jit_elementwise_test.cpp.
//            One ElementwiseOp (elementwise_op.h): CALC calls it as act_bwd(dy, x, fn=..., alpha=...).
// Notes      at a kink the derivative is the left/zero one, as PyTorch: relu'(0) = 0.
//            A fused op pays here: the composition from forward ops takes 3–6 passes.
#include <cfloat>
#include <cmath>

#include "isa/activation.h"
#include "jit/vmath.h"
#include "ops/elementwise/activation.h"
#include "ops/elementwise/elementwise_op.h"

namespace nnasm {
namespace {

constexpr int FN = NNASM_IMM(ACT_BWD, fn), ALPHA = NNASM_IMM(ACT_BWD, alpha);
// The `fn` choices: the activations of isa/activations.def (fn = act − 1), then abs.
enum class Act {
#define NNASM_ACT_FN_ENUM(NAME, name, OP, alpha, select) NAME,
  NNASM_ACTIVATIONS(NNASM_ACT_FN_ENUM)
#undef NNASM_ACT_FN_ENUM
  ABS
};
static_assert(static_cast<int>(Act::ABS) == NNASM_CHOICE(ACT_BWD, fn, abs));
// derivative() and act_jit() have a case per activation: a new row needs both.
static_assert(ACTIVATION_COUNT == 10, "add the new activation's derivative and its JIT snippet here");

using act::sigmoid;

template <Act A>
float derivative(float x, float a) {
  switch (A) {
    case Act::RELU: return x > 0 ? 1.f : 0.f;
    case Act::LEAKYRELU: return x > 0 ? 1.f : a;
    case Act::ELU: return x > 0 ? 1.f : a * std::exp(x);
    case Act::CLIPPED_RELU: return x > 0 && x < a ? 1.f : 0.f;
    case Act::SIGMOID: {
      const float s = sigmoid(x);
      return s * (1 - s);
    }
    case Act::TANH: {
      const float t = std::tanh(x);
      return 1 - t * t;
    }
    case Act::GELU: {
      const float cdf = 0.5f * (1.f + std::erf(x * 0.7071067811865476f));
      const float pdf = 0.3989422804014327f * std::exp(-0.5f * x * x);
      return cdf + x * pdf;
    }
    case Act::GELU_TANH: {
      const float k = 0.7978845608028654f, c = 0.044715f;
      const float t = std::tanh(k * (x + c * x * x * x));
      return 0.5f * (1 + t) + 0.5f * x * (1 - t * t) * k * (1 + 3 * c * x * x);
    }
    case Act::SWISH: {
      const float s = sigmoid(a * x);
      return s + a * x * s * (1 - s);
    }
    case Act::ABS: return x > 0 ? 1.f : (x < 0 ? -1.f : 0.f);
  }
  return 0;
}

template <Act A>
void run(const float* dy, const float* x, float* dx, int64_t n, float a) {
  for (int64_t i = 0; i < n; ++i) dx[i] = std::isnan(x[i]) ? x[i] : dy[i] * derivative<A>(x[i], a);
}

void act_bwd_block(const float* const* in, float* dx, int64_t n, const EwImms& m) {
  const float *dy = in[0], *x = in[1];
  const float a = m.f[ALPHA];
  switch (static_cast<Act>(m.i[FN])) {
#define NNASM_ACT_FN_RUN(NAME, name, OP, alpha, select) \
  case Act::NAME: return run<Act::NAME>(dy, x, dx, n, a);
    NNASM_ACTIVATIONS(NNASM_ACT_FN_RUN)
#undef NNASM_ACT_FN_RUN
    case Act::ABS: return run<Act::ABS>(dy, x, dx, n, a);
  }
}

void act_bwd_ref(const KernelArgs* k) {
  const float* in[2] = {static_cast<const float*>(k->in[0]), static_cast<const float*>(k->in[1])};
  act_bwd_block(in, static_cast<float*>(k->out[0]), k->out_type[0].shape.numel(), ew_imms(k->ins->imm));
}

Status act_bwd_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(require_f32(ins, in));
  if (in[0].shape != in[1].shape)
    return Status::errorf("ACT_BWD: {} and {} must have one shape", operand_str(ins, 0, in[0]), operand_str(ins, 1, in[1]));
  (*out)[0] = in[0];
  return Status::ok();
}

// ---- JIT: dx = dy·f'(x), dy = s[0], x = s[1]; dx may be dy's register, so it is written last ----
using Xbyak::Xmm;
using Regs = std::vector<Xmm>;

// dx = isnan(x) ? x : dy·d, for the derivatives made of compares (which lose x's NaN).
void times_dy_keep_nan(VecGen& v, const Xmm& dx, const Regs& s, const Xmm& d, const Xmm& mask_tmp) {
  v.g.vmulps(d, s[0], d);
  const VMask nan = v.mask(1, mask_tmp);
  v.cmp(nan, s[1], s[1], VecGen::CMP_UNORD);
  v.blend(dx, nan, d, s[1]);
}

// d = 1 where lo < x (and x < hi, if given), else 0.
void indicator(VecGen& v, const Xmm& d, const Xmm& x, float lo, const float* hi, const Regs& t) {
  const VMask m = v.mask(0, t[0]);
  v.cmp(m, x, v.cst(lo), VecGen::CMP_GT);
  if (hi) {
    if (v.avx512()) {
      v.g.vcmpps(m.k | m.k, x, v.cst(*hi), VecGen::CMP_LT);
    } else {
      v.g.vcmpps(t[1], x, v.cst(*hi), VecGen::CMP_LT);
      v.g.vandps(t[0], t[0], t[1]);
    }
  }
  v.g.vmovups(d, v.cst(1.f));
  v.keep(d, m, d);
}

struct ActJit {
  int n_tmp;
  Snippet body;
};

ActJit act_jit(Act fn, float a) {
  switch (fn) {
    case Act::RELU:
      return {3, [](VecGen& v, const Xmm& dx, const Regs& s, const Regs& t) {
                indicator(v, t[2], s[1], 0.f, nullptr, t);
                times_dy_keep_nan(v, dx, s, t[2], t[0]);
              }};
    case Act::LEAKYRELU:
      return {2, [a](VecGen& v, const Xmm& dx, const Regs& s, const Regs& t) {
                const VMask pos = v.mask(0, t[0]);
                v.cmp(pos, s[1], v.cst(0.f), VecGen::CMP_GT);
                v.g.vmovups(t[1], v.cst(a));
                v.move_if(t[1], pos, v.cst(1.f));
                times_dy_keep_nan(v, dx, s, t[1], t[0]);
              }};
    case Act::ELU:
      return {4, [a](VecGen& v, const Xmm& dx, const Regs& s, const Regs& t) {
                vmath::exp(v, t[1], s[1], {t[2], t[3]});  // NaN x gives NaN here
                v.g.vmulps(t[1], t[1], v.cst(a));
                const VMask pos = v.mask(0, t[0]);
                v.cmp(pos, s[1], v.cst(0.f), VecGen::CMP_GT);
                v.move_if(t[1], pos, v.cst(1.f));
                v.g.vmulps(dx, s[0], t[1]);
              }};
    case Act::CLIPPED_RELU:
      return {3, [a](VecGen& v, const Xmm& dx, const Regs& s, const Regs& t) {
                indicator(v, t[2], s[1], 0.f, &a, t);
                times_dy_keep_nan(v, dx, s, t[2], t[0]);
              }};
    case Act::SIGMOID:
      return {1 + vmath::SIGMOID_TMPS, [](VecGen& v, const Xmm& dx, const Regs& s, const Regs& t) {
                vmath::sigmoid(v, t[0], s[1], {t[1], t[2], t[3]});
                v.g.vmovups(t[1], v.cst(1.f));
                v.g.vsubps(t[1], t[1], t[0]);
                v.g.vmulps(t[0], t[0], t[1]);
                v.g.vmulps(dx, s[0], t[0]);
              }};
    case Act::TANH:
      return {1 + vmath::TANH_TMPS, [](VecGen& v, const Xmm& dx, const Regs& s, const Regs& t) {
                vmath::tanh(v, t[0], s[1], {t[1], t[2], t[3], t[4]});
                v.g.vmovups(t[1], v.cst(1.f));
                v.g.vfnmadd231ps(t[1], t[0], t[0]);
                v.g.vmulps(dx, s[0], t[1]);
              }};
    case Act::GELU:
      // Φ(x) + x·φ(x); φ from e^(−x²/2) with x² split exactly (as in vmath::normal_cdf).
      return {6, [](VecGen& v, const Xmm& dx, const Regs& s, const Regs& t) {
                vmath::normal_cdf(v, t[0], s[1], {t[1], t[2], t[3], t[4], t[5]});
                v.g.vmaxps(t[1], s[1], v.cst(-15.f));  // beyond, φ underflows; no inf·0
                v.g.vminps(t[1], t[1], v.cst(15.f));
                v.g.vmulps(t[2], t[1], t[1]);
                v.g.vmovaps(t[3], t[2]);
                v.g.vfmsub231ps(t[3], t[1], t[1]);
                v.g.vmulps(t[2], t[2], v.cst(-0.5f));
                v.g.vmulps(t[3], t[3], v.cst(-0.5f));
                vmath::exp_sum(v, t[2], t[2], t[3], {t[4], t[5]});
                v.g.vmulps(t[2], t[2], v.cst(0.3989422804014327f));
                v.g.vfmadd231ps(t[0], t[1], t[2]);
                v.g.vmulps(dx, s[0], t[0]);
              }};
    case Act::GELU_TANH:
      return {5, [](VecGen& v, const Xmm& dx, const Regs& s, const Regs& t) {
                const double k = vmath::GELU_TANH_K, c = vmath::GELU_TANH_C;
                const Xmm& x = s[1];
                v.g.vmulps(t[0], x, x);
                v.g.vmovups(t[1], v.cst(static_cast<float>(2 * k)));
                v.g.vfmadd231ps(t[1], t[0], v.cst(static_cast<float>(2 * k * c)));
                v.g.vmulps(t[1], t[1], x);  // 2u
                vmath::sigmoid(v, t[1], t[1], {t[2], t[3], t[4]});
                // x clamped so that x², x·0 stay finite where s(1 − s) is 0; s carries a NaN x.
                v.g.vmaxps(t[0], x, v.cst(-1e4f));
                v.g.vminps(t[0], t[0], v.cst(1e4f));
                v.g.vmovups(t[2], v.cst(1.f));
                v.g.vsubps(t[2], t[2], t[1]);
                v.g.vmulps(t[2], t[2], t[1]);
                v.g.vmulps(t[3], t[0], t[0]);
                v.g.vmovups(t[4], v.cst(static_cast<float>(2 * k)));
                v.g.vfmadd231ps(t[4], t[3], v.cst(static_cast<float>(6 * k * c)));
                v.g.vmulps(t[2], t[2], t[4]);
                v.g.vfmadd231ps(t[1], t[0], t[2]);
                v.g.vmulps(dx, s[0], t[1]);
              }};
    case Act::SWISH:
      return {2 + vmath::SIGMOID_TMPS, [a](VecGen& v, const Xmm& dx, const Regs& s, const Regs& t) {
                v.g.vmulps(t[1], s[1], v.cst(a));
                vmath::sigmoid(v, t[1], t[1], {t[2], t[3], t[4]});
                v.g.vmulps(t[0], s[1], v.cst(a));
                v.g.vmaxps(t[0], t[0], v.cst(-FLT_MAX));  // a·x = ±inf: s(1 − s) = 0, no inf·0
                v.g.vminps(t[0], t[0], v.cst(FLT_MAX));
                v.g.vmovups(t[2], v.cst(1.f));
                v.g.vsubps(t[2], t[2], t[1]);
                v.g.vmulps(t[2], t[2], t[1]);
                v.g.vfmadd231ps(t[1], t[0], t[2]);
                v.g.vmulps(dx, s[0], t[1]);
              }};
    case Act::ABS:
      // ±1 by x's sign, 0 at ±0.
      return {2, [](VecGen& v, const Xmm& dx, const Regs& s, const Regs& t) {
                v.g.vandps(t[1], s[1], v.cst_bits(0x80000000u));
                v.g.vorps(t[1], t[1], v.cst(1.f));
                const VMask nz = v.mask(0, t[0]);
                v.cmp(nz, s[1], v.cst(0.f), VecGen::CMP_NEQ_UQ);
                v.keep(t[1], nz, t[1]);
                times_dy_keep_nan(v, dx, s, t[1], t[0]);
              }};
  }
  return {0, nullptr};
}

const std::string& act_name(Act fn) { return op_info(Opcode::ACT_BWD).imms[FN].choices[static_cast<int>(fn)]; }

OpSnippet act_bwd_snippet(const EwImms& m) {
  const Act fn = static_cast<Act>(m.i[FN]);
  const float a = m.f[ALPHA];
  ActJit j = act_jit(fn, a);
  return {fmt::format("act_bwd_{}", act_name(fn)), fmt::format("alpha={}", a), j.n_tmp, std::move(j.body)};
}

}  // namespace

OpHooks op_hooks_ACT_BWD() {
  static const ElementwiseOp e{2, act_bwd_block, act_bwd_snippet};
  return {act_bwd_shape, act_bwd_ref, nullptr, nullptr, binary_op_jit<act_bwd_snippet>, binary_parts, &e};
}

}  // namespace nnasm
