// The depthwise kernel of conv_depthwise.h.
//
// Register map (W = 16 floats in zmm on AVX-512, 8 in ymm on AVX2): acc[r][v] = vreg(r·nv + v)
// for a block of rb output rows × nv output vectors of one channel; then, when they fit, one
// register per tap holding the tap's weight in every lane (else a temporary takes each tap's
// weight in turn, or on AVX-512 at stride 2 the FMA broadcasts it from memory); at stride 2 on
// AVX-512, unshuffle's permute indices; then the temporaries: the input vector, on AVX2 its lane
// mask, at stride 2 the second input vector and the shuffled one, the weight when taps have no
// registers (after the taps they serve the activation); on AVX2 the tail mask last. Opmask k2
// holds the current lane mask on AVX-512 (k3 the second input vector's at stride 2, k1 the
// tail). General registers: rX / rY / rW / rB the current channel's input plane, output plane,
// weights and bias; rXr / rYr the row block in the loop over the rows whose taps all lie in the
// image; rCnt that loop's counter, rCh the channel counter, eax for opmask values.
//
// Loop nest: channels (runtime) → row blocks: the rows near the top and bottom edge unrolled with
// their taps outside the image left out, the rows between in a runtime loop → column blocks of
// nv vectors (unrolled) → the taps, unrolled:
// - column stride 1: taps (i, j) → vectors → rows: one FMA each, reading the input straight from
//   memory when the vector lies inside the row, else through a masked load;
// - column stride 2: input rows → pairs of tap columns → vectors: the 2·W input floats under the
//   output vector are loaded as two vectors (masked where they leave the row) and one vshufps a
//   tap picks their even or odd lanes, which feed the FMA of every output row whose tap reads
//   that input row. Taps j·dw − pw = 2q and 2q + 1 share the two loads; with kh = 3 an input row
//   serves up to two output rows, so each shuffle feeds 1.5 FMAs on average. vshufps keeps its
//   sources, so one pair of loads serves two taps, and takes one instruction a tap where a
//   cross-lane gather takes AVX2 two; but it stays within 128-bit lanes, so the accumulators
//   hold the outputs in a shuffled order, undone by one vpermpd per output vector before the
//   store. Per output element the taps still come in (i, j) order, as at stride 1.
#include "ops/conv/conv_depthwise.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <xbyak/xbyak.h>

#include "jit/act_snippet.h"
#include "jit/frame.h"
#include "jit/vecgen.h"

namespace nnasm {
namespace {

using namespace Xbyak;
using namespace Xbyak::util;

constexpr int64_t MAX_DISP = int64_t(1) << 30;  // byte offsets the code bakes in stay below this
constexpr int64_t MAX_CODE_FMAS = int64_t(1) << 16;  // unrolled FMAs (about 8 bytes each)
constexpr int MAX_ROWS = 8, MAX_VECTORS = 4;

struct Blocking {
  int lanes, nvec, tail;  // floats a vector, vectors in an output row, floats in the last (0: full)
  bool weight_regs;       // one register per tap's weight
  bool indices;           // a register holds unshuffle's permute indices (stride 2, AVX-512)
  int loads;              // temporaries the input takes: a vector, AVX2's lane mask; at stride 2 a
                          // second vector and the shuffled one
  int rb, nv;             // block: rows × vectors
  int temps;              // temporaries past the accumulators, weights and indices (the tail mask apart)
};

Blocking blocking(const DepthwiseConv& d, Isa isa) {
  Blocking b{};
  b.lanes = isa == Isa::AVX512 ? 16 : 8;
  b.nvec = static_cast<int>((d.wo + b.lanes - 1) / b.lanes);
  b.tail = static_cast<int>(d.wo % b.lanes);
  b.indices = isa == Isa::AVX512 && d.sw == 2;
  const int regs = (isa == Isa::AVX512 ? 32 : 16) - (isa != Isa::AVX512 && b.tail ? 1 : 0) - (b.indices ? 1 : 0);
  const int taps = static_cast<int>(d.kh * d.kw), n_act = act_snippet(d.act, d.act_alpha).n_tmp;
  b.loads = (isa == Isa::AVX512 ? 1 : 2) + (d.sw == 2 ? 2 : 0);
  // Weights in registers save a broadcast per tap and block, as long as at least 12 accumulators
  // remain: FMA latency 4 on two pipes wants 8 independent chains, and more rows per block share
  // each mask and weight.
  const int with_regs = regs - taps - std::max(n_act, b.loads);
  b.weight_regs = with_regs >= 12;
  b.temps = b.weight_regs ? std::max(n_act, b.loads) : std::max(n_act, b.loads + 1);
  const int accs = regs - (b.weight_regs ? taps : 0) - b.temps;
  b.nv = std::min(b.nvec, MAX_VECTORS);
  b.rb = std::clamp(accs / b.nv, 1, MAX_ROWS);
  return b;
}

class Gen {
 public:
  Gen(CodeGenerator& g, const DepthwiseConv& d, Isa isa) : g_(g), d_(d), b_(blocking(d, isa)), v_(g, isa) {}

