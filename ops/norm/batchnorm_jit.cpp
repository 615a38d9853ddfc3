// The JIT side of BATCHNORM2D and BATCHNORM2D_BWD: bound kernels (jit/kernel.h) whose C++
// driver walks the channels and calls two kinds of generated code —
//   a per-channel sums kernel: Σ(x − m) and Σ(x − m)² over every image's plane of the channel
//   (or, for the backward, Σdy and Σdy·(x − m)), the floats widened to double and summed in
//   double vectors, so the statistics keep the reference's double precision;
//   an elementwise kernel (jit/elementwise.h) over the whole tensor, rows = image ×
//   channel, that applies the per-channel affine map the driver worked out: y = (x − μ)·s + β
//   forward, dx = a·dy + cx·(x − μ) + c0 backward (per-row values in the scratch).
// Results differ from the reference (one sequential double sum per channel) in the order of the
// double additions and in the FMA of the map: within its rounding, not bitwise.
//
// Register map of the sums kernel (D = 8 doubles in zmm on AVX-512, 4 in ymm on AVX2; U
// independent vectors a step): s1[u] = vreg(u), s2[u] = vreg(U + u), a[u] = vreg(2U + u) the
// widened x − m, d[u] = vreg(3U + u) the widened dy; then m in every lane; on AVX2 the tail's
// float mask and double mask. General registers: rX / rD the current image's plane of x / dy,
// rXi / rDi the walk along it, rImg / rI the loop counters, rOut the two doubles' address.
#include <fmt/format.h>
#include <xbyak/xbyak.h>

#include "jit/elementwise.h"
#include "jit/frame.h"
#include "jit/vecgen.h"
#include "ops/norm/batchnorm.h"

namespace nnasm {
namespace {

using namespace Xbyak;
using namespace Xbyak::util;

struct SumsDesc {
  int64_t n, c, plane;
  bool dy;  // Σdy and Σdy·(x − m) rather than Σ(x − m) and Σ(x − m)²
};

class SumsGen {
 public:
  SumsGen(CodeGenerator& g, const SumsDesc& d, Isa isa) : g_(g), d_(d), v_(g, isa) {
    lanes_ = v_.avx512() ? 8 : 4;
    u_ = v_.avx512() ? 4 : 3;
  }

  Status emit() {
    {
      Frame f(g_, 0);
      f.load_in(rX, 0);
      f.load_in(rXi, 1);
      if (v_.avx512()) g_.vbroadcastsd(Zmm(center()), g_.qword[rXi]);
      else g_.vbroadcastsd(Ymm(center()), g_.qword[rXi]);
      if (d_.dy) f.load_in(rD, 2);
      f.load_out(rOut, 0);
      const int tail = static_cast<int>(d_.plane % lanes_);
      if (tail && v_.avx512()) {
        g_.mov(eax, (1u << tail) - 1);
        g_.kmovw(k1, eax);
      } else if (tail) {
        g_.vmovups(Xmm(float_mask().getIdx()), v_.lane_mask((1u << tail) - 1));
        g_.vmovups(Ymm(double_mask().getIdx()), v_.lane_mask((1u << 2 * tail) - 1));
      }
      for (int u = 0; u < u_; ++u) {
        g_.vxorpd(wide(s1(u)), wide(s1(u)), wide(s1(u)));
        g_.vxorpd(wide(s2(u)), wide(s2(u)), wide(s2(u)));
      }
      Label image;
      g_.mov(rImg, d_.n);
      g_.L(image);
      plane(tail);
      g_.add(rX, d_.c * d_.plane * 4);
      if (d_.dy) g_.add(rD, d_.c * d_.plane * 4);
      g_.dec(rImg);
      g_.jnz(image, CodeGenerator::T_NEAR);
      reduce(0, [this](int u) { return s1(u); });
      reduce(8, [this](int u) { return s2(u); });
    }
    v_.finish();
    return Status::ok();
  }

 private:
  const Reg64 &rX = rsi, &rD = rdx, &rImg = rcx, &rI = r8, &rXi = r9, &rDi = r10, &rOut = r11;

