// The generated kernels of LSTM, GRU and RNN: a bound kernel (jit/kernel.h) whose C++ driver runs
// each direction as
//   the input projection: x·Wᵀ + b for all T·N rows of x at once, into the scratch, the biases
//   folded (Wb + Rb, except the candidate's Rbh of a GRU with linear_before_reset, which stays
//   inside r⊙(h·Rhᵀ + Rbh)): one generated kernel (ProjGen);
//   then one generated kernel per time step (StepGen): the recurrent product h·Rᵀ of every
//   sequence still running, with the gates' nonlinearities (jit/vmath.h) fused.
// Both are made of one block product (DotGen): VL rows of a matrix read in place (VL = 16 floats
// on AVX-512, 8 on AVX2: a block of W's rows, or a gate's rows of R for a block of VL hidden
// units), dotted with one vector (a row of x, or h), one accumulator a row, lane-parallel along k,
// the VL accumulators reduced to one vector of VL sums by a fixed tree of shuffles. So R streams
// once a step from L2, row after row, each block reused from L1 by every sequence of the batch,
// and a block of W serves every row of x from L1. The cell then works on the gates' vectors and
// the projection's, and writes h (the y row of the step, which the next step reads) and c in
// place. The scratch holds the projection of all T·N rows (G·T·N·H floats, a part's direction at
// a time), the step's table of rows and each row's gate sums.
//
// Summation order: every sum is a lane-wise chain along k and then the one tree, fixed by the
// length (I or H) and the level, whatever the number of rows or steps; each sequence's rows are
// computed alike whatever the others do. So a sequence run one step at a time (T = 1, its last h
// and c fed back as h0 and c0) gives the bits of the whole run, which the per-frame stepping
// relies on. (The sums differ from the reference's, one sequential float sum each, by rounding.)
// That is why the projection is not a GEMM of jit/gemm.h: its kernel shape (dot,
// GEMV or tiled) follows M = T·N, and the shapes sum in different orders. Only its dot kernel
// sums by K alone, but it takes at most 8 rows, reads Wᵀ again for every 4 of them and reduces
// 2 rows at a time; the 16-row block product, which the step needs anyway, ran the benchmark
// LSTM's projections faster (tests/bench/lstm_64x128x2_t32.nnasm).
#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <xbyak/xbyak.h>

#include "jit/frame.h"
#include "jit/vecgen.h"
#include "jit/vmath.h"
#include "ops/recurrent/recurrent.h"

namespace nnasm {
namespace {

using namespace Xbyak;
using namespace Xbyak::util;

// One sequence's step, as the driver hands it to the step kernel.
struct RnnRow {
  const float* xw;  // its projection row, this direction's G·H gates (biases folded)
  const float* h;   // h before the step
  float* h_out;     // h after the step: its row of y
  float* c;         // LSTM: c, updated in place (its row of the last c)
  float* aux;       // its scratch: the gates' sums [G][16]; GRU (r⊙h before reset): z, r⊙h [HP]
};
// The step's table: the row count in the first cache line, then the rows.
constexpr size_t TABLE_HEAD = 64;

// The widest vector, for scratch sizes any level can use.
constexpr int64_t MAX_VL = 16;
// Chunks of a row (DotGen::chunk_vectors() vectors each) a block product unrolls; longer rows loop.
constexpr int64_t PROD_UNROLLED_CHUNKS = 4;
// A bidirectional layer runs one direction a part from this much work (a parallel step's
// hand-off costs a few microseconds).
constexpr int64_t PART_FLOPS = int64_t(1) << 18;

int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }
int64_t hp(const RnnGeom& g) { return round_up(g.h, MAX_VL); }
bool gru_two_phases(const RnnGeom& g) { return g.kind == RnnKind::GRU && !g.linear_before_reset; }
// Floats of one row's aux scratch.
int64_t aux_floats(const RnnGeom& g) { return g.gates * MAX_VL + (gru_two_phases(g) ? 2 * hp(g) : 0); }

// The scratch of one part, in bytes from its start (each region 64-byte aligned).
struct Layout {
  size_t xw = 0, bias = 0, zero = 0, table = 0, aux = 0, bytes = 0;
};
Layout layout(const RnnGeom& g) {
  Layout l;
  auto take = [&](size_t bytes) {
    const size_t at = l.bytes;
    l.bytes += (bytes + 63) / 64 * 64;
    return at;
  };
  l.xw = take(static_cast<size_t>(g.t * g.n * g.gh()) * sizeof(float));
  l.bias = take(static_cast<size_t>(g.gh()) * sizeof(float));
  l.zero = take(static_cast<size_t>(hp(g)) * sizeof(float));
  l.table = take(TABLE_HEAD + static_cast<size_t>(g.n) * sizeof(RnnRow));
  l.aux = take(static_cast<size_t>(g.n * aux_floats(g)) * sizeof(float));
  return l;
}

// ---- the generated code ----

// What the step and projection kernels share: a block of VL dot products (VL = 16 floats on
// AVX-512, 8 on AVX2), rows read in place, reduced to one vector.
//   vreg(0 … VL−1)            the accumulators of the block's rows
//   vreg(VL … VL + KC − 1)    a chunk of the source (KC = chunk_vectors())
//   vreg(VL + KC)             the reduction's temporary; with two sources a vector of a row;
//                             AVX2's masked loads
class DotGen {
 protected:
  DotGen(CodeGenerator& g, Isa isa) : g_(g), v_(g, isa), vl_(v_.width()), vb_(v_.vbytes()) {}

