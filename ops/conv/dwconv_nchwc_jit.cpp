// The generated kernel of dwconv_nchwc.h: one generator for AVX-512 (b = 16, zmm) and AVX2
// (b = 8, ymm) through jit/vecgen.h.
//
// Why it is shaped so: in NCHWc one vector is one pixel's b channels, and a tap multiplies every
// lane by its own channel's weight, so a tap of an output pixel is one FMA of the tap's weight
// vector with the input pixel's vector — no shuffles, no masks, no broadcasts, and a 7×7 map
// fills the vectors as well as a 112×112 one. A block of output pixels along a row is held in
// registers (one accumulator each) while the taps run; taps outside the map are not emitted at
// all, which is the whole of the padding. An input vector that several taps of the block read
// (at stride 1 a column serves kw pixels) is loaded once into a register for all of them, so the
// FMAs, not the loads, set the pace (at one 512-bit load a cycle, one load per FMA held a core
// to about three quarters of its FMA peak).
//
// Register map (W = b floats: zmm on AVX-512, ymm on AVX2): acc(p) = vreg(p) for the block's np
// pixels; then the weights: when all kh·kw fit with at least 12 accumulators left (3×3 on
// AVX-512), one register a tap, loaded once per channel block and kept over all its rows; else
// one a tap column, the current tap row's, reloaded per block and tap row; then the temporaries:
// two input vectors used in turn (the bias vector before the taps, the activation's scratch
// after them). General registers: rsi rX, rcx rY, rdx rW, r8 rB the channel block's input plane,
// output plane, weights and bias; r9 rXr / r10 rYr the input row (oy·sh − ph, above the plane in
// the top padding) and output row; r11 rXc / rax rYc the column block in the loop over clean
// column blocks; rbx rCh the channel blocks left, rbp rRow the clean rows left, rdi rCol the
// clean column blocks left (the argument pointer is read first).
//
// Loop nest: channel blocks (runtime count from in[3]) → the rows of [r0, r1): those whose tap
// rows leave the map unrolled with those taps left out, the clean ones in a runtime loop →
// column blocks of np pixels: those whose taps leave the row unrolled with those taps left out,
// runs of clean full blocks in a runtime loop → tap rows → the input columns under the block →
// the taps of the block's pixels that read the column (one FMA each).
#include <algorithm>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <xbyak/xbyak.h>

#include "jit/act_snippet.h"
#include "jit/frame.h"
#include "jit/vecgen.h"
#include "ops/conv/dwconv_nchwc.h"

