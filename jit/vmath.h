// Vectorized math as in-register snippets for AVX2 and AVX-512: exp, expm1, log, tanh, sigmoid,
// the normal CDF, erf, softplus and the two GELU forms. Each function emits code that computes dst = f(x) for
// every lane, using only the scratch registers it is given; kernels (jit/elementwise.h)
// paste them into their loops.
//
// Contract of every function here:
//   - dst may be x; x is read before dst is written. The registers in `t` (at least the
//     function's *_TMPS of them) are clobbered; they must differ from dst and x. On AVX-512
//     opmask k2 is clobbered as well (never k1, the tail mask).
//   - Special values: NaN in gives NaN out; ±inf, ±0 and denormals give the limits stated per
//     function; no input faults or traps (MXCSR's default masked exceptions, DAZ/FTZ off).
//   - Deterministic: the same code on the same ISA gives the same bits.
//   - Error bounds (*_MAX_ULP) hold for every float input; tests/vmath_test.cpp checks them against
//     double-precision results (dense sweeps, random bit patterns, special values) on both ISAs.
//     An ulp is the spacing of floats at the exact result (2^-149 in the denormal range). Measured
//     maxima over 2^25 sweep points (both ISAs give the same bits for these inputs): exp 0.95,
//     expm1 1.63, log 0.95, tanh 1.35, sigmoid 2.31, normal_cdf 5.47, gelu 5.53, gelu_tanh
//     1.63 + 3·|2u| ulp; erf 2.45 and softplus 2.56 (tests/vmath_test.cpp's sweep and random
//     bit patterns). The bounds below leave a margin over those.
#pragma once
#include <vector>

#include <xbyak/xbyak.h>

#include "jit/vecgen.h"