  int s1(int u) const { return u; }
  int s2(int u) const { return u_ + u; }
  int a(int u) const { return 2 * u_ + u; }
  int dv(int u) const { return 3 * u_ + u; }
  int center() const { return 4 * u_; }
  Xmm float_mask() const { return Xmm(4 * u_ + 1); }
  Xmm double_mask() const { return Xmm(4 * u_ + 2); }
  // Vector register i holding doubles: zmm on AVX-512, ymm on AVX2.
  Xmm wide(int i) const { return v_.avx512() ? Xmm(Zmm(i)) : Xmm(Ymm(i)); }

  void plane(int tail) {
    g_.mov(rXi, rX);
    if (d_.dy) g_.mov(rDi, rD);
    const int64_t step = static_cast<int64_t>(lanes_) * u_;
    const int64_t full = d_.plane / step;
    if (full > 0) {
      Label top;
      g_.mov(rI, full);
      g_.L(top);
      for (int u = 0; u < u_; ++u) vec(u, u * lanes_ * 4, false);
      g_.add(rXi, step * 4);
      if (d_.dy) g_.add(rDi, step * 4);
      g_.dec(rI);
      g_.jnz(top, CodeGenerator::T_NEAR);
    }
    const int rest = static_cast<int>(d_.plane % step / lanes_);
    for (int u = 0; u < rest; ++u) vec(u, u * lanes_ * 4, false);
    if (tail) vec(rest % u_, rest * lanes_ * 4, true);
  }

  // One vector of D floats at byte offset `off` (the plane's last, partial one when `masked`).
  void vec(int u, int64_t off, bool masked) {
    load(a(u), rXi + off, masked);
    if (v_.avx512() && masked) g_.vsubpd(Zmm(a(u)) | k1 | T_z, Zmm(a(u)), Zmm(center()));
    else g_.vsubpd(wide(a(u)), wide(a(u)), wide(center()));
    if (masked && !v_.avx512()) g_.vandpd(wide(a(u)), wide(a(u)), Ymm(double_mask().getIdx()));
    const int by = d_.dy ? dv(u) : a(u);
    if (d_.dy) load(dv(u), rDi + off, masked);
    g_.vaddpd(wide(s1(u)), wide(s1(u)), wide(by));
    g_.vfmadd231pd(wide(s2(u)), wide(by), wide(a(u)));
  }

  // D floats widened to doubles into register i; masked lanes read nothing and are 0.
  void load(int i, const RegExp& src, bool masked) {
    if (v_.avx512()) {
      if (masked) g_.vcvtps2pd(Zmm(i) | k1 | T_z, g_.yword[src]);
      else g_.vcvtps2pd(Zmm(i), g_.yword[src]);
    } else if (masked) {
      g_.vmaskmovps(Xmm(i), float_mask(), g_.xword[src]);
      g_.vcvtps2pd(Ymm(i), Xmm(i));
    } else {
      g_.vcvtps2pd(Ymm(i), g_.xword[src]);
    }
  }

  // Sums the U vectors acc(u) (in a fixed tree) and their lanes into the double at rOut + off.
  template <class Acc>
  void reduce(int off, Acc acc) {
    const int t = a(0);
    for (int u = 1; u < u_; ++u) g_.vaddpd(wide(acc(0)), wide(acc(0)), wide(acc(u)));
    if (v_.avx512()) {
      g_.vextractf64x4(Ymm(t), Zmm(acc(0)), 1);
      g_.vaddpd(Ymm(acc(0)), Ymm(acc(0)), Ymm(t));
    }
    g_.vextractf128(Xmm(t), Ymm(acc(0)), 1);
    g_.vaddpd(Xmm(acc(0)), Xmm(acc(0)), Xmm(t));
    g_.vunpckhpd(Xmm(t), Xmm(acc(0)), Xmm(acc(0)));
    g_.vaddsd(Xmm(acc(0)), Xmm(acc(0)), Xmm(t));
    g_.vmovsd(g_.qword[rOut + off], Xmm(acc(0)));
  }