namespace nnasm {
namespace {

using namespace Xbyak;
using namespace Xbyak::util;

constexpr int MAX_PIXELS = 16;                      // accumulators of a column block
constexpr int MIN_ACCS_WITH_WEIGHT_REGS = 12;       // FMA latency 4 on two pipes wants 8 chains, and more
constexpr int MIN_ACCS = 4;                         // fewer: the reference
constexpr int64_t MAX_DISP = int64_t(1) << 30;      // byte offsets the code bakes in stay below this
constexpr int64_t MAX_EDGE_ROWS = 32;               // unrolled rows that reach into the padding
constexpr int64_t MAX_CODE_FMAS = int64_t(1) << 15;  // unrolled FMAs (about 8 bytes each)
constexpr size_t MAX_ACT_BYTES = 256;                // a pixel's activation snippet, generously

Isa code_isa(const DwNchwc& d) { return d.b == 16 ? Isa::AVX512 : Isa::AVX2; }

struct Plan {
  bool all_weights;  // every tap's weight has a register (else a tap row's, reloaded per block)
  int temps;         // past the accumulators and the weights
  int np;            // pixels of a full column block; 0: too few registers for the kernel
  int64_t blocks;    // column blocks in a row (the last may be narrower)
};

Plan plan(const DwNchwc& d) {
  const int regs = code_isa(d) == Isa::AVX512 ? 32 : 16;
  const int taps = static_cast<int>(d.taps()), n_act = act_snippet(d.act, d.act_alpha).n_tmp;
  Plan p{};
  // Two input vectors in turn (a load overlaps the FMAs of the one before); the bias before the
  // taps and the activation after them take the same registers.
  p.temps = std::max(2, n_act);
  p.all_weights = regs - taps - p.temps >= MIN_ACCS_WITH_WEIGHT_REGS;
  const int accs = std::min(MAX_PIXELS, regs - static_cast<int>(p.all_weights ? taps : d.kw) - p.temps);
  if (accs < MIN_ACCS) return p;
  // As few blocks as the accumulators allow, of equal width: 56 columns as 4 × 14, not 3 × 16 + 8.
  p.blocks = (d.wo + accs - 1) / accs;
  p.np = static_cast<int>((d.wo + p.blocks - 1) / p.blocks);
  return p;
}

// Whether output row oy reads only rows inside the map (and column block k only columns inside).
bool row_clean(const DwNchwc& d, int64_t oy) {
  const int64_t top = oy * d.sh - d.ph;
  return top >= 0 && top + (d.kh - 1) * d.dh < d.h;
}
bool block_clean(const DwNchwc& d, int64_t ox0, int64_t count) {
  const int64_t left = ox0 * d.sw - d.pw;
  return left >= 0 && (ox0 + count - 1) * d.sw - d.pw + (d.kw - 1) * d.dw < d.w;
}

// The column blocks: [ox0, ox0 + count) each, and whether a runtime loop runs it with the
// clean full blocks after it (`run` of them, counting itself; 0 for the rest of the run).
struct ColumnBlock {
  int64_t ox0, count;
  int64_t run = 1;
};

std::vector<ColumnBlock> column_blocks(const DwNchwc& d, const Plan& p) {
  std::vector<ColumnBlock> v;
  for (int64_t k = 0; k < p.blocks; ++k) v.push_back({k * p.np, std::min<int64_t>(p.np, d.wo - k * p.np)});
  // Runs of two or more clean full blocks loop; the others stay unrolled.
  for (size_t k = 0; k < v.size();) {
    size_t e = k;
    while (e < v.size() && v[e].count == p.np && block_clean(d, v[e].ox0, v[e].count)) ++e;
    if (e - k >= 2) {
      v[k].run = static_cast<int64_t>(e - k);
      for (size_t m = k + 1; m < e; ++m) v[m].run = 0;
      k = e;
    } else {
      k = std::max(k + 1, e);
    }
  }
  return v;
}

// What the code unrolls: the edge rows (*edge_rows) and the clean rows' loop body, each with every
// emitted column block; the result counts their output pixels, each up to kh·kw FMAs and an
// activation.
int64_t code_pixels(const DwNchwc& d, const Plan& p, int64_t* edge_rows) {
  *edge_rows = 0;
  for (int64_t oy = 0; oy < d.ho; ++oy) *edge_rows += row_clean(d, oy) ? 0 : 1;
  int64_t emitted_blocks = 0;
  for (const ColumnBlock& b : column_blocks(d, p)) emitted_blocks += b.run > 0 ? 1 : 0;
  return (*edge_rows + 1) * emitted_blocks * p.np;
}

class Gen {
 public:
  Gen(CodeGenerator& g, const DwNchwc& d, int64_t r0, int64_t r1)
      : g_(g), d_(d), r0_(r0), r1_(r1), p_(plan(d)), cols_(column_blocks(d, p_)), v_(g, code_isa(d)),
        vb_(4 * d.b) {}

  Status emit() {
    {
      Frame f(g_, 2);
      f.load_in(rX, 0);
      f.load_in(rW, 1);
      if (d_.bias) f.load_in(rB, 2);
      f.load_in(rCh, 3);
      g_.mov(rCh, ptr[rCh]);
      f.load_out(rY, 0);
      Label channel_block;
      g_.L(channel_block);
      if (p_.all_weights)
        for (int t = 0; t < d_.taps(); ++t) g_.vmovups(weight(t), ptr[rW + t * vb_]);
      rows();
      g_.add(rX, d_.in_plane() * 4);
      g_.add(rY, d_.out_plane() * 4);
      g_.add(rW, d_.taps() * vb_);
      if (d_.bias) g_.add(rB, vb_);
      g_.dec(rCh);
      g_.jnz(channel_block, CodeGenerator::T_NEAR);
    }
    v_.finish();
    return Status::ok();
  }

 private:
  const Reg64 &rX = rsi, &rY = rcx, &rW = rdx, &rB = r8, &rXr = r9, &rYr = r10, &rXc = r11, &rYc = rax, &rCh = rbx,
              &rRow = rbp, &rCol = rdi;

  Xmm acc(int p) const { return v_.vreg(p); }
  // Tap (i, j)'s weight: its own register, or with a tap row's weights, column j's.
  Xmm weight(int64_t i, int64_t j) const { return v_.vreg(p_.np + static_cast<int>(p_.all_weights ? i * d_.kw + j : j)); }
  Xmm weight(int64_t t) const { return weight(t / d_.kw, t % d_.kw); }
  Xmm temp(int k) const { return v_.vreg(p_.np + static_cast<int>(p_.all_weights ? d_.taps() : d_.kw) + k); }