  Status emit() {
    {
      Frame f(g_, 1);
      if (b_.tail) v_.set_tail(b_.tail, v_.vreg(v_.num_vregs() - 1));
      if (b_.indices) g_.vmovups(indices(), v_.cst_u64({0, 2, 4, 6, 1, 3, 5, 7}));
      f.load_in(rX, 0);
      f.load_in(rW, 1);
      if (d_.bias) f.load_in(rB, 2);
      f.load_out(rY, 0);
      Label channel;
      g_.mov(rCh, d_.c);
      g_.L(channel);
      if (b_.weight_regs)
        for (int t = 0; t < taps(); ++t) v_.broadcast(weight(t), ptr[rW + t * 4]);
      rows();
      g_.add(rX, d_.h * d_.w * 4);
      g_.add(rY, d_.ho * d_.wo * 4);
      g_.add(rW, taps() * 4);
      if (d_.bias) g_.add(rB, 4);
      g_.dec(rCh);
      g_.jnz(channel, CodeGenerator::T_NEAR);
    }
    v_.finish();
    return Status::ok();
  }

 private:
  const Reg64 &rX = rsi, &rW = rdx, &rY = rcx, &rB = r8, &rXr = r9, &rYr = r10, &rCnt = r11, &rCh = rbx;

  int taps() const { return static_cast<int>(d_.kh * d_.kw); }
  Xmm acc(int r, int v) const { return v_.vreg(r * b_.nv + v); }
  int first_spare() const { return b_.rb * b_.nv; }
  Xmm weight(int t) const { return v_.vreg(first_spare() + t); }
  Zmm indices() const { return Zmm(first_spare() + (b_.weight_regs ? taps() : 0)); }
  Xmm temp(int i) const {
    return v_.vreg(first_spare() + (b_.weight_regs ? taps() : 0) + (b_.indices ? 1 : 0) + i);
  }
  bool avx512() const { return b_.lanes == 16; }

  // The rows: the top edge, the rows whose taps all lie in the image (a runtime loop of whole
  // blocks, then the rest), the bottom edge.
  void rows() {
    const int64_t lo = std::min(d_.ho, (d_.ph + d_.sh - 1) / d_.sh);
    const int64_t last = d_.h - 1 + d_.ph - (d_.kh - 1) * d_.dh;  // rows r with r·sh ≤ last: bottom taps inside
    const int64_t hi = std::max(lo, std::min(d_.ho, last < 0 ? 0 : last / d_.sh + 1));
    for (int64_t r = 0; r < lo; r += b_.rb) block(r, static_cast<int>(std::min<int64_t>(b_.rb, lo - r)));
    const int64_t full = (hi - lo) / b_.rb;
    if (full > 0) {
      g_.lea(rXr, ptr[rX + (lo * d_.sh - d_.ph) * d_.w * 4]);
      g_.lea(rYr, ptr[rY + lo * d_.wo * 4]);
      g_.mov(rCnt, full);
      Label top;
      g_.L(top);
      block(-1, b_.rb);
      g_.add(rXr, b_.rb * d_.sh * d_.w * 4);
      g_.add(rYr, b_.rb * d_.wo * 4);
      g_.dec(rCnt);
      g_.jnz(top, CodeGenerator::T_NEAR);
    }
    for (int64_t r = lo + full * b_.rb; r < hi; r += b_.rb) block(r, static_cast<int>(std::min<int64_t>(b_.rb, hi - r)));
    for (int64_t r = hi; r < d_.ho; r += b_.rb) block(r, static_cast<int>(std::min<int64_t>(b_.rb, d_.ho - r)));
  }

