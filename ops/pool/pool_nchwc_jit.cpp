// The generated kernels of the blocked pooling ops (MAXPOOL2D_NCHWC, AVGPOOL2D_NCHWC and
// GLOBAL_AVGPOOL_NCHWC, ops/pool/pool_nchwc.cpp), bitwise equal to their reference kernels.
//
// A vector is one pixel's b channels (b = 16 floats in a zmm, 8 in a ymm), so an output is one
// chain of folds over its window's pixel vectors: no shuffles and no masks. Why the bits are the
// reference's: each lane folds the same pixels in the same order (row-major window order, the
// padding's taps left out, as the reference clips them), by the same fold (pool_fold); the max
// starts from its first tap, which is what folding it into −inf gives, bits included; the sum
// starts as +0 + its first tap (vaddps from a zero register), as the reference's from +0; the
// divisor is the reference's integer as a float, one vdivps.
//
// NaN and the max: the fold `x > m || x != x ? x : m` costs a compare and a masked move besides
// the vmaxps (a plain vmaxps would drop a NaN x). Checking each plane for NaN first, to run plain
// vmaxps code where there is none, does not pay: on a plane larger than the cache the kernel
// waits on memory either way, and on a small one the check's pass costs what it saves.
//
// Window kernel. Rows and columns are each cut into spans (pool_spans): runs of outputs whose
// windows keep the same taps and divisor factor; a window's taps in the padding (or past the
// image, for a ceil_mode window) are not emitted. Each row span's row code is emitted once and
// loops over its rows. In a row, the interior column span (windows whole in the image) runs in a
// loop of G outputs when it holds more than 2G; the edges and the rest are unrolled. G outputs
// are folded together, taps outer, so that G independent chains hide the fold's latency.
//
// Register map (window). rsi rX the plane's input; rdx rY the output row; rcx rXr the input row
// where the window of the current output row starts (row oy·sh − ph, above the plane in the top
// padding); r8 rPlane, r9 rRow the plane and row counters; r10 rXc, r11 rYc the input and output
// of the interior loop, rdi rCol its counter (the argument pointer is read first); rax scratch.
// Vectors: 0–7 the G accumulators, 8 a tap's vector, 9 the AVX2 max before its NaN blend, 10
// zero (average). AVX-512: k2 the NaN lanes.
//
// Loop nest (window): planes (runtime) → row spans (each a runtime loop over its rows) → the
// outputs of a row (edges unrolled, the interior in groups of G, runtime) → window rows of the
// span → window columns → the group's outputs.
//
// Global kernel: G planes at a time (the last group fewer), a runtime loop over the pixels adding
// each plane's pixel vector into its accumulator, the reference's order; then ÷ H·W. Registers:
// rsi the group's input, rdx its output, rcx the pixel pointer, r8 the group counter, r9 the
// pixel counter; vectors 0–7 the accumulators.
#include <algorithm>
#include <limits>
#include <vector>

#include <fmt/format.h>
#include <xbyak/xbyak.h>

#include "jit/frame.h"
#include "jit/vecgen.h"
#include "ops/pool/pool_jit.h"

namespace nnasm {
namespace {

using namespace Xbyak;
using namespace Xbyak::util;

constexpr int G = 8;  // outputs (window kernel) or planes (global kernel) folded together
constexpr int64_t OFFSET_LIMIT = int64_t(1) << 28;  // floats; keeps byte offsets in 32 bits

// The code a block of b floats takes at level isa: AVX-512 for 16, AVX2 for 8; REF for none.
Isa code_isa(int64_t b, Isa isa) {
  if (b == 16) return isa >= Isa::AVX512 ? Isa::AVX512 : Isa::REF;
  return b == 8 && isa >= Isa::AVX2 ? Isa::AVX2 : Isa::REF;
}

// reg += bytes, for any 64-bit amount.
void advance(CodeGenerator& g, const Reg64& reg, int64_t bytes) {
  if (bytes == 0) return;
  g.mov(rax, bytes);
  g.add(reg, rax);
}

class WindowGen {
 public:
  WindowGen(CodeGenerator& g, const PoolGeom& p, int64_t b, bool max, bool include_pad, Isa isa, int64_t p0,
            int64_t p1)
      : g_(g), p_(p), vb_(4 * b), max_(max), include_pad_(include_pad), p0_(p0), p1_(p1), v_(g, isa) {}

