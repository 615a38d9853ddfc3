// The generated MAXPOOL2D / AVGPOOL2D forward kernel, NCHW, for any window, stride, padding and
// ceil_mode within the limits of pool_jit_applies, bitwise equal to the reference kernels of
// pool2d.cpp.
//
// Why the result is bitwise the reference's: the reference folds a window's image elements in
// row-major window order, max by `v > m || v != v ? v : m` from −inf, sum by + from +0, then one
// division. The max fold selects one element (the last NaN, else the first maximum), so any
// grouping that keeps the order gives the same bits; −inf is its identity. The sum starts at +0
// and so is never −0, which makes +0 its identity (NaN payloads pass through unchanged). So a
// lane whose tap falls in the padding (or past the image in a ceil_mode window) may fold the
// identity instead of skipping the tap: the kernel folds whole vectors, taps in window order.
//
// Columns: an output row is cut into vectors of n outputs (W = 8 on AVX2, 16 on AVX-512) and G
// vectors are folded together, taps outer, so that G independent fold chains hide each one's
// latency. A tap reaches a vector's inputs one of two ways:
//  - By phases (AVX-512 at column stride s ≤ 2, n = W): per window row, the s·W input columns
//    of each vector are loaded once and split into s phase vectors (stride 2: even and odd
//    columns, by vpermi2ps / vpermt2ps); tap j = s·m + r is phase r shifted down m lanes, the
//    lanes shifted in taken from the next vector's phase r (valignd). Each input is loaded about
//    once per window row instead of once per tap.
//  - Per tap (AVX2, and AVX-512 from stride 3): the tap's (n − 1)·s + 1 input columns are loaded
//    as one or two vectors and compacted: vpermt2ps on AVX-512 (n = 11 at stride 3, 8 at 4 …),
//    vshufps + vpermpd at stride 2 and two vpermps + a blend from 3 on AVX2 (n = 8, then 6, 4 …).
// A load never leaves the image row: one that would is masked (the lanes left out read 0), and
// for max the lanes whose column lies outside the image then become −inf by one vorps with a
// constant. A tap with no lane inside the image is not emitted. Vectors whose loads all lie whole
// inside the row ("clean") run in a loop of G vectors when a row has more than 2G of them; the
// edge vectors (padding, ceil_mode partial windows, the tail) are unrolled with their masks.
//
// Rows: output rows whose windows cover the same window rows (clipped by the top or bottom
// padding or a ceil_mode partial window) and, for average, have the same divisor's row factor
// form one segment (pool_spans); each segment's row code is emitted once and loops over its rows
// (the interior rows are one segment). The average's divisor is the reference's, per output, as
// a constant vector of the segment; then one vdivps.
//
// Register map. General: rsi rX the plane's input; rdx rY the output row; rcx rXr the input row
// where the window of the current output row starts (row oy·sh − ph, above the plane in the top
// padding); r8 rPlane, r9 rRow the plane and row counters; r10 rXc, r11 rYc the input and output
// of the clean-vector loop, rdi rCol its counter (the argument pointer is read first); eax mask
// scratch. AVX-512: zmm0–3 the G accumulators, zmm4 / zmm5 a tap's input vectors (by phases:
// the second load of a stride-2 vector, then a shifted tap), zmm6 / zmm7 the compaction indices
// (by phases: even and odd columns), zmm16–25 the phases of G + 1 vectors; k1 the store tail, k2
// the NaN lanes, k3–k7 load masks. AVX2: ymm0–3 the accumulators, ymm4 / ymm5 the input
// vectors, ymm6 the max before the NaN blend, ymm7 / ymm8 the compaction indices of the two
// input vectors (stride ≥ 3), ymm12–14 load masks, ymm15 the store tail.
//
// Loop nest: planes (runtime) → row segments (each a runtime loop over its rows) → vectors of a
// row (edges unrolled, clean ones in groups of G, runtime) → window rows of the segment → window
// columns → the group's vectors.
#include "ops/pool/pool_jit.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include <fmt/format.h>
#include <xbyak/xbyak.h>

#include "jit/frame.h"
#include "jit/vecgen.h"