  // Output rows [r0, r0 + rb) of the current channel; r0 = -1: the loop's block at rXr / rYr,
  // whose taps all lie in the image.
  void block(int64_t r0, int rb) {
    mask_ = mask_hi_ = 0;  // k2 / k3 / the lane mask register hold nothing known at a block's start
    for (int v0 = 0; v0 < b_.nvec; v0 += b_.nv) column_block(r0, rb, v0, std::min(b_.nv, b_.nvec - v0));
  }

  // Input row of output row r0 + r, tap row i, relative to the block's base; false when outside.
  bool input_row(int64_t r0, int r, int64_t i, int64_t* row) const {
    if (r0 < 0) return *row = r * d_.sh + i * d_.dh, true;
    const int64_t ir = (r0 + r) * d_.sh - d_.ph + i * d_.dh;
    *row = ir;
    return ir >= 0 && ir < d_.h;
  }

  // The lanes of the vector starting at column `col` that lie in the row.
  uint32_t lanes_in_row(int64_t col) const {
    uint32_t bits = 0;
    for (int l = 0; l < b_.lanes; ++l)
      if (col + l >= 0 && col + l < d_.w) bits |= 1u << l;
    return bits;
  }

  // x = the vector at src, its lanes outside the row (the clear bits) zero. `held` is the mask
  // k holds (AVX2: temp(1), the one lane mask register), 0 when unknown.
  void load_lanes(const Xmm& x, const Address& src, uint32_t bits, const Opmask& k, uint32_t* held) {
    if (bits == 0) {
      g_.vxorps(x, x, x);
      return;
    }
    if (bits == (1u << b_.lanes) - 1) {
      g_.vmovups(x, src);
      return;
    }
    const Xmm lane_mask = temp(1);
    if (bits != *held) {
      if (avx512()) {
        g_.mov(eax, bits);
        g_.kmovw(k, eax);
      } else {
        g_.vmovups(lane_mask, v_.lane_mask(bits));
      }
      *held = bits;
    }
    if (avx512()) g_.vmovups(Zmm(x.getIdx()) | k | T_z, src);
    else g_.vmaskmovps(x, lane_mask, src);
  }

  void column_block(int64_t r0, int rb, int v0, int nv) {
    const Reg64& yb = r0 < 0 ? rYr : rY;
    const int64_t y_row0 = r0 < 0 ? 0 : r0;
    for (int r = 0; r < rb; ++r)
      for (int v = 0; v < nv; ++v) {
        if (d_.bias) v_.broadcast(acc(r, v), ptr[rB]);
        else g_.vxorps(acc(r, v), acc(r, v), acc(r, v));
      }
    if (d_.sw == 1) taps_in_place(r0, rb, v0, nv);
    else taps_deinterleaved(r0, rb, v0, nv);
    const ActSnippet act = act_snippet(d_.act, d_.act_alpha);
    std::vector<Xmm> t;
    for (int k = 0; k < act.n_tmp; ++k) t.push_back(temp(k));
    for (int r = 0; r < rb; ++r)
      for (int v = 0; v < nv; ++v) {
        if (d_.sw == 2) unshuffle(acc(r, v));
        if (d_.act != Activation::NONE) act.body(v_, acc(r, v), acc(r, v), t);
        const bool last = v0 + v == b_.nvec - 1;
        v_.store(ptr[yb + ((y_row0 + r) * d_.wo + (v0 + v) * b_.lanes) * 4], acc(r, v),
                 last && b_.tail ? b_.tail : b_.lanes);
      }
    if (d_.act != Activation::NONE) mask_ = mask_hi_ = 0;  // snippets may use k2, k3 and the temporaries
  }

