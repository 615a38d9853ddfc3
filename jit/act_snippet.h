// The activations as register snippets, shared by the elementwise kernels of the activation ops
// (ops/elementwise/unary.cpp) and the fused activation epilogue of the GEMM kernels
// (jit/gemm_kernel.cpp), so that RELU and LINEAR act=relu run the same code.
// The scalar references are ops/elementwise/activation.h.
#pragma once
#include <cfloat>
#include <functional>
#include <vector>

#include <xbyak/xbyak.h>

#include "isa/activation.h"
#include "jit/vecgen.h"
#include "jit/vmath.h"

namespace nnasm {

// y = f(x) on every lane; `a` is the activation's immediate (slope, alpha, threshold, beta),
// baked in. y may be x (x is read before y's last write); t: n_tmp scratch registers distinct
// from both. On AVX-512 opmasks k2..k7 may be clobbered, never k1.
struct ActSnippet {
  int n_tmp = 0;
  std::function<void(VecGen& v, const Xbyak::Xmm& y, const Xbyak::Xmm& x, const std::vector<Xbyak::Xmm>& t)> body;
};

static_assert(ACTIVATION_COUNT == 10, "a new activation needs its snippet here");
inline ActSnippet act_snippet(Activation act, float a) {
  using Xbyak::Xmm;
  using Regs = std::vector<Xmm>;
  switch (act) {
    case Activation::NONE:
      return {0, [](VecGen& v, const Xmm& y, const Xmm& x, const Regs&) {
                if (y.getIdx() != x.getIdx()) v.g.vmovaps(y, x);
              }};
    case Activation::RELU:
      // Keep x where x > 0 or x is NaN; +0 elsewhere (−0 included, as the reference).
      return {1, [](VecGen& v, const Xmm& y, const Xmm& x, const Regs& t) {
                const VMask m = v.mask(0, t[0]);
                v.cmp(m, x, v.cst(0.f), VecGen::CMP_NLE_UQ);
                v.keep(y, m, x);
              }};
    case Activation::LEAKYRELU:
      return {2, [a](VecGen& v, const Xmm& y, const Xmm& x, const Regs& t) {
                v.g.vmulps(t[0], x, v.cst(a));
                const VMask pos = v.mask(0, t[1]);
                v.cmp(pos, x, v.cst(0.f), VecGen::CMP_GT);
                v.blend(y, pos, t[0], x);
              }};
    case Activation::ELU:
      return {1 + vmath::EXPM1_TMPS, [a](VecGen& v, const Xmm& y, const Xmm& x, const Regs& t) {
                vmath::expm1(v, t[0], x, {t[1], t[2], t[3], t[4]});
                v.g.vmulps(t[0], t[0], v.cst(a));
                const VMask pos = v.mask(0, t[1]);
                v.cmp(pos, x, v.cst(0.f), VecGen::CMP_GT);
                v.blend(y, pos, t[0], x);
              }};
    case Activation::CLIPPED_RELU:
      return {2, [a](VecGen& v, const Xmm& y, const Xmm& x, const Regs& t) {
                v.g.vmaxps(t[0], x, v.cst(0.f));  // −0 → +0, NaN → 0 (put back below)
                v.g.vminps(t[0], t[0], v.cst(a));
                const VMask nan = v.mask(0, t[1]);
                v.cmp(nan, x, x, VecGen::CMP_UNORD);
                v.blend(y, nan, t[0], x);
              }};
    case Activation::SIGMOID:
      return {vmath::SIGMOID_TMPS,
              [](VecGen& v, const Xmm& y, const Xmm& x, const Regs& t) { vmath::sigmoid(v, y, x, t); }};
    case Activation::TANH:
      return {vmath::TANH_TMPS, [](VecGen& v, const Xmm& y, const Xmm& x, const Regs& t) { vmath::tanh(v, y, x, t); }};
    case Activation::GELU:
      return {vmath::GELU_TMPS, [](VecGen& v, const Xmm& y, const Xmm& x, const Regs& t) { vmath::gelu(v, y, x, t); }};
    case Activation::GELU_TANH:
      return {vmath::GELU_TANH_TMPS,
              [](VecGen& v, const Xmm& y, const Xmm& x, const Regs& t) { vmath::gelu_tanh(v, y, x, t); }};
    case Activation::SWISH:
      return {1 + vmath::SIGMOID_TMPS, [a](VecGen& v, const Xmm& y, const Xmm& x, const Regs& t) {
                v.g.vmulps(t[0], x, v.cst(a));
                vmath::sigmoid(v, t[0], t[0], {t[1], t[2], t[3]});
                v.g.vmaxps(t[1], x, v.cst(-FLT_MAX));  // x = −inf gives −0, not −inf·0
                v.g.vmulps(y, t[1], t[0]);
              }};
  }
  return {};
}

}  // namespace nnasm