  Status emit() {
    {
      Frame f(g_, 0);
      f.load_in(rX, 0);
      f.load_out(rY, 0);
      advance(g_, rX, p0_ * p_.h * p_.w * vb_);
      advance(g_, rY, p0_ * p_.ho * p_.wo * vb_);
      if (!max_) g_.vxorps(zero(), zero(), zero());
      const std::vector<PoolSpan> rows = pool_spans(p_, 0, !max_, include_pad_);
      cols_ = pool_spans(p_, 1, !max_, include_pad_);
      Label plane;
      g_.mov(rPlane, p1_ - p0_);
      g_.L(plane);
      g_.lea(rXr, ptr[rX - p_.ph * p_.w * vb_]);
      for (const PoolSpan& r : rows) row_span(r);
      advance(g_, rX, p_.h * p_.w * vb_);
      g_.dec(rPlane);
      g_.jnz(plane, CodeGenerator::T_NEAR);
    }
    v_.finish();
    return Status::ok();
  }

 private:
  // One output of a row and the column span it belongs to.
  struct Out {
    int64_t ox;
    const PoolSpan* col;
  };
  // Where a group's vectors are addressed: input column c of window row i at
  // in + (i·w + c − col)·vb, output column ox at out + (ox − ox0)·vb.
  struct Base {
    Reg64 in, out;
    int64_t col, ox0;
  };

  const Reg64 &rX = rsi, &rY = rdx, &rXr = rcx, &rPlane = r8, &rRow = r9, &rXc = r10, &rYc = r11, &rCol = rdi;

  Xmm acc(int k) const { return v_.vreg(k); }
  Xmm tap_reg() const { return v_.vreg(8); }
  Xmm tmp() const { return v_.vreg(9); }
  Xmm zero() const { return v_.vreg(10); }

  void row_span(const PoolSpan& r) {
    Label row;
    if (r.count > 1) {
      g_.mov(rRow, r.count);
      g_.L(row);
    }
    output_row(r);
    g_.add(rXr, static_cast<uint32_t>(p_.sh * p_.w * vb_));
    g_.add(rY, static_cast<uint32_t>(p_.wo * vb_));
    if (r.count > 1) {
      g_.dec(rRow);
      g_.jnz(row, CodeGenerator::T_NEAR);
    }
  }

  void output_row(const PoolSpan& r) {
    std::vector<Out> outs;
    const PoolSpan* interior = nullptr;
    for (const PoolSpan& c : cols_) {
      for (int64_t ox = c.o0; ox < c.o0 + c.count; ++ox) outs.push_back(Out{ox, &c});
      if (c.lo == 0 && c.hi == p_.kw && c.count > 2 * G) interior = &c;
    }
    const Base row{rXr, rY, 0, 0};
    if (!interior) {
      groups(outs, 0, outs.size(), r, row);
      return;
    }
    const size_t first = static_cast<size_t>(interior->o0), loops = static_cast<size_t>(interior->count / G);
    groups(outs, 0, first, r, row);
    const int64_t col = interior->o0 * p_.sw - p_.pw;
    g_.lea(rXc, ptr[rXr + col * vb_]);
    g_.lea(rYc, ptr[rY + interior->o0 * vb_]);
    g_.mov(rCol, loops);
    Label loop;
    g_.L(loop);
    group(std::vector<Out>(outs.begin() + first, outs.begin() + first + G), r, Base{rXc, rYc, col, interior->o0});
    g_.add(rXc, static_cast<uint32_t>(G * p_.sw * vb_));
    g_.add(rYc, static_cast<uint32_t>(G * vb_));
    g_.dec(rCol);
    g_.jnz(loop, CodeGenerator::T_NEAR);
    groups(outs, first + loops * G, outs.size(), r, row);
  }