  Xmm vec(int i) const { return v_.vreg(i); }
  // vec(i)'s register as the ymm/zmm operand of the instructions that take no xmm.
  Ymm wide(const Xmm& x) const { return v_.avx512() ? Ymm(Zmm(x.getIdx())) : Ymm(x.getIdx()); }
  // Vectors of the source held at once: as many as the registers beside the accumulators allow.
  int chunk_vectors() const { return v_.avx512() ? 8 : 4; }
  Xmm src(int u) const { return vec(vl_ + u); }
  Xmm tmp() const { return vec(vl_ + chunk_vectors()); }
  // The lane of the reduction's result that accumulator a ends in (see reduce()).
  int lane_of(int a) const { return v_.avx512() ? 4 * (a % 4) + a / 4 : 4 * (a % 2) + a / 2; }

  // One block's dot products: w rows of k floats, row_bytes apart from rows + disp, each with
  // the k floats at src (w ≤ VL), or with `two`, with each of the two sources at src and src2
  // (w ≤ VL/2).
  struct Dot {
    Reg64 rows;
    int64_t disp, row_bytes;
    Reg64 src;
    int64_t k;
    int w;
    bool two = false;
    Reg64 src2 = Reg64();
  };
  // vec(0) lane l = Σ_j row_l[j]·src[j] for l < w (the other lanes 0); with two sources, lane
  // l < VL/2 that of src and lane VL/2 + l that of src2. The sources are taken a chunk of vectors
  // at a time into registers, and each row's chunk is read in turn, so that the rows are read in
  // address order (what the hardware prefetchers follow); with two sources each vector of a row
  // is loaded once for both, which halves the loads of a projection (L1's load rate, under one
  // vector a cycle on Zen 4, bounds it otherwise). Each accumulator sums its lanes' products in
  // the order of j, the same instructions with one source or two, and reduce() sums the lanes by
  // one tree: the order of every sum is fixed by k. Uses the K mask (k1 / ymm15, k mod VL lanes),
  // rbp and rsi.
  void product(const Dot& d) {
    for (int a = 0; a < vl_; ++a) g_.vxorps(vec(a), vec(a), vec(a));
    const int k_tail = static_cast<int>(d.k % vl_);
    const int sources = d.two ? 2 : 1, kc = chunk_vectors() / sources;
    std::vector<int> acc_of_lane(static_cast<size_t>(vl_));
    for (int a = 0; a < vl_; ++a) acc_of_lane[static_cast<size_t>(lane_of(a))] = a;
    auto source = [&](int s, int u) { return vec(vl_ + s * kc + u); };
    const Xmm row = vec(vl_ + chunk_vectors());  // two sources: a vector of a row
    // n vectors of each row at byte offset off0 (plus rbp when `looped`), the last one `last`
    // lanes wide.
    auto chunk = [&](int64_t off0, int n, int last, bool looped) {
      auto at = [&](const Reg64& base, int64_t disp) { return looped ? ptr[base + rbp + disp] : ptr[base + disp]; };
      auto masked = [&](int u) { return u == n - 1 && last != vl_; };
      for (int s = 0; s < sources; ++s)
        for (int u = 0; u < n; ++u) {
          const Address a = at(s ? d.src2 : d.src, off0 + u * vb_);
          if (!masked(u)) g_.vmovups(source(s, u), a);
          else if (v_.avx512()) g_.vmovups(source(s, u) | k1 | T_z, a);
          else g_.vmaskmovps(Ymm(source(s, u).getIdx()), Ymm(15), a);
        }
      for (int r = 0; r < d.w; ++r)
        for (int u = 0; u < n; ++u) {
          const Address m = at(d.rows, d.disp + r * d.row_bytes + off0 + u * vb_);
          // The row's vector: from memory (one source), or loaded for both; AVX2 loads a masked
          // one (lanes past k zero, then added as +0), AVX-512 leaves those lanes as they are.
          const bool in_reg = d.two || (masked(u) && !v_.avx512());
          const Xmm x = d.two ? row : tmp();
          if (in_reg) {
            if (!masked(u)) g_.vmovups(x, m);
            else if (v_.avx512()) g_.vmovups(x | k1 | T_z, m);
            else g_.vmaskmovps(Ymm(x.getIdx()), Ymm(15), m);
          }
          for (int s = 0; s < sources; ++s) {
            const Xmm acc = vec(acc_of_lane[static_cast<size_t>(s * vl_ / 2 + r)]);
            const Xmm acc_m = masked(u) && v_.avx512() ? Xmm(acc | k1) : acc;
            if (in_reg) g_.vfmadd231ps(acc_m, source(s, u), x);
            else g_.vfmadd231ps(acc_m, source(s, u), m);
          }
        }
    };
    const int64_t vectors = (d.k + vl_ - 1) / vl_, chunks = (vectors + kc - 1) / kc;
    const int last = k_tail ? k_tail : vl_;
    if (chunks <= PROD_UNROLLED_CHUNKS * sources) {
      for (int64_t c = 0; c < chunks; ++c) {
        const int n = static_cast<int>(std::min<int64_t>(kc, vectors - c * kc));
        chunk(c * kc * vb_, n, c == chunks - 1 ? last : vl_, false);
      }
    } else {
      // Whole chunks of full vectors in a loop, then the rest (with the tail) unrolled.
      const int64_t looped = k_tail ? (vectors - 1) / kc : vectors / kc;
      Label top;
      g_.xor_(rbp, rbp);
      g_.mov(rsi, looped);
      g_.L(top);
      chunk(0, kc, vl_, true);
      g_.add(rbp, kc * vb_);
      g_.dec(rsi);
      g_.jnz(top, CodeGenerator::T_NEAR);
      if (const int n = static_cast<int>(vectors - looped * kc)) chunk(0, n, last, true);
    }
    reduce();
  }

