// The binary elementwise family, with numpy broadcasting of trailing dimensions.
//
// Computes   y = f(a, b) elementwise:
//   ADD [alpha, beta]  alpha·a + beta·b      SUB      a − b
//   MUL                a·b                   DIV      a / b (IEEE: ±inf or NaN on 0)
//   MAXIMUM            max(a, b)             MINIMUM  min(a, b)
//   POW                a^b as std::pow (C's powf: pow(x, ±0) = 1 and pow(1, y) = 1 even for NaN,
//                      a negative a gives NaN unless b is a whole number, pow(±0, b < 0) = ±inf)
//   PRELU              a > 0 ? a : b·a (a: x, b: the slope, broadcast; ONNX PRelu, nn.PReLU)
//   EQUAL, LESS, LESS_EQUAL, GREATER, GREATER_EQUAL
//                      1 where a = b, a < b, a ≤ b, a > b, a ≥ b, else 0 (f32 masks that compose with
//                      MUL and WHERE; any NaN compares false, so EQUAL(NaN, NaN) = 0; −0 = +0)
// Inputs     a, b: f32; shapes broadcast numpy-style (trailing dimensions aligned; a dimension
//            of 1, or a missing one, stretches).
// Outputs    y: f32, the broadcast shape.
// Gradient   ADD: alpha·dy, beta·dy. SUB: dy, −dy. MUL: dy·b, dy·a. DIV: dy/b, −(dy/b)·y.
//            MAXIMUM/MINIMUM: dy goes to the winning side (to a on ties), by a STEP mask.
//            POW, as PyTorch: da = dy·b·a^(b−1), 0 where b = 0; db = dy·y·ln a, 0 where a = 0 and
//            b ≥ 0 (so NaN for a < 0); both from POW, LOG, MUL, STEP and WHERE.
//            PRELU, as PyTorch: dx = dy where x > 0, dy·slope elsewhere; dslope = dy·x where
//            x ≤ 0, 0 elsewhere (GREATER, MUL and WHERE). Comparisons: zero (piecewise constant).
//            Each gradient is summed over the dimensions its input was broadcast along.
// Kernels    reference loop here. JIT (jit/elementwise.h), bitwise equal to the reference:
//            f32_<op>__avx2 / __avx512 for equal shapes, and the broadcast cases neural nets make:
//            one side a single element (_ascalar/_bscalar), a bias row ([n] with [m, n]: _arow/
//            _brow), a per-row value ([m, 1] with [m, n]: _acol/_bcol). Other broadcasts run the
//            reference. Each op is one ElementwiseOp (elementwise_op.h), which CALC composes.
//            POW has no generated kernel and is no CALC building block: a vectorized pow within a
//            few ulp needs ln a in more than float precision (the error of b·ln a is amplified by
//            up to |b·ln a| ≈ 89 in the result), which vmath does not have. What real models
//            raise to a power is a constant (x², x³, √x): the pow-reduce pass
//            (engine/passes/pow_reduce.cpp) turns those into SQUARE, CALC, SQRT and
//            RECIPROCAL, which have kernels; other POWs run the reference loop.
// Notes      MAXIMUM/MINIMUM propagate NaN from either side (as numpy.maximum, torch.maximum).
#include <cmath>

#include "ops/elementwise/broadcast.h"
#include "ops/elementwise/elementwise_op.h"