namespace nnasm {
namespace {

using namespace Xbyak;
using namespace Xbyak::util;

constexpr int G = 4;                  // vectors folded together
constexpr int CLEAN_LOOP_FROM = 2 * G;  // clean vectors in a row from which they run in a loop
constexpr int64_t OFFSET_LIMIT = int64_t(1) << 28;  // elements; keeps byte offsets in 32 bits

// Outputs per vector of W lanes at column stride s: a tap's input columns span (n − 1)·s + 1,
// at most two vectors.
int outputs_per_vector(int width, int64_t s) {
  return s == 1 ? width : static_cast<int>(std::min<int64_t>(width, (2 * width - 1) / s + 1));
}

uint32_t float_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

class Gen {
 public:
  Gen(CodeGenerator& g, const PoolGeom& p, bool max, bool include_pad, Isa isa, int64_t p0, int64_t p1)
      : g_(g), p_(p), max_(max), include_pad_(include_pad), p0_(p0), p1_(p1), v_(g, isa),
        n_(outputs_per_vector(v_.width(), p.sw)) {}

  Status emit() {
    {
      Frame f(g_, 0);
      f.load_in(rX, 0);
      f.load_out(rY, 0);
      if (p0_ > 0) {
        g_.mov(rax, p0_ * p_.h * p_.w * 4);
        g_.add(rX, rax);
        g_.mov(rax, p0_ * p_.ho * p_.wo * 4);
        g_.add(rY, rax);
      }
      load_indices();
      Label plane;
      g_.mov(rPlane, p1_ - p0_);
      g_.L(plane);
      g_.lea(rXr, ptr[rX - p_.ph * p_.w * 4]);
      for (const PoolSpan& s : pool_spans(p_, 0, !max_, include_pad_)) segment(s);
      g_.add(rX, p_.h * p_.w * 4);
      g_.dec(rPlane);
      g_.jnz(plane, CodeGenerator::T_NEAR);
    }
    v_.finish();
    return Status::ok();
  }

 private:
  // Outputs [ox0, ox0 + nv) of a row.
  struct Vec {
    int64_t ox0;
    int nv;
  };
  // Where a group's vectors are addressed: input column c of window row i at
  // in + (i·w + c − col)·4, output column ox at out + (ox − ox)·4.
  struct Base {
    Reg64 in, out;
    int64_t col, ox;
  };

  const Reg64 &rX = rsi, &rY = rdx, &rXr = rcx, &rPlane = r8, &rRow = r9, &rXc = r10, &rYc = r11, &rCol = rdi;

  Xmm acc(int k) const { return v_.vreg(k); }
  Xmm a() const { return v_.vreg(4); }
  Xmm b() const { return v_.vreg(5); }
  Xmm t() const { return v_.vreg(6); }
  Xmm idx(int r) const { return v_.vreg(v_.avx512() ? 6 + r : 7 + r); }
  Xmm phase(int k, int r) const { return v_.vreg(16 + k * static_cast<int>(p_.sw) + r); }
  Xmm tail_reg() const { return v_.vreg(15); }

  int64_t span(int nv) const { return (nv - 1) * p_.sw + 1; }
  int regs(int nv) const { return static_cast<int>((span(nv) + v_.width() - 1) / v_.width()); }

  void load_indices() {
    const int64_t s = p_.sw;
    if (s == 1 || (!v_.avx512() && s == 2)) return;
    std::vector<uint32_t> i0(16, 0), i1(16, 0);
    for (int l = 0; l < n_; ++l) {
      const int64_t pos = l * s;
      if (v_.avx512()) i0[l] = static_cast<uint32_t>(pos), i1[l] = static_cast<uint32_t>(pos + 1);
      else (pos < 8 ? i0 : i1)[l] = static_cast<uint32_t>(pos % 8);
    }
    g_.vmovups(idx(0), v_.cst_u32(i0));
    if (!v_.avx512() || phases_) g_.vmovups(idx(1), v_.cst_u32(i1));
  }