  // vec(0) lane lane_of(a) = the sum of vec(a)'s lanes: pairs of accumulators halve their lanes
  // at each level (AVX-512: 256-bit halves, 128-bit quarters, 64-bit pairs, single floats),
  // the same tree for every row.
  void reduce() {
    const Xmm t = tmp();
    auto level = [&](int stride, auto shuffle) {
      for (int a = 0; a + stride < vl_; a += 2 * stride) {
        const Xmm x = vec(a), y = vec(a + stride);
        shuffle(t, x, y, true);
        shuffle(x, x, y, false);
        g_.vaddps(x, x, t);
      }
    };
    // A level's two shuffles: one instruction with the immediates of the low and high parts.
    using Shuffle = void (CodeGenerator::*)(const Ymm&, const Ymm&, const Operand&, uint8_t);
    auto shuffle = [&](Shuffle op, uint8_t lo, uint8_t hi) {
      return [this, op, lo, hi](const Xmm& d, const Xmm& x, const Xmm& y, bool low) {
        (g_.*op)(wide(d), wide(x), wide(y), low ? lo : hi);
      };
    };
    if (v_.avx512()) {
      level(1, shuffle(&CodeGenerator::vshuff64x2, 0x44, 0xEE));
      level(2, shuffle(&CodeGenerator::vshuff32x4, 0x88, 0xDD));
    } else {
      level(1, shuffle(&CodeGenerator::vperm2f128, 0x20, 0x31));
    }
    const int s = v_.avx512() ? 4 : 2;
    level(s, [&](const Xmm& d, const Xmm& x, const Xmm& y, bool lo) {
      if (lo) g_.vunpcklpd(d, x, y);
      else g_.vunpckhpd(d, x, y);
    });
    level(2 * s, [&](const Xmm& d, const Xmm& x, const Xmm& y, bool lo) { g_.vshufps(d, x, y, lo ? 0x88 : 0xDD); });
  }

