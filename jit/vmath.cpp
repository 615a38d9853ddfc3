// The vectorized math snippets. Polynomials are least-squares fits on Chebyshev nodes with
// coefficients rounded to float one at a time (each later coefficient refitted to absorb the
// rounding of the earlier ones), evaluated by Horner's rule with FMA.
#include "jit/vmath.h"

#include <cfloat>
#include <cmath>

namespace nnasm::vmath {

using namespace Xbyak;

namespace {

constexpr float LOG2E = 1.44269504088896341f;
// ln 2 split so that n·LN2_HI is exact for |n| < 2^15 (LN2_HI has 9 significant bits).
constexpr float LN2_HI = 0.693359375f;
constexpr float LN2_LO = -2.12194440e-4f;
constexpr uint32_t SIGN = 0x80000000u, ABS = 0x7fffffffu, PLUS_INF = 0x7f800000u, MINUS_INF = 0xff800000u,
                   QNAN = 0x7fc00000u;

// expm1(r) = r + r²·P(r) on [−ln2/2, ln2/2]; error of P 6.4e−8.
const float EXP_P[] = {5.000000000e-01f, 1.666657627e-01f, 4.166651145e-02f, 8.363248780e-03f, 1.393050188e-03f};
// log1p(f) = f + f²·P(f) on [√½ − 1, √2 − 1]; error of P 3.0e−8.
const float LOG_P[] = {-4.999999702e-01f, 3.333332241e-01f, -2.500082850e-01f, 2.000192851e-01f, -1.662627906e-01f,
                       1.418924481e-01f,  -1.311248839e-01f, 1.282331496e-01f, -7.842127979e-02f};
// tanh(x) = x + x³·P(x²) on |x| < 0.625; error of P 5.0e−8.
const float TANH_P[] = {-3.333332837e-01f, 1.333275735e-01f, -5.385020748e-02f, 2.099583670e-02f, -6.096077617e-03f};
constexpr float TANH_SMALL = 0.625f;
// erfc(z) = t·e^(−z² + P(t − 37/64)), t = 1/(1 + z/2), on z ≤ 15/√2 (t ≥ 0.1586); centred so the
// coefficients stay small (Horner in float keeps its accuracy); error of P 1.9e−8.
const float ERFC_P[] = {-5.657216907e-01f, 1.367759228e+00f, 9.705312550e-02f, -4.065951705e-01f,
                        -4.246525094e-02f, 2.967068255e-01f,  -4.273263365e-02f, -2.506826818e-01f,
                        1.300606281e-01f,  1.517676115e-01f,  -1.317063570e-01f};
constexpr float ERFC_T0 = 0.578125f;
// erf(x) = x·P(x²) on |x| < 0.5: Taylor's coefficients 2/√π·(−1)^k/(k!(2k+1)), to x^13 (the
// next term is below 1e−9 there).
const float ERF_P[] = {1.128379167e+00f, -3.761263890e-01f, 1.128379167e-01f, -2.686617065e-02f,
                       5.223977625e-03f, -8.548327023e-04f, 1.205533298e-04f};
constexpr float ERF_SMALL = 0.5f;
// Beyond |x| = 15, Φ(x) is 0 or 1 and x·Φ(x) rounds to 0 or x.
constexpr float CDF_CLAMP = 15.f;

// dst = P(x) by Horner's rule, coefficients lowest first. dst must differ from x.
template <size_t N>
void horner(VecGen& v, const Xmm& dst, const Xmm& x, const float (&c)[N]) {
  v.g.vmovups(dst, v.cst(c[N - 1]));
  for (size_t i = N - 1; i-- > 0;) v.g.vfmadd213ps(dst, x, v.cst(c[i]));
}

// Range reduction of e^(a [+ b]): n = round((a + b)·log2 e) to tn, r = a − n·ln2 + b to tr
// (|r| ≤ ln2/2 plus rounding). AVX-512 leaves a unclamped (vscalefps copes with any n) and clamps
// r instead, which also turns the NaN r of a = ±inf into a finite one: n (±inf) then decides.
// AVX2 clamps a to [−120, 89] (NaN kept: min/max return their register operand for NaN): wide
// enough for the largest result, and for a zero result even after a factor up to e^16
// (exp_tail); n stays in [−176, 131], where the two-step scaling below is exact.
void exp_reduce(VecGen& v, const Xmm& tn, const Xmm& tr, const Xmm& a, const Xmm* b) {
  CodeGenerator& g = v.g;
  Xmm src = a;
  if (!v.avx512()) {
    g.vmovups(tr, v.cst(89.f));
    g.vminps(tr, tr, a);
    g.vmovups(tn, v.cst(-120.f));
    g.vmaxps(tr, tn, tr);
    src = tr;
  }
  if (b) {
    g.vaddps(tn, src, *b);
    g.vmulps(tn, tn, v.cst(LOG2E));
  } else {
    g.vmulps(tn, src, v.cst(LOG2E));
  }
  if (v.avx512()) g.vrndscaleps(tn, tn, 0);
  else g.vroundps(tn, tn, 0);
  if (src.getIdx() != tr.getIdx()) g.vmovaps(tr, src);
  g.vfnmadd231ps(tr, tn, v.cst(LN2_HI));
  g.vfnmadd231ps(tr, tn, v.cst(LN2_LO));
  if (b) g.vaddps(tr, tr, *b);
  if (v.avx512()) {
    g.vmaxps(tr, tr, v.cst(-0.375f));  // NaN → −0.375 (the memory operand is returned)
    g.vminps(tr, tr, v.cst(0.375f));
  }
}

// dst = e^r − 1 (want_q) or e^r, |r| ≤ ~0.35. dst must differ from r.
void exp_poly(VecGen& v, const Xmm& dst, const Xmm& r, bool want_q) {
  CodeGenerator& g = v.g;
  horner(v, dst, r, EXP_P);
  if (want_q) {
    g.vmulps(dst, dst, r);
    g.vfmadd213ps(dst, r, r);
  } else {
    g.vfmadd213ps(dst, r, v.cst(1.f));
    g.vfmadd213ps(dst, r, v.cst(1.f));
  }
}

// AVX2: turns the whole float n in tn into the factors 2^n1 (f1) and 2^n2 (tn), n1 = n >> 1,
// n2 = n − n1, both normal for n in [−176, 131], so that multiplying by f1 then by tn rounds
// once even when the result is denormal.
void exp2_factors(VecGen& v, const Xmm& tn, const Xmm& f1) {
  CodeGenerator& g = v.g;
  g.vcvtps2dq(tn, tn);
  g.vpsrad(f1, tn, 1);
  g.vpsubd(tn, tn, f1);
  g.vpaddd(f1, f1, v.cst_bits(127));
  g.vpslld(f1, f1, 23);
  g.vpaddd(tn, tn, v.cst_bits(127));
  g.vpslld(tn, tn, 23);
}

// dst ·= 2^n. Clobbers tn (and tmp on AVX2).
void exp_scale(VecGen& v, const Xmm& dst, const Xmm& tn, const Xmm& tmp) {
  CodeGenerator& g = v.g;
  if (v.avx512()) {
    g.vscalefps(dst, dst, tn);
    return;
  }
  exp2_factors(v, tn, tmp);
  g.vmulps(dst, dst, tmp);
  g.vmulps(dst, dst, tn);
}

// dst = m·e^(a + b) rounded once: the factor m (|m| ≤ e^16) goes in before the scaling by 2^n,
// so a result in the denormal range keeps every bit it can (x·Φ(x) deep in GELU's tail, where
// Φ(x) alone would already be denormal). b is clobbered; dst may be a.
void exp_tail(VecGen& v, const Xmm& dst, const Xmm& a, const Xmm& b, const Xmm& m, const Regs& t) {
  exp_reduce(v, t[0], t[1], a, &b);
  exp_poly(v, dst, t[1], false);
  v.g.vmulps(dst, dst, m);
  exp_scale(v, dst, t[0], t[1]);
}

// dst = m·sigmoid(x), or sigmoid(x) without m, as num/(1 + e), e = e^−|x|, num = 1 (or m) for
// x ≥ 0 and e (or m·e, rounded once as in exp_tail) below. x and m are read to the end; dst may
// be x. Tmps: 3 without m, 4 with.
void sigmoid_impl(VecGen& v, const Xmm& dst, const Xmm& x, const Xmm* m, const Regs& t) {
  // t0: −|x|, then p = e^r, then e; t1: n, then 1 + e; t2: r, then m·e and num; t3: 2^n1 (AVX2)
  CodeGenerator& g = v.g;
  g.vorps(t[0], x, v.cst_bits(SIGN));
  exp_reduce(v, t[1], t[2], t[0], nullptr);
  exp_poly(v, t[0], t[2], false);
  if (m) {
    g.vmulps(t[2], t[0], *m);
    if (v.avx512()) {
      g.vscalefps(t[0], t[0], t[1]);
      g.vscalefps(t[2], t[2], t[1]);
    } else {
      exp2_factors(v, t[1], t[3]);
      g.vmulps(t[0], t[0], t[3]);
      g.vmulps(t[0], t[0], t[1]);
      g.vmulps(t[2], t[2], t[3]);
      g.vmulps(t[2], t[2], t[1]);
    }
    g.vaddps(t[1], t[0], v.cst(1.f));
    const VMask neg = v.mask(0, t[3]);
    v.cmp(neg, x, v.cst(0.f), VecGen::CMP_LT);
    v.blend(t[2], neg, *m, t[2]);
    g.vdivps(dst, t[2], t[1]);
    return;
  }
  exp_scale(v, t[0], t[1], t[2]);
  g.vaddps(t[1], t[0], v.cst(1.f));
  const VMask pos = v.mask(0, t[2]);
  v.cmp(pos, x, v.cst(0.f), VecGen::CMP_NLT_UQ);  // x ≥ 0, or NaN (NaN either way)
  v.move_if(t[0], pos, v.cst(1.f));
  g.vdivps(dst, t[0], t[1]);
}

// The parts of Φ(x) = ½ erfc(|x|/√2) (x < 0) shared by normal_cdf and gelu: with |x| clamped to
// 15 in t0 (NaN kept), leaves t = 1/(1 + |x|/(2√2)) in t1, a = −hi/2 in t3 and b = P(t) − lo/2 in
// t2, where hi + lo = |x|² exactly; then e^(a+b) = erfc(|x|/√2)/t. t4 is clobbered.
void erfc_parts(VecGen& v, const Xmm& x, const Regs& t) {
  CodeGenerator& g = v.g;
  g.vandps(t[0], x, v.cst_bits(ABS));
  g.vmovups(t[1], v.cst(CDF_CLAMP));
  g.vminps(t[0], t[1], t[0]);
  g.vmovups(t[1], v.cst(1.f));
  g.vfmadd231ps(t[1], t[0], v.cst(static_cast<float>(0.5 / std::sqrt(2.0))));
  g.vmovups(t[2], v.cst(1.f));
  g.vdivps(t[1], t[2], t[1]);
  g.vsubps(t[3], t[1], v.cst(ERFC_T0));
  horner(v, t[2], t[3], ERFC_P);
  // z² = x²/2 exactly as hi + lo, so the rounding of x² is not amplified by e^(−z²).
  g.vmulps(t[3], t[0], t[0]);
  g.vmovaps(t[4], t[3]);
  g.vfmsub231ps(t[4], t[0], t[0]);
  g.vmulps(t[3], t[3], v.cst(-0.5f));
  g.vfmadd231ps(t[2], t[4], v.cst(-0.5f));
}

}  // namespace

void exp(VecGen& v, const Xmm& dst, const Xmm& x, const Regs& t) {
  // t0: n, t1: r
  exp_reduce(v, t[0], t[1], x, nullptr);
  exp_poly(v, dst, t[1], false);
  exp_scale(v, dst, t[0], t[1]);
}

void exp_sum(VecGen& v, const Xmm& dst, const Xmm& a, const Xmm& b, const Regs& t) {
  exp_reduce(v, t[0], t[1], a, &b);
  exp_poly(v, dst, t[1], false);
  exp_scale(v, dst, t[0], t[1]);
}

void expm1(VecGen& v, const Xmm& dst, const Xmm& x, const Regs& t) {
  // With q = e^r − 1: expm1 x = 2^n·q + (2^n − 1), one FMA (2^n − 1 is exact for the n where
  // it matters; n = 0 gives q itself). For n > 64, where 2^n may overflow though the result does
  // not, 2^n·(q + 1) − 1 instead.
  // t0: n (AVX2: then the integer n); t1: r, then 2^n, then the large-n result; t2: the n > 64
  // mask (AVX2); t3: 2^n − 1 + 2^n·q. dst: q; AVX2: 2^n1 at the end.
  CodeGenerator& g = v.g;
  exp_reduce(v, t[0], t[1], x, nullptr);
  exp_poly(v, dst, t[1], true);
  const VMask big = v.mask(0, t[2]);
  v.cmp(big, t[0], v.cst(64.f), VecGen::CMP_GT);
  if (v.avx512()) {
    g.vmovups(t[1], v.cst(1.f));
    g.vscalefps(t[1], t[1], t[0]);
    g.vsubps(t[3], t[1], v.cst(1.f));
    g.vfmadd231ps(t[3], t[1], dst);
    g.vaddps(t[1], dst, v.cst(1.f));
    g.vscalefps(t[1], t[1], t[0]);
  } else {
    g.vcvtps2dq(t[0], t[0]);
    g.vpmaxsd(t[1], t[0], v.cst_bits(static_cast<uint32_t>(-126)));
    g.vpminsd(t[1], t[1], v.cst_bits(127));
    g.vpaddd(t[1], t[1], v.cst_bits(127));
    g.vpslld(t[1], t[1], 23);
    g.vsubps(t[3], t[1], v.cst(1.f));
    g.vfmadd231ps(t[3], t[1], dst);
    g.vaddps(t[1], dst, v.cst(1.f));
    g.vpsrad(dst, t[0], 1);  // the two-step scaling of exp2_factors, on the integer n
    g.vpsubd(t[0], t[0], dst);
    g.vpaddd(dst, dst, v.cst_bits(127));
    g.vpslld(dst, dst, 23);
    g.vpaddd(t[0], t[0], v.cst_bits(127));
    g.vpslld(t[0], t[0], 23);
    g.vmulps(t[1], t[1], dst);
    g.vmulps(t[1], t[1], t[0]);
  }
  g.vsubps(t[1], t[1], v.cst(1.f));
  v.blend(dst, big, t[3], t[1]);
}

void log(VecGen& v, const Xmm& dst, const Xmm& x, const Regs& t) {
  // x = 2^e·m, m ∈ [√½, √2): log x = e·ln2 + log1p(m − 1).
  CodeGenerator& g = v.g;
  if (v.avx512()) {
    // t0: m then f, t1: e, t2: result
    g.vgetmantps(t[0], x, 0);  // [1, 2), denormals normalized
    g.vgetexpps(t[1], x);
    g.vcmpps(g.k2, t[0], v.cst(1.41421354f), VecGen::CMP_GT);
    g.vmulps(t[0] | g.k2, t[0], v.cst(0.5f));
    g.vaddps(t[1] | g.k2, t[1], v.cst(1.f));
    g.vsubps(t[0], t[0], v.cst(1.f));
    horner(v, t[2], t[0], LOG_P);
    g.vmulps(t[2], t[2], t[0]);
    g.vfmadd213ps(t[2], t[0], t[0]);
    g.vfmadd231ps(t[2], t[1], v.cst(LN2_LO));
    g.vfmadd231ps(t[2], t[1], v.cst(LN2_HI));
    // Special inputs by class (one nibble each): QNaN → x, SNaN → quiet x, ±0 → −inf, 1 → +0,
    // −inf → NaN, +inf → +inf, negative → NaN, positive → keep.
    g.vfixupimmps(t[2], x, v.cst_bits(0x03538421u), 0);
    g.vmovaps(dst, t[2]);
    return;
  }
  // t0: scaled x, then f, then masks; t1: exponent adjustment, then the result; t2: e
  g.vcmpps(t[1], x, v.cst(FLT_MIN), VecGen::CMP_LT);  // denormal (or ≤ 0: fixed up below)
  g.vmulps(t[0], x, v.cst(8388608.f));                  // 2^23
  g.vblendvps(t[0], x, t[0], t[1]);
  g.vandps(t[1], t[1], v.cst(23.f));
  // Bias the bits so that the exponent field rounds m into [√½, √2).
  g.vpaddd(t[0], t[0], v.cst_bits(0x3f800000u - 0x3f3504f3u));
  g.vpsrld(t[2], t[0], 23);
  g.vpsubd(t[2], t[2], v.cst_bits(127));
  g.vcvtdq2ps(t[2], t[2]);
  g.vsubps(t[2], t[2], t[1]);
  g.vpand(t[0], t[0], v.cst_bits(0x007fffffu));
  g.vpaddd(t[0], t[0], v.cst_bits(0x3f3504f3u));
  g.vsubps(t[0], t[0], v.cst(1.f));
  horner(v, t[1], t[0], LOG_P);
  g.vmulps(t[1], t[1], t[0]);
  g.vfmadd213ps(t[1], t[0], t[0]);
  g.vfmadd231ps(t[1], t[2], v.cst(LN2_LO));
  g.vfmadd231ps(t[1], t[2], v.cst(LN2_HI));
  g.vcmpps(t[0], x, v.cst_bits(PLUS_INF), VecGen::CMP_EQ);
  g.vblendvps(t[1], t[1], v.cst_bits(PLUS_INF), t[0]);
  g.vcmpps(t[0], x, v.cst(0.f), VecGen::CMP_EQ);
  g.vblendvps(t[1], t[1], v.cst_bits(MINUS_INF), t[0]);
  g.vcmpps(t[0], x, v.cst(0.f), VecGen::CMP_NGE_UQ);  // x < 0 or NaN
  g.vblendvps(t[1], t[1], v.cst_bits(QNAN), t[0]);
  g.vmovaps(dst, t[1]);
}

void tanh(VecGen& v, const Xmm& dst, const Xmm& x, const Regs& t) {
  // Both branches on |x|, x's sign put back at the end (so tanh(−0) = −0).
  // t0: |x|, then the "small" mask (AVX2); t1: the large-|x| branch, then the blend; t2: x², then
  // the sign; t3: the polynomial
  CodeGenerator& g = v.g;
  g.vandps(t[0], x, v.cst_bits(ABS));
  g.vaddps(t[1], t[0], t[0]);
  exp(v, t[1], t[1], {t[2], t[3]});
  g.vaddps(t[1], t[1], v.cst(1.f));
  g.vmovups(t[2], v.cst(1.f));
  g.vdivps(t[1], t[2], t[1]);
  g.vaddps(t[1], t[1], t[1]);
  g.vsubps(t[1], t[2], t[1]);  // 1 − 2/(e^{2|x|} + 1): 1 once e^{2|x|} is inf
  g.vmulps(t[2], x, x);
  horner(v, t[3], t[2], TANH_P);
  g.vmulps(t[3], t[3], t[2]);
  g.vfmadd213ps(t[3], t[0], t[0]);
  const VMask small = v.mask(0, t[0]);
  v.cmp(small, t[0], v.cst(TANH_SMALL), VecGen::CMP_LT);
  v.blend(t[1], small, t[1], t[3]);
  g.vandps(t[2], x, v.cst_bits(SIGN));
  g.vorps(dst, t[1], t[2]);
}

void sigmoid(VecGen& v, const Xmm& dst, const Xmm& x, const Regs& t) { sigmoid_impl(v, dst, x, nullptr, t); }

void normal_cdf(VecGen& v, const Xmm& dst, const Xmm& x, const Regs& t) {
  // t0–t4 as erfc_parts; then t1: ½t, t3: h = ½erfc = ½t·e^(a+b), t4: 1 − h, t0: the sign mask
  CodeGenerator& g = v.g;
  erfc_parts(v, x, t);
  g.vmulps(t[1], t[1], v.cst(0.5f));
  exp_tail(v, t[3], t[3], t[2], t[1], {t[4], t[0]});
  g.vmovups(t[4], v.cst(1.f));
  g.vsubps(t[4], t[4], t[3]);
  const VMask neg = v.mask(0, t[0]);
  v.cmp(neg, x, v.cst(0.f), VecGen::CMP_LT);
  v.blend(dst, neg, t[4], t[3]);
}

void erf(VecGen& v, const Xmm& dst, const Xmm& x, const Regs& t) {
  // t5: x·√2 (erfc_parts's argument: it gives erfc(|t5|/√2) = erfc(|x|)); t0–t4 as erfc_parts;
  // then t3: erfc, t4: 1 − erfc with x's sign, t1: x² then |x|, t2: the series, t3: the mask
  CodeGenerator& g = v.g;
  g.vmulps(t[5], x, v.cst(1.41421354f));
  erfc_parts(v, t[5], t);
  exp_tail(v, t[3], t[3], t[2], t[1], {t[4], t[0]});
  g.vmovups(t[4], v.cst(1.f));
  g.vsubps(t[4], t[4], t[3]);
  g.vandps(t[0], x, v.cst_bits(SIGN));
  g.vorps(t[4], t[4], t[0]);
  g.vmulps(t[1], x, x);
  horner(v, t[2], t[1], ERF_P);
  g.vmulps(t[2], t[2], x);
  g.vandps(t[1], x, v.cst_bits(ABS));
  const VMask small = v.mask(0, t[3]);
  v.cmp(small, t[1], v.cst(ERF_SMALL), VecGen::CMP_LT);  // NaN: the erfc branch, which keeps it
  v.blend(dst, small, t[4], t[2]);
}

void softplus(VecGen& v, const Xmm& dst, const Xmm& x, const Regs& t) {
  // t0: −|x|, then u = e^−|x|; t1: w = 1 + u, then w − 1, then the ratio; t2: ln w, then the
  // result; t3–t5: log's scratch, then t3: the w = 1 mask, then max(x, 0)
  CodeGenerator& g = v.g;
  g.vorps(t[0], x, v.cst_bits(SIGN));
  exp(v, t[0], t[0], {t[1], t[2]});
  g.vaddps(t[1], t[0], v.cst(1.f));
  log(v, t[2], t[1], {t[3], t[4], t[5]});
  g.vsubps(t[1], t[1], v.cst(1.f));
  const VMask one = v.mask(0, t[3]);
  v.cmp(one, t[1], v.cst(0.f), VecGen::CMP_EQ);
  g.vdivps(t[1], t[0], t[1]);
  g.vmulps(t[2], t[2], t[1]);
  v.move_if(t[2], one, t[0]);
  g.vxorps(t[3], t[3], t[3]);
  g.vmaxps(t[3], t[3], x);  // NaN x: x (the second operand)
  g.vaddps(dst, t[3], t[2]);
}

void gelu(VecGen& v, const Xmm& dst, const Xmm& x, const Regs& t) {
  // u = x_c·h rounded once (x_c: x clamped to ±15 — beyond, u rounds to 0 anyway), then
  // y = u for x ≤ 0 and x − u above (x itself there, so gelu(+inf) = +inf).
  // t0–t4 as erfc_parts; then t4: x's sign, t0: x_c, t1: ½t·x_c, t3: u, t4: x − u
  CodeGenerator& g = v.g;
  erfc_parts(v, x, t);
  g.vandps(t[4], x, v.cst_bits(SIGN));
  g.vorps(t[0], t[0], t[4]);
  g.vmulps(t[1], t[1], t[0]);
  g.vmulps(t[1], t[1], v.cst(0.5f));
  exp_tail(v, t[3], t[3], t[2], t[1], {t[4], t[0]});
  g.vsubps(t[4], x, t[3]);
  const VMask neg = v.mask(0, t[0]);
  v.cmp(neg, x, v.cst(0.f), VecGen::CMP_LE);
  v.blend(dst, neg, t[4], t[3]);
}

void gelu_tanh(VecGen& v, const Xmm& dst, const Xmm& x, const Regs& t) {
  // y = m·sigmoid(2u), m = max(x, −20) (below, y rounds to 0; x = −inf gives −0).
  // t0: x², then m; t1: 2u = x·(2k + 2kc·x²)
  CodeGenerator& g = v.g;
  g.vmulps(t[0], x, x);
  g.vmovups(t[1], v.cst(static_cast<float>(2 * GELU_TANH_K)));
  g.vfmadd231ps(t[1], t[0], v.cst(static_cast<float>(2 * GELU_TANH_K * GELU_TANH_C)));
  g.vmulps(t[1], t[1], x);
  g.vmaxps(t[0], x, v.cst(-20.f));  // NaN → −20; 2u carries the NaN
  sigmoid_impl(v, dst, t[1], &t[0], {t[2], t[3], t[4], t[5]});
}

}  // namespace nnasm::vmath