  // Column stride 1: each tap's vector is the input row itself, read in place.
  void taps_in_place(int64_t r0, int rb, int v0, int nv) {
    const Reg64& xb = r0 < 0 ? rXr : rX;
    const uint32_t all = (1u << b_.lanes) - 1;
    const Xmm x = temp(0), w_tmp = temp(b_.loads);
    for (int64_t i = 0; i < d_.kh; ++i)
      for (int64_t j = 0; j < d_.kw; ++j) {
        const int t = static_cast<int>(i * d_.kw + j);
        bool weight_loaded = b_.weight_regs;
        const Xmm w = b_.weight_regs ? weight(t) : w_tmp;
        for (int v = 0; v < nv; ++v) {
          const int64_t col = static_cast<int64_t>(v0 + v) * b_.lanes - d_.pw + j * d_.dw;
          const uint32_t bits = lanes_in_row(col);
          if (!bits) continue;
          for (int r = 0; r < rb; ++r) {
            int64_t row;
            if (!input_row(r0, r, i, &row)) continue;
            if (!weight_loaded) v_.broadcast(w, ptr[rW + t * 4]), weight_loaded = true;
            const Address src = ptr[xb + (row * d_.w + col) * 4];
            if (bits == all) {
              g_.vfmadd231ps(acc(r, v), w, src);
              continue;
            }
            load_lanes(x, src, bits, k2, &mask_);
            g_.vfmadd231ps(acc(r, v), w, x);
          }
        }
      }
  }

  // Column stride 2: the taps of a row whose columns start at the same even offset 2q (j·dw −
  // pw = 2q or 2q + 1) share one pair of input vectors, loaded once per input row and output
  // vector; vshufps picks its even or odd lanes for each tap, and the result feeds every output
  // row that reads the input row with that tap. vshufps works within 128-bit lanes, so the
  // accumulators hold the outputs in a fixed shuffled order that column_block undoes before the
  // store (unshuffle).
  void taps_deinterleaved(int64_t r0, int rb, int v0, int nv) {
    const Reg64& xb = r0 < 0 ? rXr : rX;
    const Xmm a = temp(0), b = temp(b_.loads - 2), x = temp(b_.loads - 1), w_tmp = temp(b_.loads);
    // The (output row, tap row) pairs that read each input row, by input row: per output row
    // the tap rows come in ascending order.
    std::map<int64_t, std::vector<std::pair<int, int64_t>>> readers;
    for (int r = 0; r < rb; ++r)
      for (int64_t i = 0; i < d_.kh; ++i) {
        int64_t row;
        if (input_row(r0, r, i, &row)) readers[row].emplace_back(r, i);
      }
    // The tap columns by pair offset q, in the order of j.
    std::vector<std::pair<int64_t, std::vector<int64_t>>> pairs;
    for (int64_t j = 0; j < d_.kw; ++j) {
      const int64_t c = j * d_.dw - d_.pw, q = c >= 0 ? c / 2 : -((1 - c) / 2);
      if (pairs.empty() || pairs.back().first != q) pairs.push_back({q, {}});
      pairs.back().second.push_back(j);
    }
    const uint32_t all = (1u << b_.lanes) - 1;
    int w_held = -1;  // the tap whose weight w_tmp holds
    for (const auto& [row, uses] : readers)
      for (const auto& [q, js] : pairs)
        for (int v = 0; v < nv; ++v) {
          const int64_t col = static_cast<int64_t>(v0 + v) * 2 * b_.lanes + 2 * q;
          const uint32_t lo = lanes_in_row(col), hi = lanes_in_row(col + b_.lanes);
          if (!lo && !hi) continue;
          const Address src = ptr[xb + (row * d_.w + col) * 4], src_hi = ptr[xb + (row * d_.w + col + b_.lanes) * 4];
          load_lanes(a, src, lo, k2, &mask_);
          const bool hi_from_memory = hi == all && js.size() == 1;
          if (!hi_from_memory) load_lanes(b, src_hi, hi, k3, avx512() ? &mask_hi_ : &mask_);
          for (size_t k = 0; k < js.size(); ++k) {
            const int64_t j = js[k];
            // Lanes 2l (0x88) or 2l + 1 (0xdd) of a:b, per 128-bit lane [a a b b].
            const uint8_t lanes = j * d_.dw - d_.pw == 2 * q ? 0x88 : 0xdd;
            const Xmm& dst = k + 1 == js.size() ? a : x;
            if (hi_from_memory) g_.vshufps(dst, a, src_hi, lanes);
            else g_.vshufps(dst, a, b, lanes);
            for (const auto& [r, i] : uses) {
              const int t = static_cast<int>(i * d_.kw + j);
              if (b_.weight_regs) {
                g_.vfmadd231ps(acc(r, v), dst, weight(t));
              } else if (avx512()) {
                g_.vfmadd231ps(acc(r, v), dst, ptr_b[rW + t * 4]);
              } else {
                if (w_held != t) v_.broadcast(w_tmp, ptr[rW + t * 4]), w_held = t;
                g_.vfmadd231ps(acc(r, v), dst, w_tmp);
              }
            }
          }
        }
  }