  void segment(const PoolSpan& s) {
    Label row;
    if (s.count > 1) {
      g_.mov(rRow, s.count);
      g_.L(row);
    }
    output_row(s);
    g_.add(rXr, p_.sh * p_.w * 4);
    g_.add(rY, p_.wo * 4);
    if (s.count > 1) {
      g_.dec(rRow);
      g_.jnz(row, CodeGenerator::T_NEAR);
    }
  }

  // Whether every tap of a full vector at ox0 loads whole vectors inside the image row.
  bool clean(int64_t ox0) const {
    const int64_t c = ox0 * p_.sw - p_.pw;
    if (phases_) return c >= 0 && c + (p_.kw > p_.sw ? 2 : 1) * p_.sw * v_.width() <= p_.w;
    return c >= 0 && c + p_.kw - 1 + regs(n_) * v_.width() <= p_.w;
  }

  void output_row(const PoolSpan& s) {
    forget_masks();
    std::vector<Vec> vecs;
    for (int64_t ox0 = 0; ox0 < p_.wo; ox0 += n_)
      vecs.push_back(Vec{ox0, static_cast<int>(std::min<int64_t>(n_, p_.wo - ox0))});
    size_t c0 = 0, c1 = 0;  // the clean vectors [c0, c1): a contiguous run
    while (c0 < vecs.size() && !(vecs[c0].nv == n_ && clean(vecs[c0].ox0))) ++c0;
    c1 = c0;
    while (c1 < vecs.size() && vecs[c1].nv == n_ && clean(vecs[c1].ox0)) ++c1;
    const Base row{rXr, rY, 0, 0};
    if (c1 - c0 <= static_cast<size_t>(CLEAN_LOOP_FROM)) {
      groups(vecs, 0, vecs.size(), s, row);
      return;
    }
    groups(vecs, 0, c0, s, row);
    const int64_t loops = static_cast<int64_t>((c1 - c0) / G);
    const int64_t ox0 = vecs[c0].ox0;
    g_.lea(rXc, ptr[rXr + ox0 * p_.sw * 4]);
    g_.lea(rYc, ptr[rY + ox0 * 4]);
    g_.mov(rCol, loops);
    Label loop;
    g_.L(loop);
    forget_masks();
    group(std::vector<Vec>(vecs.begin() + c0, vecs.begin() + c0 + G), s, Base{rXc, rYc, ox0 * p_.sw, ox0});
    g_.add(rXc, G * n_ * p_.sw * 4);
    g_.add(rYc, G * n_ * 4);
    g_.dec(rCol);
    g_.jnz(loop, CodeGenerator::T_NEAR);
    groups(vecs, c0 + static_cast<size_t>(loops) * G, vecs.size(), s, row);
  }

  void groups(const std::vector<Vec>& vecs, size_t from, size_t to, const PoolSpan& s, const Base& base) {
    for (size_t k = from; k < to; k += G)
      group(std::vector<Vec>(vecs.begin() + k, vecs.begin() + std::min(to, k + G)), s, base);
  }

  // Folds the taps of segment s into up to G vectors, then divides (average) and stores.
  void group(const std::vector<Vec>& vs, const PoolSpan& s, const Base& base) {
    bool started[G] = {};
    if (!max_)
      for (size_t k = 0; k < vs.size(); ++k) g_.vxorps(acc(k), acc(k), acc(k));
    for (int64_t i = s.lo; i < s.hi; ++i) {
      if (phases_) {
        window_row_by_phases(vs, i, base, started);
        continue;
      }
      for (int64_t j = 0; j < p_.kw; ++j)
        for (size_t k = 0; k < vs.size(); ++k) tap(vs[k], static_cast<int>(k), i, j, base, &started[k]);
    }
    for (size_t k = 0; k < vs.size(); ++k) {
      const Xmm y = acc(static_cast<int>(k));
      if (max_ && !started[k]) g_.vmovups(y, v_.cst(-std::numeric_limits<float>::infinity()));
      if (!max_) g_.vdivps(y, y, divisor(vs[k], s));
      const int nv = vs[k].nv;
      if (nv < v_.width()) v_.set_tail(nv, tail_reg());
      v_.store(ptr[base.out + (vs[k].ox0 - base.ox) * 4], y, nv);
    }
  }