  // Rows [r0, r1): the clean ones (a contiguous range) in a loop, the others unrolled.
  void rows() {
    int64_t lo = r0_;
    while (lo < r1_ && !row_clean(d_, lo)) row_at(lo++);
    int64_t hi = lo;
    while (hi < r1_ && row_clean(d_, hi)) ++hi;
    if (hi - lo == 1) row_at(lo);
    if (hi - lo >= 2) {
      g_.lea(rXr, ptr[rX + (lo * d_.sh - d_.ph) * d_.w * vb_]);
      g_.lea(rYr, ptr[rY + lo * d_.wo * vb_]);
      g_.mov(rRow, hi - lo);
      Label top;
      g_.L(top);
      row(lo);
      g_.add(rXr, d_.sh * d_.w * vb_);
      g_.add(rYr, d_.wo * vb_);
      g_.dec(rRow);
      g_.jnz(top, CodeGenerator::T_NEAR);
    }
    for (int64_t oy = hi; oy < r1_; ++oy) row_at(oy);
  }

  void row_at(int64_t oy) {
    g_.lea(rXr, ptr[rX + (oy * d_.sh - d_.ph) * d_.w * vb_]);
    g_.lea(rYr, ptr[rY + oy * d_.wo * vb_]);
    row(oy);
  }

  // One output row at rXr / rYr; oy gives which tap rows lie in the map (any clean row for the
  // loop's body).
  void row(int64_t oy) {
    std::vector<int64_t> tap_rows;
    for (int64_t i = 0; i < d_.kh; ++i) {
      const int64_t iy = oy * d_.sh - d_.ph + i * d_.dh;
      if (iy >= 0 && iy < d_.h) tap_rows.push_back(i);
    }
    for (const ColumnBlock& b : cols_) {
      if (b.run == 0) continue;
      if (b.run == 1) {
        block(rXr, rYr, 0, b.ox0, b.count, tap_rows);
        continue;
      }
      g_.lea(rXc, ptr[rXr + b.ox0 * d_.sw * vb_]);
      g_.lea(rYc, ptr[rYr + b.ox0 * vb_]);
      g_.mov(rCol, b.run);
      Label next;
      g_.L(next);
      block(rXc, rYc, b.ox0, b.ox0, b.count, tap_rows);
      g_.add(rXc, p_.np * d_.sw * vb_);
      g_.add(rYc, p_.np * vb_);
      g_.dec(rCol);
      g_.jnz(next, CodeGenerator::T_NEAR);
    }
  }

  // Output pixels [ox0, ox0 + count) of the row: input column c at xb + (c − origin·sw)·vb,
  // output column ox at yb + (ox − origin)·vb (origin: the column the base registers stand for).
  // Per tap row, the input columns in order: one that several taps of the block read is loaded
  // once into a register for all of them (stride 1: up to kw pixels' taps), one that a single
  // tap reads is that FMA's memory operand. Each accumulator still meets its taps in (i, j)
  // order, its j rising with the column.
  void block(const Reg64& xb, const Reg64& yb, int64_t origin, int64_t ox0, int64_t count,
             const std::vector<int64_t>& tap_rows) {
    const int n = static_cast<int>(count);
    if (d_.bias) g_.vmovups(temp(0), ptr[rB]);
    for (int p = 0; p < n; ++p) {
      if (d_.bias) g_.vmovaps(acc(p), temp(0));
      else g_.vxorps(acc(p), acc(p), acc(p));
    }
    int next = 0;  // the input register to load next
    for (int64_t i : tap_rows) {
      // readers[c − c0]: the (pixel, tap column) pairs of the block reading input column c, the
      // columns [c0, c1) of the map under the block.
      const int64_t c0 = std::max<int64_t>(0, ox0 * d_.sw - d_.pw);
      const int64_t c1 = std::min(d_.w, (ox0 + n - 1) * d_.sw - d_.pw + (d_.kw - 1) * d_.dw + 1);
      std::vector<std::vector<std::pair<int, int64_t>>> readers(static_cast<size_t>(std::max<int64_t>(0, c1 - c0)));
      std::vector<bool> used(static_cast<size_t>(d_.kw), false);
      for (int p = 0; p < n; ++p)
        for (int64_t j = 0; j < d_.kw; ++j) {
          const int64_t c = (ox0 + p) * d_.sw - d_.pw + j * d_.dw;
          if (c < 0 || c >= d_.w) continue;
          readers[static_cast<size_t>(c - c0)].emplace_back(p, j);
          used[static_cast<size_t>(j)] = true;
        }
      if (!p_.all_weights)
        for (int64_t j = 0; j < d_.kw; ++j)
          if (used[static_cast<size_t>(j)]) g_.vmovups(weight(i, j), ptr[rW + (i * d_.kw + j) * vb_]);
      for (int64_t c = c0; c < c1; ++c) {
        const std::vector<std::pair<int, int64_t>>& r = readers[static_cast<size_t>(c - c0)];
        if (r.empty()) continue;
        const Address src = ptr[xb + (i * d_.dh * d_.w + c - origin * d_.sw) * vb_];
        if (r.size() == 1) {
          g_.vfmadd231ps(acc(r[0].first), weight(i, r[0].second), src);
          continue;
        }
        const Xmm x = temp(next);
        next ^= 1;
        g_.vmovups(x, src);
        for (const auto& [p, j] : r) g_.vfmadd231ps(acc(p), weight(i, j), x);
      }
    }
    const ActSnippet act = act_snippet(d_.act, d_.act_alpha);
    std::vector<Xmm> t;
    for (int k = 0; k < act.n_tmp; ++k) t.push_back(temp(k));
    for (int p = 0; p < n; ++p) {
      if (d_.act != Activation::NONE) act.body(v_, acc(p), acc(p), t);
      g_.vmovups(ptr[yb + (ox0 + p - origin) * vb_], acc(p));
    }
  }