  CodeGenerator& g_;
  VecGen v_;
  const int vl_, vb_;
};

struct StepDesc {
  RnnKind kind;
  int64_t h;
  int gates;
  bool peephole, lbr, relu;
  // The blocks (and each block's gates) from the last to the first. Every other step runs in
  // this order, so that it starts on the rows of R the step before read last, which L1 may still
  // hold. The order of the blocks changes no sum.
  bool descending;
};

// One time step of every sequence still running. Register map:
//   vreg(…)         DotGen's for the products (the source: h or r⊙h); the cell's after them
//   k1 / ymm15      the tail mask (H mod VL lanes: the last block's units and the last vector
//                   of a row alike)
//   r8   the table's first row          r9   the row count
//   r10  the block's byte offset in a hidden vector (block · VL · 4)
//   r11  R at the block's first row of gate 0 (R + block · VL · H · 4)
//   r12  the current row of the table   r13  rows left
//   r14  the product's source vector of the row          r15  the row's aux scratch
//   rbx  P (peepholes) or Rbh (GRU, linear_before_reset)
//   rbp rsi  a long row's k offset (bytes) and loop counter (DotGen::product)
//   rax  the block loop's counter (pushed while a block runs); rax rcx rdx rsi the cell's pointers
class StepGen : DotGen {
 public:
  StepGen(CodeGenerator& g, const StepDesc& d, Isa isa) : DotGen(g, isa), d_(d), tail_(static_cast<int>(d.h % vl_)) {}

  Status emit() {
    {
      Frame f(g_, 6);
      g_.mov(rax, ptr[Frame::args() + offsetof(KernelArgs, in)]);
      g_.mov(r8, ptr[rax]);
      g_.mov(r11, ptr[rax + 8]);
      g_.mov(rbx, ptr[rax + 16]);
      g_.mov(r9, ptr[r8]);
      g_.add(r8, TABLE_HEAD);
      Label done;
      g_.test(r9, r9);
      g_.jz(done, CodeGenerator::T_NEAR);
      if (tail_) v_.set_tail(tail_, Ymm(15));
      if (d_.kind == RnnKind::GRU && !d_.lbr) {
        g_.push(r11);
        blocks(1);
        g_.pop(r11);
        blocks(2);
      } else {
        blocks(0);
      }
      g_.L(done);
    }
    v_.finish();
    return Status::ok();
  }

 private:
  // Phase 0: every gate then the cell; GRU with r⊙h: phase 1 the z and r gates (z and r⊙h into
  // the aux scratch), phase 2 the candidate's product of r⊙h and the cell.
  void blocks(int phase) {
    const int64_t full = d_.h / vl_;
    const uint32_t block_rows = static_cast<uint32_t>(vl_ * d_.h * 4);
    auto loop = [&](int sign) {
      if (full == 0) return;
      Label top;
      g_.mov(rax, full);
      g_.L(top);
      if (sign < 0) {
        g_.sub(r10, vb_);
        g_.sub(r11, block_rows);
      }
      g_.push(rax);
      block(phase, vl_);
      g_.pop(rax);
      if (sign > 0) {
        g_.add(r10, vb_);
        g_.add(r11, block_rows);
      }
      g_.dec(rax);
      g_.jnz(top, CodeGenerator::T_NEAR);
    };
    if (!d_.descending) {
      g_.xor_(r10, r10);
      loop(1);
      if (tail_) block(phase, tail_);
      return;
    }
    g_.mov(r10, full * vb_);
    if (full) g_.add(r11, static_cast<uint32_t>(full * block_rows));
    if (tail_) block(phase, tail_);
    loop(-1);
  }

  static constexpr int ROW_XW = offsetof(RnnRow, xw), ROW_H = offsetof(RnnRow, h), ROW_HOUT = offsetof(RnnRow, h_out),
                       ROW_C = offsetof(RnnRow, c), ROW_AUX = offsetof(RnnRow, aux);
  int64_t z_off() const { return d_.gates * MAX_VL * 4; }  // aux: z, then r⊙h
  int64_t rh_off() const { return z_off() + round_up(d_.h, MAX_VL) * 4; }

  // The block of w units at r10: each gate's sums for every row into the row's aux, then the
  // cell for every row.
  void block(int phase, int w) {
    std::vector<int> gates;
    if (phase == 0) {
      for (int q = 0; q < d_.gates; ++q) gates.push_back(d_.descending ? d_.gates - 1 - q : q);
    } else if (phase == 1) {
      gates = {0, 1};
    } else {
      gates = {2};
    }
    for (int q : gates)
      rows([&] {
        if (phase == 2) {
          g_.mov(r14, ptr[r12 + ROW_AUX]);
          g_.add(r14, static_cast<uint32_t>(rh_off()));
        } else {
          g_.mov(r14, ptr[r12 + ROW_H]);
        }
        product(Dot{r11, q * d_.h * d_.h * 4, d_.h * 4, r14, d_.h, w});
        g_.mov(r15, ptr[r12 + ROW_AUX]);
        g_.vmovups(ptr[r15 + q * MAX_VL * 4], vec(0));
      });
    rows([&] { cell(phase, w); });
  }