  // The reference's divisor for each output of v in a row of segment s (lanes past nv: 1).
  Address divisor(const Vec& v, const PoolSpan& s) {
    std::vector<uint32_t> lanes(16, float_bits(1.f));
    for (int l = 0; l < v.nv; ++l)
      lanes[l] = float_bits(static_cast<float>(p_.divisor(include_pad_, s.o0, v.ox0 + l)));
    if (std::all_of(lanes.begin(), lanes.begin() + v.nv, [&](uint32_t w) { return w == lanes[0]; }))
      return v_.cst_bits(lanes[0]);
    return v_.cst_u32(lanes);
  }

  // Lanes of v whose tap j column lies in the image.
  uint32_t inside(const Vec& v, int64_t j) const {
    const int64_t c = v.ox0 * p_.sw - p_.pw + j;
    uint32_t bits = 0;
    for (int l = 0; l < v.nv; ++l)
      if (c + l * p_.sw >= 0 && c + l * p_.sw < p_.w) bits |= 1u << l;
    return bits;
  }

  // The phase vectors of window row i for the W outputs from ox0: phase(k, r) lane l = input
  // column ox0·s − pw + r + s·l, for r < s (s·W columns, loaded once); the columns outside the
  // image are the fold's identity.
  void load_phases(int k, int64_t ox0, int64_t i, const Base& base) {
    const int width = v_.width();
    const int64_t s = p_.sw, c = ox0 * s - p_.pw;
    for (int64_t q = 0; q < s; ++q) {
      const Xmm dst = q == 0 ? phase(k, 0) : a();
      const int64_t c_q = c + q * width;
      const Address src = ptr[base.in + (i * p_.w + c_q - base.col) * 4];
      uint32_t bits = 0;
      for (int l = 0; l < width; ++l)
        if (c_q + l >= 0 && c_q + l < p_.w) bits |= 1u << l;
      if (bits == (1u << width) - 1) g_.vmovups(dst, src);
      else if (bits) masked_load(dst, src, bits);
      else g_.vxorps(dst, dst, dst);
    }
    if (s == 2) {
      const Zmm even(phase(k, 0).getIdx()), odd(phase(k, 1).getIdx()), hi(a().getIdx());
      g_.vmovaps(odd, Zmm(idx(1).getIdx()));
      g_.vpermi2ps(odd, even, hi);
      g_.vpermt2ps(even, Zmm(idx(0).getIdx()), hi);
    }
    if (!max_) return;
    for (int64_t r = 0; r < s; ++r) {
      std::vector<uint32_t> fill(16, 0);
      bool any = false;
      for (int l = 0; l < width; ++l) {
        const int64_t col = c + r + s * l;
        if (col < 0 || col >= p_.w) fill[l] = float_bits(-std::numeric_limits<float>::infinity()), any = true;
      }
      if (any) g_.vorps(phase(k, r), phase(k, r), v_.cst_u32(fill));
    }
  }

  // Window row i of the group vs by phases: tap j = s·m + r of vector k is phase r of k shifted
  // down m lanes (valignd with phase r of the next W outputs).
  void window_row_by_phases(const std::vector<Vec>& vs, int64_t i, const Base& base, bool* started) {
    const int64_t s = p_.sw, shift_max = (p_.kw - 1) / s;
    const int width = v_.width();
    for (size_t k = 0; k < vs.size(); ++k) load_phases(static_cast<int>(k), vs[k].ox0, i, base);
    const Vec& last = vs.back();
    if (shift_max > 0 && (last.nv == width || last.nv + shift_max > width))
      load_phases(static_cast<int>(vs.size()), last.ox0 + width, i, base);
    for (int64_t j = 0; j < p_.kw; ++j)
      for (size_t k = 0; k < vs.size(); ++k) {
        if (!inside(vs[k], j)) continue;
        const int r = static_cast<int>(j % s), m = static_cast<int>(j / s);
        Xmm x = phase(static_cast<int>(k), r);
        if (m > 0) {
          g_.valignd(a(), phase(static_cast<int>(k) + 1, r), x, static_cast<uint8_t>(m));
          x = a();
        }
        const Xmm y = acc(static_cast<int>(k));
        if (max_ && !started[k]) g_.vmovaps(y, x);
        else fold(y, x);
        started[k] = true;
      }
  }