namespace nnasm {
namespace {

struct Params {
  float alpha = 1, beta = 1;
};

float f_add(float a, float b, Params p) { return p.alpha * a + p.beta * b; }
float f_sub(float a, float b, Params) { return a - b; }
float f_mul(float a, float b, Params) { return a * b; }
float f_div(float a, float b, Params) { return a / b; }
float f_maximum(float a, float b, Params) { return std::isnan(a) || std::isnan(b) ? NAN : (a > b ? a : b); }
float f_minimum(float a, float b, Params) { return std::isnan(a) || std::isnan(b) ? NAN : (a < b ? a : b); }
float f_pow(float a, float b, Params) { return std::pow(a, b); }
float f_prelu(float a, float b, Params) { return a > 0 ? a : b * a; }
float f_equal(float a, float b, Params) { return a == b ? 1.f : 0.f; }
float f_less(float a, float b, Params) { return a < b ? 1.f : 0.f; }
float f_less_equal(float a, float b, Params) { return a <= b ? 1.f : 0.f; }
float f_greater(float a, float b, Params) { return a > b ? 1.f : 0.f; }
float f_greater_equal(float a, float b, Params) { return a >= b ? 1.f : 0.f; }

// Only ADD has immediates (alpha, beta); the other functions ignore theirs.
Params params(const EwImms& m) { return Params{m.f[NNASM_IMM(ADD, alpha)], m.f[NNASM_IMM(ADD, beta)]}; }

template <float (*F)(float, float, Params)>
void binary_block(const float* const* x, float* y, int64_t n, const EwImms& m) {
  const Params p = params(m);
  const float* a = x[0];  // no __restrict: y may be a or b (in place, ops/op.h)
  const float* b = x[1];
  for (int64_t j = 0; j < n; ++j) y[j] = F(a[j], b[j], p);
}

template <float (*F)(float, float, Params)>
void binary_ref(const KernelArgs* k) {
  const float* a = static_cast<const float*>(k->in[0]);
  const float* b = static_cast<const float*>(k->in[1]);
  float* y = static_cast<float*>(k->out[0]);
  const Params p = params(ew_imms(k->ins->imm));
  // Unit-stride and stride-0 rows get loops of their own so the compiler vectorizes them. No
  // __restrict: y may be a or b (in place, ops/op.h); g++ versions the loops on a runtime overlap
  // check that lets an exact alias take the vector loop too.
  BroadcastWalk(k->out_type[0].shape, k->in_type[0].shape, k->in_type[1].shape)
      .for_each_row([&](int64_t o, int64_t oa, int64_t ob, int64_t n, int64_t sa, int64_t sb) {
        float* yr = y + o;
        const float* ar = a + oa;
        const float* br = b + ob;
        if (sa == 1 && sb == 1) {
          for (int64_t j = 0; j < n; ++j) yr[j] = F(ar[j], br[j], p);
        } else if (sa == 1 && sb == 0) {
          const float bv = *br;
          for (int64_t j = 0; j < n; ++j) yr[j] = F(ar[j], bv, p);
        } else if (sa == 0 && sb == 1) {
          const float av = *ar;
          for (int64_t j = 0; j < n; ++j) yr[j] = F(av, br[j], p);
        } else {
          for (int64_t j = 0; j < n; ++j) yr[j] = F(ar[j * sa], br[j * sb], p);
        }
      });
}

Status binary_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(require_f32(ins, in));
  Shape s;
  if (!broadcast_shapes(in[0].shape, in[1].shape, &s))
    return Status::errorf("{}: {} does not broadcast with {}", ins.info().mnemonic, operand_str(ins, 0, in[0]),
                          operand_str(ins, 1, in[1]));
  (*out)[0] = TensorType{DType::F32, s};
  return Status::ok();
}

// ---- gradients: each computed at the output's shape, then summed back to the input's ----
using Dy = const std::vector<TensorId>&;
using Need = const std::vector<bool>&;
using Dx = std::vector<TensorId>*;

Status reduce_back(GradBuilder& b, const Instruction& ins, Need need, TensorId da, TensorId db, Dx dx) {
  if (need[0]) (*dx)[0] = b.sum_to(da, b.type(ins.in[0]).shape);
  if (need[1]) (*dx)[1] = b.sum_to(db, b.type(ins.in[1]).shape);
  return b.status();
}

Status g_add(GradBuilder& b, const Instruction& ins, Dy dy, Need need, Dx dx) {
  return reduce_back(b, ins, need, need[0] ? b.scale(dy[0], ins.f(NNASM_IMM(ADD, alpha))) : NO_TENSOR,
                     need[1] ? b.scale(dy[0], ins.f(NNASM_IMM(ADD, beta))) : NO_TENSOR, dx);
}
Status g_sub(GradBuilder& b, const Instruction& ins, Dy dy, Need need, Dx dx) {
  return reduce_back(b, ins, need, dy[0], need[1] ? b.emit(Opcode::NEG, {dy[0]}) : NO_TENSOR, dx);
}
Status g_mul(GradBuilder& b, const Instruction& ins, Dy dy, Need need, Dx dx) {
  return reduce_back(b, ins, need, need[0] ? b.emit(Opcode::MUL, {dy[0], ins.in[1]}) : NO_TENSOR,
                     need[1] ? b.emit(Opcode::MUL, {dy[0], ins.in[0]}) : NO_TENSOR, dx);
}
Status g_div(GradBuilder& b, const Instruction& ins, Dy dy, Need need, Dx dx) {
  const TensorId q = b.emit(Opcode::DIV, {dy[0], ins.in[1]});
  return reduce_back(b, ins, need, q, need[1] ? b.emit(Opcode::NEG, {b.emit(Opcode::MUL, {q, ins.out[0]})}) : NO_TENSOR,
                     dx);
}
// mask = 1 where a wins: STEP(a − b) for MAXIMUM, STEP(b − a) for MINIMUM.
template <bool MAX>
Status g_extremum(GradBuilder& b, const Instruction& ins, Dy dy, Need need, Dx dx) {
  const TensorId diff = MAX ? b.emit(Opcode::SUB, {ins.in[0], ins.in[1]}) : b.emit(Opcode::SUB, {ins.in[1], ins.in[0]});
  const TensorId da = b.emit(Opcode::MUL, {dy[0], b.emit(Opcode::STEP, {diff})});
  return reduce_back(b, ins, need, da, need[1] ? b.emit(Opcode::SUB, {dy[0], da}) : NO_TENSOR, dx);
}

Status g_pow(GradBuilder& b, const Instruction& ins, Dy dy, Need need, Dx dx) {
  const TensorId a = ins.in[0], e = ins.in[1], zero = b.constant(0.f);
  TensorId da = NO_TENSOR, db = NO_TENSOR;
  if (need[0]) {
    const TensorId e1 = b.emit(Opcode::ADD, {e, b.constant(1.f)}, {{"beta", imm_f(-1)}});
    const TensorId d = b.emit(Opcode::MUL, {e, b.emit(Opcode::POW, {a, e1})});
    da = b.emit(Opcode::MUL, {dy[0], b.emit(Opcode::WHERE, {e, d, zero})});  // 0 where b = 0
  }
  if (need[1]) {
    const TensorId u = b.emit(Opcode::MUL, {ins.out[0], b.emit(Opcode::LOG, {a})});
    // 0 where a = 0 and b ≥ 0 (STEP(b) = 1), where y·ln a would be 0·(−inf) or 1·(−inf).
    const TensorId at_zero = b.emit(Opcode::WHERE, {b.emit(Opcode::STEP, {e}), zero, u});
    db = b.emit(Opcode::MUL, {dy[0], b.emit(Opcode::WHERE, {a, u, at_zero})});
  }
  return reduce_back(b, ins, need, da, db, dx);
}

Status g_prelu(GradBuilder& b, const Instruction& ins, Dy dy, Need need, Dx dx) {
  const TensorId x = ins.in[0], zero = b.constant(0.f);
  const TensorId pos = b.emit(Opcode::GREATER, {x, zero});
  return reduce_back(b, ins, need, need[0] ? b.emit(Opcode::WHERE, {pos, dy[0], b.emit(Opcode::MUL, {dy[0], ins.in[1]})}) : NO_TENSOR,
                     need[1] ? b.emit(Opcode::WHERE, {pos, zero, b.emit(Opcode::MUL, {dy[0], x})}) : NO_TENSOR, dx);
}

// ---- JIT snippets: y = f(a, b) with a = s[0], b = s[1] (see jit/elementwise.h) ----
using Xbyak::Xmm;
using Regs = std::vector<Xmm>;

OpSnippet s_add(const EwImms& m) {
  const float alpha = m.f[NNASM_IMM(ADD, alpha)], beta = m.f[NNASM_IMM(ADD, beta)];
  // The reference's alpha·a + beta·b; a product by 1 is exact, so it is left out.
  return {"add", fmt::format("alpha={},beta={}", alpha, beta), 2,
          [alpha, beta](VecGen& v, const Xmm& y, const Regs& s, const Regs& t) {
            Xmm a = s[0], b = s[1];
            if (alpha != 1.f) {
              v.g.vmulps(t[0], a, v.cst(alpha));
              a = t[0];
            }
            if (beta != 1.f) {
              v.g.vmulps(t[1], b, v.cst(beta));
              b = t[1];
            }
            v.g.vaddps(y, a, b);
          }};
}
OpSnippet s_sub(const EwImms&) {
  return {"sub", "", 0, [](VecGen& v, const Xmm& y, const Regs& s, const Regs&) { v.g.vsubps(y, s[0], s[1]); }};
}
OpSnippet s_mul(const EwImms&) {
  return {"mul", "", 0, [](VecGen& v, const Xmm& y, const Regs& s, const Regs&) { v.g.vmulps(y, s[0], s[1]); }};
}
OpSnippet s_div(const EwImms&) {
  return {"div", "", 0, [](VecGen& v, const Xmm& y, const Regs& s, const Regs&) { v.g.vdivps(y, s[0], s[1]); }};
}
// vmaxps/vminps give (a > b ? a : b) / (a < b ? a : b), b when either is NaN: the reference's
// choice except for a NaN a, put back by a blend.
template <bool MAX>
OpSnippet s_extremum(const EwImms&) {
  return {MAX ? "maximum" : "minimum", "", 2, [](VecGen& v, const Xmm& y, const Regs& s, const Regs& t) {
            if (MAX) v.g.vmaxps(t[0], s[0], s[1]);
            else v.g.vminps(t[0], s[0], s[1]);
            const VMask nan = v.mask(0, t[1]);
            v.cmp(nan, s[0], s[0], VecGen::CMP_UNORD);
            v.blend(y, nan, t[0], s[0]);
          }};
}

// leakyrelu's snippet with the slope from a register: b·a, kept where a ≤ 0 (or NaN).
OpSnippet s_prelu(const EwImms&) {
  return {"prelu", "", 2, [](VecGen& v, const Xmm& y, const Regs& s, const Regs& t) {
            v.g.vmulps(t[0], s[1], s[0]);
            const VMask pos = v.mask(0, t[1]);
            v.cmp(pos, s[0], v.cst(0.f), VecGen::CMP_GT);
            v.blend(y, pos, t[0], s[0]);
          }};
}
// 1 where the ordered compare holds (false on NaN, as the reference's), +0 elsewhere.
OpSnippet compare(const char* name, int pred) {
  return {name, "", 2, [pred](VecGen& v, const Xmm& y, const Regs& s, const Regs& t) {
            const VMask m = v.mask(0, t[0]);
            v.cmp(m, s[0], s[1], pred);
            v.g.vmovups(t[1], v.cst(1.f));
            v.keep(y, m, t[1]);
          }};
}
OpSnippet s_equal(const EwImms&) { return compare("equal", VecGen::CMP_EQ); }
OpSnippet s_less(const EwImms&) { return compare("less", VecGen::CMP_LT); }
OpSnippet s_less_equal(const EwImms&) { return compare("less_equal", VecGen::CMP_LE); }
OpSnippet s_greater(const EwImms&) { return compare("greater", VecGen::CMP_GT); }
OpSnippet s_greater_equal(const EwImms&) { return compare("greater_equal", VecGen::CMP_GE); }

}  // namespace