  // The outputs back in order after taps_deinterleaved: its 128-bit lane k holds outputs 2k,
  // 2k + 1, then 2k + 1 + W/2, 2k + 2 + W/2 — pairs 0 4 1 5 2 6 3 7 on AVX-512, 0 2 1 3 on AVX2.
  void unshuffle(const Xmm& y) {
    if (avx512()) g_.vpermpd(Zmm(y.getIdx()), indices(), Zmm(y.getIdx()));
    else g_.vpermpd(Ymm(y.getIdx()), Ymm(y.getIdx()), 0xd8);
  }

  CodeGenerator& g_;
  const DepthwiseConv& d_;
  Blocking b_;
  VecGen v_;
  uint32_t mask_ = 0;     // the lane mask k2 (AVX2: temp(1)) holds; 0 when unknown
  uint32_t mask_hi_ = 0;  // the lane mask k3 holds (AVX-512 at stride 2)
};

}  // namespace

bool depthwise_applies(const ConvGeom& g) {
  // Column stride 2 gathers the even lanes of two vectors; wider column strides would take more
  // permutes per vector than im2col costs. Any row stride is only an address.
  if (g.sh < 1 || (g.sw != 1 && g.sw != 2)) return false;
  if (g.groups != g.c || g.o != g.c || g.ho < 1 || g.wo < 1) return false;
  // Padding past the taps' reach would only add rows and columns of bias; the code unrolls the
  // edge rows, so their number must stay small.
  if (g.ph > (g.kh - 1) * g.dh || g.pw > (g.kw - 1) * g.dw || g.kh * g.kw > 49) return false;
  if (g.h * g.w * 4 >= MAX_DISP || g.ho * g.wo * 4 >= MAX_DISP) return false;
  const int64_t nvec = (g.wo + 7) / 8;  // the narrower vectors: more of them
  const int64_t unrolled_rows = 2 * g.ph + MAX_ROWS * 2;
  return unrolled_rows * nvec * g.kh * g.kw <= MAX_CODE_FMAS;
}

DepthwiseConv depthwise_geometry(const ConvGeom& g, int64_t channels) {
  return DepthwiseConv{channels, g.h, g.w, g.ho, g.wo, g.kh, g.kw, g.sh, g.sw, g.dh, g.dw, g.ph, g.pw};
}

Result<std::shared_ptr<const JitKernel>> depthwise_kernel(const DepthwiseConv& d, Isa isa, KernelCache& cache) {
  if (isa == Isa::REF) return std::shared_ptr<const JitKernel>();
  const Blocking b = blocking(d, isa);
  const std::string stride = d.sh == 1 && d.sw == 1 ? "" : fmt::format("s{}x{}_", d.sh, d.sw);
  const std::string name = fmt::format("f32_conv2d_depthwise{}{}__{}_{}{}x{}", d.bias ? "_bias" : "",
                                       d.act == Activation::NONE ? "" : "_" + std::string(activation_name(d.act)),
                                       isa_name(isa), stride, b.rb, b.nv);
  const std::string key = fmt::format("{}|{}x{}x{}|{}x{}|{}x{}|s{}x{}|d{}x{}|p{}x{}|{}", name, d.c, d.h, d.w, d.ho, d.wo,
                                      d.kh, d.kw, d.sh, d.sw, d.dh, d.dw, d.ph, d.pw, d.act_alpha);
  return build_kernel_measured(cache, key, name, size_t(4) << 20, [d, isa](CodeGenerator& g) { return Gen(g, d, isa).emit(); });
}

}  // namespace nnasm