  // Folds tap (i, j) into accumulator k, which holds vector v.
  void tap(const Vec& v, int k, int64_t i, int64_t j, const Base& base, bool* started) {
    const int64_t s = p_.sw, c = v.ox0 * s - p_.pw + j;  // the input column of lane 0
    const uint32_t in_image = inside(v, j);
    if (!in_image) return;
    const bool first = max_ && !*started;
    const Xmm x = first ? acc(k) : a();
    const int nr = regs(v.nv), width = v_.width();
    for (int r = 0; r < nr; ++r) {
      const Xmm dst = r == 0 ? x : b();
      const int64_t c_r = c + r * width;
      const Address src = ptr[base.in + (i * p_.w + c_r - base.col) * 4];
      if (c_r >= 0 && c_r + width <= p_.w) {
        g_.vmovups(dst, src);
        continue;
      }
      uint32_t bits = 0;  // columns of the span inside the row
      for (int q = 0; q < width; ++q)
        if (r * width + q < span(v.nv) && c_r + q >= 0 && c_r + q < p_.w) bits |= 1u << q;
      if (!bits) g_.vxorps(dst, dst, dst);
      else masked_load(dst, src, bits);
    }
    if (v.nv > 1) compact(x, nr);
    const uint32_t all = (1u << v.nv) - 1;
    if (max_ && in_image != all) {
      std::vector<uint32_t> fill(16, 0);
      for (int l = 0; l < v.nv; ++l)
        if (!(in_image >> l & 1)) fill[l] = float_bits(-std::numeric_limits<float>::infinity());
      g_.vorps(x, x, v_.cst_u32(fill));
    }
    if (first) *started = true;
    else fold(acc(k), x);
  }

  // Lane l of x = input column l·s of the tap (x, then b, holding its span).
  void compact(const Xmm& x, int nr) {
    const int64_t s = p_.sw;
    if (s == 1) return;
    if (v_.avx512()) {
      const Zmm z(x.getIdx()), i0(idx(0).getIdx());
      if (nr == 2) g_.vpermt2ps(z, i0, Zmm(b().getIdx()));
      else g_.vpermps(z, i0, z);
      return;
    }
    const Ymm y(x.getIdx()), yb(b().getIdx());
    if (s == 2) {
      g_.vshufps(y, y, nr == 2 ? yb : y, 0x88);  // y0 y2 b0 b2 | y4 y6 b4 b6
      g_.vpermpd(y, y, 0xd8);                    // y0 y2 y4 y6 b0 b2 b4 b6
      return;
    }
    g_.vpermps(y, Ymm(idx(0).getIdx()), y);
    if (nr == 2) {
      int from_b = 0;
      for (int l = 0; l < n_; ++l)
        if (l * s >= 8) from_b |= 1 << l;
      g_.vpermps(yb, Ymm(idx(1).getIdx()), yb);
      g_.vblendps(y, y, yb, from_b);
    }
  }

  void fold(const Xmm& y, const Xmm& x) { pool_fold(v_, max_, y, x, t()); }

  // dst = the lanes of src that `bits` selects, the others 0; never touches the others' memory.
  void masked_load(const Xmm& dst, const Address& src, uint32_t bits) {
    if (v_.avx512()) g_.vmovups(dst | Opmask(mask(bits)) | T_z, src);
    else g_.vmaskmovps(dst, Ymm(mask(bits)), src);
  }