ELEMENTWISE_OP(binary, 2, ADD, f_add, g_add, s_add)
ELEMENTWISE_OP(binary, 2, SUB, f_sub, g_sub, s_sub)
ELEMENTWISE_OP(binary, 2, MUL, f_mul, g_mul, s_mul)
ELEMENTWISE_OP(binary, 2, DIV, f_div, g_div, s_div)
ELEMENTWISE_OP(binary, 2, MAXIMUM, f_maximum, g_extremum<true>, s_extremum<true>)
ELEMENTWISE_OP(binary, 2, MINIMUM, f_minimum, g_extremum<false>, s_extremum<false>)
OpHooks op_hooks_POW() { return {binary_shape, binary_ref<f_pow>, nullptr, g_pow}; }
ELEMENTWISE_OP(binary, 2, PRELU, f_prelu, g_prelu, s_prelu)
ELEMENTWISE_OP(binary, 2, EQUAL, f_equal, no_gradient, s_equal)
ELEMENTWISE_OP(binary, 2, LESS, f_less, no_gradient, s_less)
ELEMENTWISE_OP(binary, 2, LESS_EQUAL, f_less_equal, no_gradient, s_less_equal)
ELEMENTWISE_OP(binary, 2, GREATER, f_greater, no_gradient, s_greater)
ELEMENTWISE_OP(binary, 2, GREATER_EQUAL, f_greater_equal, no_gradient, s_greater_equal)

}  // namespace nnasm