  void groups(const std::vector<Out>& outs, size_t from, size_t to, const PoolSpan& r, const Base& base) {
    for (size_t k = from; k < to; k += G)
      group(std::vector<Out>(outs.begin() + k, outs.begin() + std::min(to, k + G)), r, base);
  }

  // Folds the taps of up to G outputs of a row of span r, then divides (average) and stores.
  void group(const std::vector<Out>& os, const PoolSpan& r, const Base& base) {
    bool started[G] = {};
    for (int64_t i = r.lo; i < r.hi; ++i)
      for (int64_t j = 0; j < p_.kw; ++j)
        for (size_t k = 0; k < os.size(); ++k) {
          if (j < os[k].col->lo || j >= os[k].col->hi) continue;
          const Address x = ptr[base.in + (i * p_.w + os[k].ox * p_.sw - p_.pw + j - base.col) * vb_];
          const Xmm y = acc(static_cast<int>(k));
          if (!started[k] && max_) g_.vmovups(y, x);
          else if (!started[k]) g_.vaddps(y, zero(), x);
          else if (!max_) g_.vaddps(y, y, x);
          else {
            g_.vmovups(tap_reg(), x);
            pool_fold(v_, true, y, tap_reg(), tmp());
          }
          started[k] = true;
        }
    for (size_t k = 0; k < os.size(); ++k) {
      const Xmm y = acc(static_cast<int>(k));
      if (!started[k]) g_.vmovups(y, v_.cst(max_ ? -std::numeric_limits<float>::infinity() : 0.f));  // no tap
      if (!max_) g_.vdivps(y, y, v_.cst(static_cast<float>(r.factor * os[k].col->factor)));
      g_.vmovups(ptr[base.out + (os[k].ox - base.ox0) * vb_], y);
    }
  }

  CodeGenerator& g_;
  const PoolGeom& p_;
  int64_t vb_;  // bytes per pixel vector
  bool max_, include_pad_;
  int64_t p0_, p1_;  // the planes this kernel (part) computes
  VecGen v_;
  std::vector<PoolSpan> cols_;
};

class GlobalGen {
 public:
  GlobalGen(CodeGenerator& g, int64_t pixels, int64_t b, Isa isa, int64_t p0, int64_t p1)
      : g_(g), pixels_(pixels), vb_(4 * b), p0_(p0), p1_(p1), v_(g, isa) {}

  Status emit() {
    {
      Frame f(g_, 0);
      f.load_in(rX, 0);
      f.load_out(rY, 0);
      advance(g_, rX, p0_ * pixels_ * vb_);
      advance(g_, rY, p0_ * vb_);
      const int64_t planes = p1_ - p0_, full = planes / G;
      if (full > 0) {
        Label group;
        g_.mov(rGroup, full);
        g_.L(group);
        planes_group(G);
        advance(g_, rX, G * pixels_ * vb_);
        g_.add(rY, static_cast<uint32_t>(G * vb_));
        g_.dec(rGroup);
        g_.jnz(group, CodeGenerator::T_NEAR);
      }
      if (planes % G) planes_group(static_cast<int>(planes % G));
    }
    v_.finish();
    return Status::ok();
  }

 private:
  const Reg64 &rX = rsi, &rY = rdx, &rXp = rcx, &rGroup = r8, &rPixel = r9;

  // The means of n planes from rX into n vectors from rY.
  void planes_group(int n) {
    for (int k = 0; k < n; ++k) g_.vxorps(v_.vreg(k), v_.vreg(k), v_.vreg(k));
    Label pixel;
    g_.mov(rXp, rX);
    g_.mov(rPixel, pixels_);
    g_.L(pixel);
    for (int k = 0; k < n; ++k) g_.vaddps(v_.vreg(k), v_.vreg(k), ptr[rXp + k * pixels_ * vb_]);
    g_.add(rXp, static_cast<uint32_t>(vb_));
    g_.dec(rPixel);
    g_.jnz(pixel, CodeGenerator::T_NEAR);
    for (int k = 0; k < n; ++k) {
      g_.vdivps(v_.vreg(k), v_.vreg(k), v_.cst(static_cast<float>(pixels_)));
      g_.vmovups(ptr[rY + k * vb_], v_.vreg(k));
    }
  }