  // The register (k3–k7, or ymm12–14) holding the load mask `bits`, loaded if no register holds
  // it; forget_masks() wherever control flow joins.
  int mask(uint32_t bits) {
    for (const auto& m : masks_)
      if (m.first == bits) return m.second;
    const int slots = v_.avx512() ? 5 : 3, first_reg = v_.avx512() ? 3 : 12;
    const int reg = first_reg + next_mask_++ % slots;
    masks_.erase(std::remove_if(masks_.begin(), masks_.end(), [&](const auto& m) { return m.second == reg; }),
                 masks_.end());
    if (v_.avx512()) {
      g_.mov(eax, bits);
      g_.kmovw(Opmask(reg), eax);
    } else {
      g_.vmovups(Ymm(reg), v_.lane_mask(bits));
    }
    masks_.emplace_back(bits, reg);
    return reg;
  }
  void forget_masks() { masks_.clear(); }

  CodeGenerator& g_;
  const PoolGeom& p_;
  bool max_, include_pad_;
  int64_t p0_, p1_;  // the planes this kernel (part) computes
  VecGen v_;
  int n_;  // outputs per vector
  // Whether window rows are folded by phases (window_row_by_phases): AVX-512 at column stride 1
  // or 2, where a vector's s·W input columns fit two registers.
  bool phases_ = v_.avx512() && p_.sw <= 2;
  std::vector<std::pair<uint32_t, int>> masks_;
  int next_mask_ = 0;
};

}  // namespace

void pool_fold(VecGen& v, bool max, const Xmm& acc, const Xmm& x, const Xmm& t) {
  CodeGenerator& g = v.g;
  if (!max) {
    g.vaddps(acc, acc, x);
  } else if (v.avx512()) {
    g.vcmpps(k2, x, x, VecGen::CMP_UNORD);
    g.vmaxps(acc, x, acc);  // x > acc ? x : acc (acc when either is NaN, so a NaN acc sticks)
    g.vmovaps(acc | k2, x);
  } else {
    g.vmaxps(t, x, acc);
    g.vcmpunordps(acc, x, x);
    g.vblendvps(acc, t, x, acc);
  }
}

bool pool_jit_window_fits(const PoolGeom& p) {
  // Taps are unrolled per row segment and edge vector: at most 16 a side and 64 in all keep a
  // kernel well under 1 MiB.
  return p.kh <= 16 && p.kw <= 16 && p.kh * p.kw <= 64;
}

bool pool_jit_applies(const PoolGeom& p) {
  // Offsets within a plane (and a row step) stay 32-bit.
  return pool_jit_window_fits(p) && (p.h + p.kh + p.sh) * p.w < OFFSET_LIMIT && p.ho * p.wo < OFFSET_LIMIT &&
         p.sw < OFFSET_LIMIT;
}

int pool_plane_parts(int64_t planes, int64_t reads, int threads) {
  constexpr int64_t PART_READS = int64_t(1) << 17;  // input floats per part below which a split does not pay
  if (threads <= 1) return 1;
  return static_cast<int>(std::clamp<int64_t>(std::min(reads / PART_READS, planes), 1, threads));
}

int pool_jit_parts(const PoolGeom& p, int threads) {
  if (!pool_jit_applies(p)) return 1;
  return pool_plane_parts(p.planes(), p.planes() * p.ho * p.wo * p.kh * p.kw, threads);
}

Result<std::shared_ptr<const JitKernel>> pool_jit_kernel(const PoolGeom& p, bool max, bool include_pad, Isa isa,
                                                         int part, int n_parts, KernelCache& cache) {
  if (isa == Isa::REF || !pool_jit_applies(p)) return std::shared_ptr<const JitKernel>();
  const int64_t p0 = p.planes() * part / n_parts, p1 = p.planes() * (part + 1) / n_parts;
  const std::string name =
      fmt::format("f32_{}pool2d__{}_{}x{}s{}", max ? "max" : "avg", isa_name(isa), p.kh, p.kw, p.sw);
  const std::string key = fmt::format("{}|{}x{}|s{}|p{}x{}|{}x{}|{}|{}-{}", name, p.h, p.w, p.sh, p.ph, p.pw, p.ho,
                                      p.wo, max || include_pad, p0, p1);
  return build_kernel_measured(cache, key, name, size_t(2) << 20, [p, max, include_pad, isa, p0, p1](CodeGenerator& g) {
    return Gen(g, p, max, include_pad, isa, p0, p1).emit();
  });
}

}  // namespace nnasm