  // body() once for every row of the table (r12 the row).
  template <class F>
  void rows(F body) {
    Label top;
    g_.mov(r12, r8);
    g_.mov(r13, r9);
    g_.L(top);
    body();
    g_.add(r12, static_cast<uint32_t>(sizeof(RnnRow)));
    g_.dec(r13);
    g_.jnz(top, CodeGenerator::T_NEAR);
  }

  // The cell of the row at r12 for the block's w units; the gates' sums are in its aux.
  // vreg(0 …) hold the gates and states, vreg(8 …) the math snippets' temporaries.
  void cell(int phase, int w) {
    const Xmm x0 = vec(0), x1 = vec(1), x2 = vec(2), x3 = vec(3), x4 = vec(4), x5 = vec(5);
    const vmath::Regs t = {vec(8), vec(9), vec(10), vec(11)};
    const int64_t H4 = d_.h * 4;
    g_.mov(r15, ptr[r12 + ROW_AUX]);
    g_.mov(rax, ptr[r12 + ROW_XW]);
    g_.add(rax, r10);
    // dst = the gate's sums + its projection.
    auto gate = [&](const Xmm& dst, int q) {
      v_.load(x5, ptr[rax + q * H4], w);
      g_.vaddps(dst, x5, ptr[r15 + q * MAX_VL * 4]);
    };
    auto load_h = [&](const Xmm& dst) {
      g_.mov(rsi, ptr[r12 + ROW_H]);
      v_.load(dst, ptr[rsi + r10], w);
    };
    auto store_h = [&](const Xmm& s) {
      g_.mov(rdx, ptr[r12 + ROW_HOUT]);
      v_.store(ptr[rdx + r10], s, w);
    };
    switch (d_.kind) {
      case RnnKind::RNN:
        gate(x1, 0);
        if (d_.relu) {
          // max(0, a) keeps a NaN and −0, as std::max(a, 0) does.
          g_.vxorps(x2, x2, x2);
          g_.vmaxps(x1, x2, x1);
        } else {
          vmath::tanh(v_, x1, x1, t);
        }
        store_h(x1);
        break;
      case RnnKind::LSTM: {
        g_.mov(rcx, ptr[r12 + ROW_C]);
        v_.load(x0, ptr[rcx + r10], w);
        auto peep = [&](const Xmm& a, int p, const Xmm& c) {  // a += P_p ⊙ c
          if (!d_.peephole) return;
          v_.load(x5, ptr[rbx + r10 + p * H4], w);
          g_.vfmadd231ps(a, x5, c);
        };
        gate(x1, 0);  // i
        peep(x1, 0, x0);
        vmath::sigmoid(v_, x1, x1, t);
        gate(x2, 2);  // f
        peep(x2, 2, x0);
        vmath::sigmoid(v_, x2, x2, t);
        gate(x3, 3);  // c̃
        vmath::tanh(v_, x3, x3, t);
        g_.vmulps(x3, x3, x1);
        g_.vfmadd231ps(x3, x2, x0);  // c = f⊙c + i⊙c̃
        v_.store(ptr[rcx + r10], x3, w);
        gate(x4, 1);  // o
        peep(x4, 1, x3);
        vmath::sigmoid(v_, x4, x4, t);
        vmath::tanh(v_, x3, x3, t);
        g_.vmulps(x3, x3, x4);
        store_h(x3);
        break;
      }
      case RnnKind::GRU:
        if (phase == 1) {
          gate(x1, 0);
          vmath::sigmoid(v_, x1, x1, t);
          g_.vmovups(ptr[r15 + r10 + z_off()], x1);
          gate(x2, 1);
          vmath::sigmoid(v_, x2, x2, t);
          load_h(x0);
          g_.vmulps(x2, x2, x0);
          g_.vmovups(ptr[r15 + r10 + rh_off()], x2);
          break;
        }
        if (phase == 2) {
          gate(x3, 2);
          g_.vmovups(x1, ptr[r15 + r10 + z_off()]);
        } else {
          gate(x1, 0);
          vmath::sigmoid(v_, x1, x1, t);
          gate(x2, 1);
          vmath::sigmoid(v_, x2, x2, t);
          // h̃'s argument: its projection + r⊙(h·Rhᵀ + Rbh)
          v_.load(x5, ptr[rbx + r10], w);
          g_.vaddps(x3, x5, ptr[r15 + 2 * MAX_VL * 4]);
          v_.load(x5, ptr[rax + 2 * H4], w);
          g_.vfmadd213ps(x3, x2, x5);
        }
        vmath::tanh(v_, x3, x3, t);
        load_h(x0);
        g_.vsubps(x0, x0, x3);
        g_.vfmadd213ps(x0, x1, x3);  // h = h̃ + z⊙(h − h̃)
        store_h(x0);
        break;
    }
  }