  CodeGenerator& g_;
  int64_t pixels_, vb_;
  int64_t p0_, p1_;
  VecGen v_;
};

bool window_applies(const PoolGeom& p, int64_t b, Isa isa) {
  return code_isa(b, isa) != Isa::REF && p.planes() > 0 && p.ho > 0 && p.wo > 0 && pool_jit_window_fits(p) &&
         (p.h + p.kh + p.sh) * p.w * b < OFFSET_LIMIT && p.ho * p.wo * b < OFFSET_LIMIT && p.sw * b < OFFSET_LIMIT;
}

bool global_applies(int64_t pixels, int64_t b, Isa isa) {
  return code_isa(b, isa) != Isa::REF && pixels > 0 && G * pixels * b < OFFSET_LIMIT;
}

}  // namespace

int pool_nchwc_jit_parts(const PoolGeom& p, int64_t b, Isa isa, int threads) {
  if (!window_applies(p, b, isa)) return 1;
  return pool_plane_parts(p.planes(), p.planes() * p.ho * p.wo * p.kh * p.kw * b, threads);
}

Result<std::shared_ptr<const JitKernel>> pool_nchwc_jit_kernel(const PoolGeom& p, int64_t b, bool max, bool include_pad,
                                                               Isa isa, int part, int n_parts, KernelCache& cache) {
  if (!window_applies(p, b, isa)) return std::shared_ptr<const JitKernel>();
  const Isa code = code_isa(b, isa);
  const int64_t p0 = p.planes() * part / n_parts, p1 = p.planes() * (part + 1) / n_parts;
  const std::string name = fmt::format("f32_{}pool2d_nchwc{}__{}_{}x{}s{}", max ? "max" : "avg", b, isa_name(code),
                                       p.kh, p.kw, p.sw);
  const std::string key = fmt::format("{}|{}x{}|s{}|p{}x{}|{}x{}|{}|{}-{}", name, p.h, p.w, p.sh, p.ph, p.pw, p.ho,
                                      p.wo, max || include_pad, p0, p1);
  return build_kernel_measured(cache, key, name, size_t(2) << 20,
                               [p, b, max, include_pad, code, p0, p1](CodeGenerator& g) {
                                 return WindowGen(g, p, b, max, include_pad, code, p0, p1).emit();
                               });
}

int global_avgpool_nchwc_jit_parts(int64_t planes, int64_t pixels, int64_t b, Isa isa, int threads) {
  if (!global_applies(pixels, b, isa)) return 1;
  return pool_plane_parts(planes, planes * pixels * b, threads);
}

Result<std::shared_ptr<const JitKernel>> global_avgpool_nchwc_jit_kernel(int64_t planes, int64_t pixels, int64_t b,
                                                                         Isa isa, int part, int n_parts,
                                                                         KernelCache& cache) {
  if (!global_applies(pixels, b, isa)) return std::shared_ptr<const JitKernel>();
  const Isa code = code_isa(b, isa);
  const int64_t p0 = planes * part / n_parts, p1 = planes * (part + 1) / n_parts;
  const std::string name = fmt::format("f32_global_avgpool_nchwc{}__{}", b, isa_name(code));
  const std::string key = fmt::format("{}|{}|{}-{}", name, pixels, p0, p1);
  return build_kernel_measured(cache, key, name, size_t(64) << 10, [pixels, b, code, p0, p1](CodeGenerator& g) {
    return GlobalGen(g, pixels, b, code, p0, p1).emit();
  });
}

}  // namespace nnasm