  CodeGenerator& g_;
  const SumsDesc d_;
  VecGen v_;
  int lanes_, u_;
};

Result<KernelRef> sums_kernel(const SumsDesc& d, Isa isa, KernelCache& cache) {
  const std::string name = fmt::format("f64_batchnorm2d_{}__{}", d.dy ? "dy_sums" : "sums", isa_name(isa));
  const std::string key = fmt::format("{}|{}x{}x{}", name, d.n, d.c, d.plane);
  return build_kernel_measured(cache, key, name, size_t(1) << 16, [d, isa](CodeGenerator& g) { return SumsGen(g, d, isa).emit(); });
}

// The affine map over the whole tensor: `streams` STREAM inputs, then `cols` per-row values.
Result<KernelRef> apply_kernel(const BnGeom& g, Isa isa, KernelCache& cache, const char* op, int streams, int cols,
                               MultiSnippet body) {
  EwSpec s;
  s.op = op;
  s.isa = isa;
  s.rows = g.n * g.c;
  s.inner = g.plane;
  s.in.assign(static_cast<size_t>(streams), Feed::STREAM);
  s.in.insert(s.in.end(), static_cast<size_t>(cols), Feed::COL);
  s.n_tmp = 1;
  s.body = std::move(body);
  return elementwise_kernel(s, cache);
}

struct BnKernel {
  BnGeom g;
  double eps = 0, momentum = 0;
  KernelFn sums = nullptr, dy_sums = nullptr, apply = nullptr;
  std::vector<KernelRef> keep;
};

// Floats of one per-row array in the scratch (whole cache lines).
int64_t row_floats(const BnGeom& g) { return (g.n * g.c + 15) / 16 * 16; }

// Channel ch's mean and variance: the batch's (two passes, as the reference) or the running ones.
void channel_stats(const BnKernel& k, const float* x, int64_t ch, bool training, const float* rmean, const float* rvar,
                   double* sums, double* mean, double* var) {
  if (!training) {
    *mean = rmean[ch], *var = rvar[ch];
    return;
  }
  const double zero = 0, count = static_cast<double>(k.g.count());
  call_kernel(k.sums, {x + k.g.at(0, ch), &zero}, sums);
  *mean = sums[0] / count;
  call_kernel(k.sums, {x + k.g.at(0, ch), mean}, sums);
  *var = sums[1] / count;
}

void forward(const KernelArgs* a, const void* data) {
  const BnKernel& k = *static_cast<const BnKernel*>(data);
  const BnGeom& g = k.g;
  const float* x = bn_in(a, 0);
  const float* gamma = bn_in(a, 1);
  const float* beta = bn_in(a, 2);
  float* rmean = const_cast<float*>(bn_in(a, 3));  // updated in place when training (batchnorm2d.cpp)
  float* rvar = const_cast<float*>(bn_in(a, 4));
  const bool training = a->state && a->state->training;
  float* fm = static_cast<float*>(a->scratch);
  float* fs = fm + row_floats(g);
  float* fb = fs + row_floats(g);
  double* sums = reinterpret_cast<double*>(fb + row_floats(g));
  const int64_t count = g.count();
  for (int64_t ch = 0; ch < g.c; ++ch) {
    double mean, var;
    channel_stats(k, x, ch, training, rmean, rvar, sums, &mean, &var);
    const float s = static_cast<float>(gamma[ch] * bn_rstd(var, k.eps));
    for (int64_t i = 0; i < g.n; ++i) fm[i * g.c + ch] = static_cast<float>(mean), fs[i * g.c + ch] = s, fb[i * g.c + ch] = beta[ch];
    if (training) {
      const double unbiased = count > 1 ? var * static_cast<double>(count) / static_cast<double>(count - 1) : var;
      rmean[ch] = static_cast<float>((1 - k.momentum) * rmean[ch] + k.momentum * mean);
      rvar[ch] = static_cast<float>((1 - k.momentum) * rvar[ch] + k.momentum * unbiased);
    }
  }
  call_kernel(k.apply, {x, fm, fs, fb}, a->out[0]);
}

void backward(const KernelArgs* a, const void* data) {
  const BnKernel& k = *static_cast<const BnKernel*>(data);
  const BnGeom& g = k.g;
  const float* x = bn_in(a, 0);
  const float* gamma = bn_in(a, 1);
  const float* dy = bn_in(a, 4);
  float* dgamma = static_cast<float*>(a->out[1]);
  float* dbeta = static_cast<float*>(a->out[2]);
  const bool training = a->state && a->state->training;
  float* fa = static_cast<float*>(a->scratch);
  float* fcx = fa + row_floats(g);
  float* fm = fcx + row_floats(g);
  float* fc0 = fm + row_floats(g);
  double* sums = reinterpret_cast<double*>(fc0 + row_floats(g));
  const double count = static_cast<double>(g.count());
  for (int64_t ch = 0; ch < g.c; ++ch) {
    double mean, var;
    channel_stats(k, x, ch, training, bn_in(a, 2), bn_in(a, 3), sums, &mean, &var);
    const double r = bn_rstd(var, k.eps);
    call_kernel(k.dy_sums, {x + g.at(0, ch), &mean, dy + g.at(0, ch)}, sums);
    const double sdy = sums[0], sdyx = sums[1] * r;  // Σdy, Σdy·x̂
    dbeta[ch] = static_cast<float>(sdy);
    dgamma[ch] = static_cast<float>(sdyx);
    const double kk = gamma[ch] * r;
    const float cx = static_cast<float>(training ? -kk * r * sdyx / count : 0);
    const float c0 = static_cast<float>(training ? -kk * sdy / count : 0);
    for (int64_t i = 0; i < g.n; ++i) {
      const int64_t row = i * g.c + ch;
      fa[row] = static_cast<float>(kk), fcx[row] = cx, fm[row] = static_cast<float>(mean), fc0[row] = c0;
    }
  }
  call_kernel(k.apply, {dy, x, fa, fcx, fm, fc0}, a->out[0]);
}

}  // namespace

size_t bn_jit_scratch(const Instruction&, const TensorType* in, const TensorType*) {
  return static_cast<size_t>(4 * row_floats(bn_geom(in[0].shape))) * sizeof(float) + 2 * sizeof(double);
}

Result<std::shared_ptr<const JitKernel>> bn_jit(const JitRequest& r, KernelCache& cache, bool backward_pass) {
  auto k = std::make_shared<BnKernel>();
  k->g = bn_geom(r.in[0].shape);
  k->eps = r.ins.f(NNASM_IMM_SHARED(eps, Opcode::BATCHNORM2D, Opcode::BATCHNORM2D_BWD));
  k->momentum = backward_pass ? 0 : r.ins.f(NNASM_IMM(BATCHNORM2D, momentum));
  const BnGeom& g = k->g;
  if (g.count() == 0) return std::shared_ptr<const JitKernel>();
  Result<KernelRef> sums = sums_kernel(SumsDesc{g.n, g.c, g.plane, false}, r.isa, cache);
  if (!sums) return sums.status();
  k->sums = sums.value()->fn();
  k->keep.push_back(sums.value());
  Result<KernelRef> apply = KernelRef();
  if (!backward_pass) {
    // y = (x − μ)·s + β
    apply = apply_kernel(g, r.isa, cache, "batchnorm2d_apply", 1, 3,
                         [](VecGen& v, const std::vector<Xmm>& dst, const std::vector<Xmm>& src, const std::vector<Xmm>& t) {
                           v.g.vsubps(t[0], src[0], src[1]);
                           v.g.vfmadd213ps(t[0], src[2], src[3]);
                           v.g.vmovaps(dst[0], t[0]);
                         });
  } else {
    Result<KernelRef> dy_sums = sums_kernel(SumsDesc{g.n, g.c, g.plane, true}, r.isa, cache);
    if (!dy_sums) return dy_sums.status();
    k->dy_sums = dy_sums.value()->fn();
    k->keep.push_back(dy_sums.value());
    // dx = a·dy + cx·(x − μ) + c0; inputs dy, x, a, cx, μ, c0
    apply = apply_kernel(g, r.isa, cache, "batchnorm2d_bwd_apply", 2, 4,
                         [](VecGen& v, const std::vector<Xmm>& dst, const std::vector<Xmm>& src, const std::vector<Xmm>& t) {
                           v.g.vsubps(t[0], src[1], src[4]);
                           v.g.vfmadd213ps(t[0], src[3], src[5]);
                           v.g.vfmadd231ps(t[0], src[0], src[2]);
                           v.g.vmovaps(dst[0], t[0]);
                         });
  }
  if (!apply) return apply.status();
  k->apply = apply.value()->fn();
  k->keep.push_back(apply.value());
  const std::string name = fmt::format("f32_batchnorm2d{}__{}", backward_pass ? "_bwd" : "", isa_name(r.isa));
  const std::string key = fmt::format("{}|{}x{}x{}|eps={}|m={}", name, g.n, g.c, g.plane, k->eps, k->momentum);
  return cache.get(key, [&] { return build_bound_kernel(name, backward_pass ? backward : forward, std::shared_ptr<const void>(k)); });
}

}  // namespace nnasm