  const StepDesc d_;
  const int tail_;
};

// The input projection xw = x·Wᵀ + b of m rows of x (k floats each) for n = G·H outputs: for each
// block of VL rows of W (read in place, and from L1 for every row of x after the first), each
// row of x in turn. Register map:
//   vreg(…)         DotGen's for the products (the source: a row of x)
//   k1 / ymm15      the mask of a row's last vector (k mod VL lanes)
//   k3 / ymm14      the mask of the last block (n mod VL lanes), for the bias and xw
//   r8   x          r9   W at the block      r10  b at the block     r11  xw at the block
//   r13  x at the row      r14  xw at the row and block      r15  rows left      rax blocks left
//   rbp rsi  the product's
struct ProjDesc {
  int64_t m, n, k;
};

class ProjGen : DotGen {
 public:
  ProjGen(CodeGenerator& g, const ProjDesc& d, Isa isa) : DotGen(g, isa), d_(d) {}

  Status emit() {
    {
      Frame f(g_, 6);
      f.load_in(r9, 1);
      f.load_in(r10, 2);
      f.load_in(r8, 0);
      f.load_out(r11, 0);
      if (const int kt = static_cast<int>(d_.k % vl_)) v_.set_tail(kt, Ymm(15));
      const int tail = static_cast<int>(d_.n % vl_);
      if (tail && v_.avx512()) {
        g_.mov(eax, (1u << tail) - 1);
        g_.kmovw(k3, eax);
      } else if (tail) {
        g_.vmovups(Ymm(14), v_.lane_mask((1u << tail) - 1));
      }
      if (const int64_t full = d_.n / vl_) {
        Label top;
        g_.mov(rax, full);
        g_.L(top);
        block(vl_);
        g_.add(r9, static_cast<uint32_t>(vl_ * d_.k * 4));
        g_.add(r10, vb_);
        g_.add(r11, vb_);
        g_.dec(rax);
        g_.jnz(top, CodeGenerator::T_NEAR);
      }
      if (tail) block(tail);
    }
    v_.finish();
    return Status::ok();
  }

 private:
  // The block of w rows of W at r9 with every row of x: a full block two rows of x at a time
  // (each half of the block in turn), then a last row alone; the last block a row at a time.
  void block(int w) {
    g_.mov(r13, r8);
    g_.mov(r14, r11);
    const int64_t pairs = w == vl_ ? d_.m / 2 : 0, single = d_.m - 2 * pairs;
    const int half = vl_ / 2;
    if (pairs) {
      Label top;
      g_.mov(r15, pairs);
      g_.L(top);
      g_.lea(rcx, ptr[r13 + d_.k * 4]);
      g_.lea(rdx, ptr[r14 + d_.n * 4]);
      for (int h = 0; h < 2; ++h) {
        Dot dot{r9, h * half * d_.k * 4, d_.k * 4, r13, d_.k, half};
        dot.two = true;
        dot.src2 = rcx;
        product(dot);
        // [the first row's sums | the second's], each plus the bias of the half's rows.
        const Xmm sum = vec(0), t = tmp();
        if (v_.avx512()) {
          g_.vbroadcastf64x4(Zmm(t.getIdx()), ptr[r10 + h * half * 4]);
          g_.vaddps(sum, sum, t);
          g_.vmovups(ptr[r14 + h * half * 4], Ymm(sum.getIdx()));
          g_.vextractf64x4(ptr[rdx + h * half * 4], Zmm(sum.getIdx()), 1);
        } else {
          g_.vbroadcastf128(Ymm(t.getIdx()), ptr[r10 + h * half * 4]);
          g_.vaddps(sum, sum, t);
          g_.vmovups(ptr[r14 + h * half * 4], Xmm(sum.getIdx()));
          g_.vextractf128(ptr[rdx + h * half * 4], Ymm(sum.getIdx()), 1);
        }
      }
      g_.add(r13, static_cast<uint32_t>(2 * d_.k * 4));
      g_.add(r14, static_cast<uint32_t>(2 * d_.n * 4));
      g_.dec(r15);
      g_.jnz(top, CodeGenerator::T_NEAR);
    }
    if (single == 0) return;
    Label top;
    g_.mov(r15, single);
    g_.L(top);
    product(Dot{r9, 0, d_.k * 4, r13, d_.k, w});
    const Xmm sum = vec(0), t = tmp();
    if (w == vl_) {
      g_.vaddps(sum, sum, ptr[r10]);
      g_.vmovups(ptr[r14], sum);
    } else if (v_.avx512()) {
      g_.vmovups(t | k3 | T_z, ptr[r10]);
      g_.vaddps(sum, sum, t);
      g_.vmovups(ptr[r14] | k3, sum);
    } else {
      g_.vmaskmovps(Ymm(t.getIdx()), Ymm(14), ptr[r10]);
      g_.vaddps(sum, sum, t);
      g_.vmaskmovps(ptr[r14], Ymm(14), Ymm(sum.getIdx()));
    }
    g_.add(r13, static_cast<uint32_t>(d_.k * 4));
    g_.add(r14, static_cast<uint32_t>(d_.n * 4));
    g_.dec(r15);
    g_.jnz(top, CodeGenerator::T_NEAR);
  }