  CodeGenerator& g_;
  const DwNchwc& d_;
  int64_t r0_, r1_;
  Plan p_;
  std::vector<ColumnBlock> cols_;
  VecGen v_;
  int64_t vb_;  // bytes of one pixel's vector
};

}  // namespace

bool dwconv_nchwc_jit_applies(const DwNchwc& d) {
  if (d.b != 8 && d.b != 16) return false;
  // The farthest a baked offset reaches: a row base in the top padding, plus a tap's rows and
  // columns, within the map padded on every side by a kernel and a stride more.
  const int64_t rows = d.h + 2 * d.ph + d.kh * d.dh + d.sh, cols = d.w + 2 * d.pw + d.kw * d.dw + d.sw;
  if (rows * cols * d.b * 4 >= MAX_DISP || d.out_plane() * 4 >= MAX_DISP) return false;
  const Plan p = plan(d);
  int64_t edge_rows;
  const int64_t pixels = code_pixels(d, p, &edge_rows);
  return p.np > 0 && edge_rows <= MAX_EDGE_ROWS && pixels * d.taps() <= MAX_CODE_FMAS;
}

Result<std::shared_ptr<const JitKernel>> dwconv_nchwc_kernel(const DwNchwc& d, int64_t r0, int64_t r1, Isa isa,
                                                             KernelCache& cache) {
  if (isa < code_isa(d) || !dwconv_nchwc_jit_applies(d)) return std::shared_ptr<const JitKernel>();
  const Plan p = plan(d);
  const std::string name = fmt::format(
      "f32_dwconv2d_nchwc{}{}__{}_{}x{}{}_{}px", d.bias ? "_bias" : "",
      d.act == Activation::NONE ? "" : "_" + std::string(activation_name(d.act)), isa_name(code_isa(d)), d.kh, d.kw,
      d.sh == 1 && d.sw == 1 ? "" : fmt::format("s{}x{}", d.sh, d.sw), p.np);
  const std::string key = fmt::format("{}|{}x{}x{}|{}x{}|k{}x{}|s{}x{}|p{}x{}|d{}x{}|rows{}-{}|{}", name, d.b, d.h, d.w,
                                      d.ho, d.wo, d.kh, d.kw, d.sh, d.sw, d.ph, d.pw, d.dh, d.dw, r0, r1, d.act_alpha);
  int64_t edge_rows;
  const size_t pixels = static_cast<size_t>(code_pixels(d, p, &edge_rows));
  const size_t measure = pixels * (static_cast<size_t>(d.taps()) * 16 + MAX_ACT_BYTES) + (size_t(64) << 10);
  return build_kernel_measured(cache, key, name, measure, [d, r0, r1](CodeGenerator& g) { return Gen(g, d, r0, r1).emit(); });
}

}  // namespace nnasm