namespace nnasm::vmath {

using Regs = std::vector<Xbyak::Xmm>;

// e^x. exp(−inf) = +0, exp(+inf) = +inf, x > 88.72: +inf; x < −103.97: +0; results in the
// denormal range are rounded once (AVX-512 vscalefps; AVX2 scales by two powers of two).
constexpr int EXP_TMPS = 2;
constexpr double EXP_MAX_ULP = 1.5;
void exp(VecGen& v, const Xbyak::Xmm& dst, const Xbyak::Xmm& x, const Regs& t);

// e^(a+b) for a correction b small next to a: a is reduced exactly and b added to the reduced
// argument, so the rounding of a+b costs nothing (used where a = −x²/2 is exact only as a sum).
// b is clobbered; dst may be a.
constexpr int EXP_SUM_TMPS = 2;
void exp_sum(VecGen& v, const Xbyak::Xmm& dst, const Xbyak::Xmm& a, const Xbyak::Xmm& b, const Regs& t);

// e^x − 1, accurate near 0 (no cancellation). expm1(−inf) = −1, expm1(+inf) = +inf.
constexpr int EXPM1_TMPS = 4;
constexpr double EXPM1_MAX_ULP = 2.5;
void expm1(VecGen& v, const Xbyak::Xmm& dst, const Xbyak::Xmm& x, const Regs& t);

// ln x. log(±0) = −inf, log(x < 0) = NaN, log(−inf) = NaN, log(+inf) = +inf, log(1) = +0;
// denormals are exact inputs (their true exponent is used).
constexpr int LOG_TMPS = 3;
constexpr double LOG_MAX_ULP = 1.5;
void log(VecGen& v, const Xbyak::Xmm& dst, const Xbyak::Xmm& x, const Regs& t);

// tanh x: an odd polynomial for |x| < 0.625, 1 − 2/(e^{2|x|} + 1) with x's sign above; saturates
// to ±1 exactly (|x| ≥ 9.1), tanh(±0) = ±0, tanh(±inf) = ±1.
constexpr int TANH_TMPS = 4;
constexpr double TANH_MAX_ULP = 2;
void tanh(VecGen& v, const Xbyak::Xmm& dst, const Xbyak::Xmm& x, const Regs& t);

// 1/(1 + e^−x), from e = e^−|x| as 1/(1+e) or e/(1+e), so both tails keep their relative
// accuracy (sigmoid(−100) is the denormal 3.7e−44, not 0). sigmoid(+inf) = 1, sigmoid(−inf) = 0.
constexpr int SIGMOID_TMPS = 3;
constexpr double SIGMOID_MAX_ULP = 3;
void sigmoid(VecGen& v, const Xbyak::Xmm& dst, const Xbyak::Xmm& x, const Regs& t);

// Φ(x) = ½ erfc(−x/√2), the standard normal CDF: erfc(z) = t·e^(−z² + P(t)), t = 1/(1 + z/2)
// (a degree-10 fit), so the lower tail keeps its relative accuracy down to the underflow.
// Φ(−inf) = 0, Φ(+inf) = 1.
constexpr int NORMAL_CDF_TMPS = 5;
constexpr double NORMAL_CDF_MAX_ULP = 6;
void normal_cdf(VecGen& v, const Xbyak::Xmm& dst, const Xbyak::Xmm& x, const Regs& t);

// GELU, erf form: x·Φ(x); for x < 0 the factor x enters before the final scaling by 2^n, never
// through a Φ(x) of its own (so results in the denormal range keep their bits). gelu(−inf) = −0 (the limit; x·Φ(x) read literally gives NaN), gelu(+inf) = +inf.
constexpr int GELU_TMPS = 5;
constexpr double GELU_MAX_ULP = 6;
void gelu(VecGen& v, const Xbyak::Xmm& dst, const Xbyak::Xmm& x, const Regs& t);

// GELU, tanh form: ½x(1 + tanh u), u = √(2/π)(x + 0.044715x³), computed as x·sigmoid(2u) (the
// same function without the cancellation of 1 + tanh u for x ≪ 0). Limits as gelu. For x < 0
// the rounding of 2u in float (about 1.5 ulp of it) is amplified by |2u| in the result, so the
// bound is GELU_TANH_MAX_ULP + GELU_TANH_ULP_PER_2U·|2u| ulp.
constexpr int GELU_TANH_TMPS = 6;
constexpr double GELU_TANH_MAX_ULP = 4;
constexpr double GELU_TANH_ULP_PER_2U = 3;
void gelu_tanh(VecGen& v, const Xbyak::Xmm& dst, const Xbyak::Xmm& x, const Regs& t);

// erf x: x·P(x²) (Taylor's series to x^13) for |x| < 0.5, else 1 − erfc(|x|) with x's sign, erfc
// as normal_cdf's (of x·√2). erf(±0) = ±0, erf(±inf) = ±1; saturates to ±1 exactly beyond
// |x| ≈ 3.92; denormals go through the series (x·2/√π, rounded once).
constexpr int ERF_TMPS = 6;
constexpr double ERF_MAX_ULP = 4;
void erf(VecGen& v, const Xbyak::Xmm& dst, const Xbyak::Xmm& x, const Regs& t);

// softplus x = ln(1 + e^x), as max(x, 0) + log1p(e^−|x|); log1p(u) from the log of w = 1 + u
// as ln w·u/(w − 1) (exact w − 1; u itself once w rounds to 1), so the lower tail keeps its
// relative accuracy (softplus(−100) is the denormal e^−100). softplus(−inf) = +0,
// softplus(+inf) = +inf.
constexpr int SOFTPLUS_TMPS = 6;
constexpr double SOFTPLUS_MAX_ULP = 4;
void softplus(VecGen& v, const Xbyak::Xmm& dst, const Xbyak::Xmm& x, const Regs& t);

// The constants of the tanh form: √(2/π) and 0.044715.
constexpr double GELU_TANH_K = 0.7978845608028654;
constexpr double GELU_TANH_C = 0.044715;

}  // namespace nnasm::vmath