  const ProjDesc d_;
};

// ---- the driver ----

struct RnnKernel {
  RnnGeom g;
  int dir0 = 0, dir1 = 1;  // the directions this part runs
  Layout lay;
  KernelFn proj = nullptr;
  KernelFn step[2] = {nullptr, nullptr};  // ascending, descending (StepDesc::descending)
  std::vector<std::shared_ptr<const JitKernel>> keep;
};

void forward(const KernelArgs* a, const void* data) {
  const RnnKernel& k = *static_cast<const RnnKernel*>(data);
  const RnnGeom& g = k.g;
  const int64_t H = g.h, GH = g.gh();
  const RnnInputs in = rnn_inputs(g, a);
  const float *x = in.x, *w = in.w, *r = in.r, *bias = in.b, *h0 = in.h0, *c0 = in.c0, *p = in.p;
  const RnnOutputs out = rnn_outputs(g, a);
  float *y = out.y, *yh = out.yh, *yc = out.yc;
  char* s = static_cast<char*>(a->scratch);
  float* xw = reinterpret_cast<float*>(s + k.lay.xw);
  float* fold = reinterpret_cast<float*>(s + k.lay.bias);
  float* zero = reinterpret_cast<float*>(s + k.lay.zero);
  int64_t* count = reinterpret_cast<int64_t*>(s + k.lay.table);
  RnnRow* table = reinterpret_cast<RnnRow*>(s + k.lay.table + TABLE_HEAD);
  float* aux = reinterpret_cast<float*>(s + k.lay.aux);
  std::memset(zero, 0, static_cast<size_t>(hp(g)) * sizeof(float));
  const size_t row_bytes = static_cast<size_t>(H) * sizeof(float);
  for (int dir = k.dir0; dir < k.dir1; ++dir) {
    const float* wb = bias + dir * 2 * GH;
    const float* rb = wb + GH;
    // The candidate's Rbh of a GRU with linear_before_reset stays in the step (r⊙(h·Rhᵀ + Rbh)).
    const int64_t folded = g.kind == RnnKind::GRU && g.linear_before_reset ? 2 * H : GH;
    for (int64_t j = 0; j < GH; ++j) fold[j] = j < folded ? wb[j] + rb[j] : wb[j];
    const float* wd = w + dir * GH * g.i;
    call_kernel(k.proj, {x, wd, fold}, xw);

    int64_t steps = 0;
    for (int64_t b = 0; b < g.n; ++b) {
      steps = std::max(steps, rnn_length(g, a, b));
      if (yc) {
        float* cb = yc + g.s_at(dir, b);
        if (c0) std::memcpy(cb, c0 + g.s_at(dir, b), row_bytes);
        else std::memset(cb, 0, row_bytes);
      }
    }
    const void* vec = p ? static_cast<const void*>(p + dir * 3 * H)
                        : g.kind == RnnKind::GRU ? static_cast<const void*>(rb + 2 * H) : nullptr;
    const float* rd = r + dir * GH * H;
    const bool back = g.backwards(dir);
    for (int64_t st = 0; st < steps; ++st) {
      int64_t n = 0;
      for (int64_t b = 0; b < g.n; ++b) {
        const int64_t len = rnn_length(g, a, b);
        if (st >= len) continue;
        const int64_t t = back ? len - 1 - st : st;
        RnnRow& e = table[n++];
        e.xw = xw + (g.batch_first ? b * g.t + t : t * g.n + b) * GH;
        e.h = st == 0 ? (h0 ? h0 + g.s_at(dir, b) : zero) : y + g.y_at(back ? t + 1 : t - 1, dir, b);
        e.h_out = y + g.y_at(t, dir, b);
        e.c = yc ? yc + g.s_at(dir, b) : nullptr;
        e.aux = aux + b * aux_floats(g);
      }
      *count = n;
      call_kernel(k.step[st % 2], {count, rd, vec}, nullptr);
    }
    for (int64_t b = 0; b < g.n; ++b) {
      const int64_t len = rnn_length(g, a, b);
      const float* last = len > 0 ? y + g.y_at(back ? 0 : len - 1, dir, b) : h0 ? h0 + g.s_at(dir, b) : zero;
      std::memcpy(yh + g.s_at(dir, b), last, row_bytes);
      for (int64_t t = len; t < g.t; ++t) std::memset(y + g.y_at(t, dir, b), 0, row_bytes);
    }
  }
}

const char* kind_name(RnnKind k) { return k == RnnKind::LSTM ? "lstm" : k == RnnKind::GRU ? "gru" : "rnn"; }

Result<RnnGeom> request_geom(const JitRequest& r) {
  RnnGeom g;
  std::vector<TensorType> types(r.in, r.in + r.ins.in.size());
  NNASM_TRY(rnn_geom(r.ins, types, &g));
  return g;
}

}  // namespace

size_t rnn_scratch(const Instruction& ins, const TensorType* in, const TensorType* out) {
  RnnGeom g;
  std::vector<TensorType> types(in, in + ins.in.size());
  if (!rnn_geom(ins, types, &g)) return rnn_ref_scratch(ins, in, out);
  return std::max(rnn_ref_scratch(ins, in, out), layout(g).bytes);
}

Result<std::shared_ptr<const JitKernel>> rnn_jit(const JitRequest& r, KernelCache& cache) {
  if (r.split_reduction) return std::shared_ptr<const JitKernel>();
  Result<RnnGeom> geom = request_geom(r);
  if (!geom) return geom.status();
  auto k = std::make_shared<RnnKernel>();
  k->g = geom.value();
  const RnnGeom& g = k->g;
  // The kernels address a gate's rows of R, and a block of W's rows, with 32-bit displacements.
  const int64_t disp_max = (int64_t(1) << 31) - (int64_t(1) << 20);
  if (4 * g.gh() * g.h >= disp_max || 4 * MAX_VL * g.i >= disp_max) return std::shared_ptr<const JitKernel>();
  k->lay = layout(g);
  if (r.n_parts == 2 && g.d == 2) k->dir0 = r.part, k->dir1 = r.part + 1;
  else k->dir0 = 0, k->dir1 = g.d;
  const ProjDesc pd{g.t * g.n, g.gh(), g.i};
  const std::string proj_name = fmt::format("f32_{}_projection__{}", kind_name(g.kind), isa_name(r.isa));
  Result<std::shared_ptr<const JitKernel>> proj =
      build_kernel_measured(cache, fmt::format("{}|m{}n{}k{}", proj_name, pd.m, pd.n, pd.k), proj_name, size_t(1) << 20,
                            [pd, isa = r.isa](CodeGenerator& cg) { return ProjGen(cg, pd, isa).emit(); });
  if (!proj || !proj.value()) return proj;
  k->proj = proj.value()->fn();
  k->keep.push_back(proj.value());
  for (int descending = 0; descending < 2; ++descending) {
    const StepDesc sd{g.kind, g.h, g.gates, g.peephole, g.linear_before_reset, g.relu, descending != 0};
    const std::string step_name = fmt::format("f32_{}_step__{}", kind_name(g.kind), isa_name(r.isa));
    const std::string step_key = fmt::format("{}|h{}|p{}|lbr{}|relu{}|desc{}", step_name, g.h, int(g.peephole),
                                             int(g.linear_before_reset), int(g.relu), descending);
    Result<std::shared_ptr<const JitKernel>> step =
        build_kernel_measured(cache, step_key, step_name, size_t(1) << 20,
                              [sd, isa = r.isa](CodeGenerator& cg) { return StepGen(cg, sd, isa).emit(); });
    if (!step || !step.value()) return step;
    k->step[descending] = step.value()->fn();
    k->keep.push_back(step.value());
  }
  const std::string name = fmt::format("f32_{}__{}", kind_name(g.kind), isa_name(r.isa));
  const std::string key =
      fmt::format("{}|t{}n{}i{}h{}d{}|rev{}bf{}|in{}{}{}{}|lbr{}relu{}|part{}/{}", name, g.t, g.n, g.i, g.h, g.d,
                  int(g.reverse), int(g.batch_first), g.in_h0, g.in_c0, g.in_lens, g.in_p, int(g.linear_before_reset),
                  int(g.relu), k->dir0, k->dir1);
  return cache.get(key, [&] { return build_bound_kernel(name, forward, std::shared_ptr<const void>(k)); });
}

int rnn_jit_parts(const JitRequest& r, int threads) {
  Result<RnnGeom> geom = request_geom(r);
  if (!geom || threads < 2 || geom.value().d != 2) return 1;
  const RnnGeom& g = geom.value();
  return 2 * g.t * g.n * g.gh() * (g.i + g.h) >= PART_FLOPS ? 2 : 1;
}

}  // namespace nnasm
