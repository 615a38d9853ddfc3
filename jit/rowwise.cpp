// The row-wise/reduction generator: a small set of sweeps (over a contiguous row, or down a
// strided column block) shared by softmax, the reductions, softmax cross-entropy and the norm clip.
#include "jit/rowwise.h"

#include <cstring>
#include <functional>

#include <fmt/format.h>
#include <xbyak/xbyak.h>

#include "isa/tensor.h"
#include "jit/frame.h"
#include "jit/vecgen.h"
#include "jit/vmath.h"

namespace nnasm {

using namespace Xbyak;

namespace {

constexpr int64_t MAX_ELEMS = int64_t(1) << 28;  // byte displacements stay within int32
constexpr uint32_t NAN_BITS = 0x7fc00000u;
constexpr uint32_t NEG_INF_BITS = 0xff800000u;
constexpr uint32_t POS_INF_BITS = 0x7f800000u;
constexpr uint32_t ONE_BITS = 0x3f800000u;

// The reductions' combining step d = a ⊕ b, and the identity of ⊕ (what fills lanes past a row).
void combine(CodeGenerator& g, RowOp op, const Xmm& d, const Xmm& a, const Operand& b) {
  switch (op) {
    case RowOp::MAX: g.vmaxps(d, a, b); break;
    case RowOp::MIN: g.vminps(d, a, b); break;
    case RowOp::PROD: g.vmulps(d, a, b); break;
    default: g.vaddps(d, a, b);
  }
}
uint32_t identity_bits(RowOp op) {
  switch (op) {
    case RowOp::MAX: return NEG_INF_BITS;
    case RowOp::MIN: return POS_INF_BITS;
    case RowOp::PROD: return ONE_BITS;
    default: return 0;
  }
}

uint64_t dbits(double d) {
  uint64_t b;
  std::memcpy(&b, &d, 8);
  return b;
}

// Where one vector of a sweep sits: `elem` floats from the base, plus the loop index (r9, a
// negative byte offset counting up to 0) when use_idx.
struct Off {
  bool use_idx;
  int64_t elem;
};

class Gen {
 public:
  Gen(CodeGenerator& gen, Isa isa) : g(gen), v(gen, isa), W(v.width()) {}
  CodeGenerator& g;
  VecGen v;
  const int W;
  Xmm mask;  // AVX2 tail mask register (reserved while tails are emitted)

  Xmm r(int i) const { return v.vreg(i); }

  Address at(const Reg64& base, const Off& o) const {
    const int32_t disp = static_cast<int32_t>(o.elem * 4);
    return o.use_idx ? g.ptr[base + g.r9 + disp] : g.ptr[base + disp];
  }

  // Visits a row of `len` floats in vectors: a loop of `unroll` full vectors per iteration (r9 as
  // the index), the remaining full vectors unrolled, then the tail (count = len % W, which must be
  // the VecGen's current tail). visit(c, off, count): c < unroll names the copy's registers.
  void sweep(int64_t len, int unroll, const std::function<void(int, const Off&, int)>& visit) {
    const int64_t step = int64_t(unroll) * W, n_iter = len / step;
    if (n_iter >= 2) {
      Label loop;
      g.mov(g.r9, -n_iter * step * 4);
      g.align(16);
      g.L(loop);
      for (int c = 0; c < unroll; ++c) visit(c, Off{true, n_iter * step + int64_t(c) * W}, W);
      g.add(g.r9, static_cast<int32_t>(step * 4));
      g.jnz(loop, CodeGenerator::T_NEAR);
    } else if (n_iter == 1) {
      for (int c = 0; c < unroll; ++c) visit(c, Off{false, int64_t(c) * W}, W);
    }
    const int64_t done = n_iter * step;
    const int full = static_cast<int>((len - done) / W);
    for (int j = 0; j < full; ++j) visit(j, Off{false, done + int64_t(j) * W}, W);
    const int tail = static_cast<int>(len % W);
    if (tail) visit(full, Off{false, done + int64_t(full) * W}, tail);
  }

  // dst = the `count` floats at a, lanes past count set to the float with bits `fill`.
  void load_fill(const Xmm& dst, const Address& a, int count, uint32_t fill, const Xmm& tmp) {
    if (count == W) {
      g.vmovups(dst, a);
    } else if (v.avx512()) {
      g.vmovups(dst, v.cst_bits(fill));
      g.vmovups(dst | g.k1, a);
    } else {
      g.vmaskmovps(dst, mask, a);
      g.vmovups(tmp, v.cst_bits(fill));
      g.vblendvps(dst, tmp, dst, mask);
    }
  }

  // acc += e, lanes past count left out (e may hold anything there; AVX2 clears them in e).
  void add_masked(const Xmm& acc, const Xmm& e, int count) {
    if (count == W) {
      g.vaddps(acc, acc, e);
    } else if (v.avx512()) {
      g.vaddps(acc | g.k1, acc, e);
    } else {
      g.vandps(e, e, mask);
      g.vaddps(acc, acc, e);
    }
  }

  // accs[0] = the accumulators combined by a fixed pairwise tree.
  void tree(const std::vector<Xmm>& accs, const std::function<void(const Xmm&, const Xmm&)>& op) {
    const size_t n = accs.size();
    for (size_t step = 1; step < n; step *= 2)
      for (size_t i = 0; i + step < n; i += 2 * step) op(accs[i], accs[i + step]);
  }

  // Lane 0 of `a` = its lanes combined by a fixed halving tree with `rop`'s step (a, t: registers
  // below 16).
  void hreduce_ps(const Xmm& a, const Xmm& t, RowOp rop) {
    auto op = [&](const Xmm& d, const Xmm& x) { combine(g, rop, d, d, x); };
    const int ai = a.getIdx(), ti = t.getIdx();
    if (v.avx512()) {
      g.vextractf64x4(Ymm(ti), Zmm(ai), 1);
      op(Ymm(ai), Ymm(ti));
    }
    g.vextractf128(Xmm(ti), Ymm(ai), 1);
    op(Xmm(ai), Xmm(ti));
    g.vmovhlps(Xmm(ti), Xmm(ti), Xmm(ai));
    op(Xmm(ai), Xmm(ti));
    g.vmovshdup(Xmm(ti), Xmm(ai));
    op(Xmm(ai), Xmm(ti));
  }

  void hreduce_pd(const Xmm& a, const Xmm& t) {
    const int ai = a.getIdx(), ti = t.getIdx();
    if (v.avx512()) {
      g.vextractf64x4(Ymm(ti), Zmm(ai), 1);
      g.vaddpd(Ymm(ai), Ymm(ai), Ymm(ti));
    }
    g.vextractf128(Xmm(ti), Ymm(ai), 1);
    g.vaddpd(Xmm(ai), Xmm(ai), Xmm(ti));
    g.vunpckhpd(Xmm(ti), Xmm(ai), Xmm(ai));
    g.vaddsd(Xmm(ai), Xmm(ai), Xmm(ti));
  }

  // The NaN flags of REDUCE_MAX: opmask k3+c on AVX-512, vector `flag` on AVX2.
  void nan_clear(int c, const Xmm& flag) {
    if (v.avx512()) g.kxorw(Opmask(3 + c), Opmask(3 + c), Opmask(3 + c));
    else g.vxorps(flag, flag, flag);
  }
  // Records the NaN lanes of x (x is clobbered on AVX2).
  void nan_track(int c, const Xmm& x, const Xmm& flag) {
    if (v.avx512()) {
      g.vcmpps(g.k2, x, x, VecGen::CMP_UNORD);
      g.korw(Opmask(3 + c), Opmask(3 + c), g.k2);
    } else {
      g.vcmpps(x, x, x, VecGen::CMP_UNORD);
      g.vorps(flag, flag, x);
    }
  }
};


int unroll_for(const Gen& G, int per_copy, int shared) {
  const int free = G.v.num_vregs() - shared - (G.v.avx512() ? 0 : 1);
  return std::max(1, std::min(4, free / per_copy));
}

// ---- reductions ----

Status emit_reduce_row(CodeGenerator& cg, const RowSpec& s) {
  // Register map:
  //   rsi x row, rdx y element, r8 rows left, r9 sweep index, rax scratch
  //   vregs 0..3 accumulators, 4..7 loaded vectors, 8..11 NaN flags (MAX/MIN, AVX2; AVX-512:
  //   k3..k6), 12 fill scratch (AVX2), 15 tail mask (AVX2); k1 tail mask, k2 compare scratch
  Gen G(cg, s.isa);
  CodeGenerator& g = cg;
  VecGen& v = G.v;
  constexpr int U = 4;
  const bool mx = s.op == RowOp::MAX || s.op == RowOp::MIN;  // NaN-propagating extrema
  const uint32_t id = identity_bits(s.op);
  const int tail = static_cast<int>(s.len % G.W);
  if (tail && !v.avx512()) G.mask = G.r(15);
  auto acc = [&](int c) { return G.r(c); };
  auto x = [&](int c) { return G.r(4 + c); };
  auto flag = [&](int c) { return G.r(8 + c); };
  {
    Frame f(g, 0);
    f.load_in(g.rsi, 0);
    f.load_out(g.rdx, 0);
    v.set_tail(tail, G.mask);
    Label row;
    if (s.outer > 1) {
      g.mov(g.r8, s.outer);
      g.align(16);
      g.L(row);
    }
    for (int c = 0; c < U; ++c) {
      if (id) g.vmovups(acc(c), v.cst_bits(id));
      else g.vxorps(acc(c), acc(c), acc(c));
      if (mx) G.nan_clear(c, flag(c));
    }
    G.sweep(s.len, U, [&](int c, const Off& o, int count) {
      if (!mx) {
        if (count == G.W) {
          combine(g, s.op, acc(c), acc(c), G.at(g.rsi, o));
        } else {
          G.load_fill(x(c), G.at(g.rsi, o), count, id, G.r(12));
          combine(g, s.op, acc(c), acc(c), x(c));
        }
      } else {
        G.load_fill(x(c), G.at(g.rsi, o), count, id, G.r(12));
        combine(g, s.op, acc(c), x(c), acc(c));  // a NaN x leaves acc; the flags record it
        G.nan_track(c, x(c), flag(c));
      }
    });
    G.tree({acc(0), acc(1), acc(2), acc(3)}, [&](const Xmm& a, const Xmm& b) { combine(g, s.op, a, a, b); });
    G.hreduce_ps(acc(0), x(0), s.op);
    const Xmm res(0);
    if (s.op == RowOp::MEAN) g.vdivss(res, res, v.cst(static_cast<float>(s.len)));
    if (mx) {
      Label clean;
      if (v.avx512()) {
        for (int c = 1; c < U; ++c) g.korw(g.k3, g.k3, Opmask(3 + c));
        g.kortestw(g.k3, g.k3);
      } else {
        for (int c = 1; c < U; ++c) g.vorps(flag(0), flag(0), flag(c));
        g.vmovmskps(g.eax, flag(0));
        g.test(g.eax, g.eax);
      }
      g.jz(clean, CodeGenerator::T_NEAR);
      g.vmovss(res, v.cst_bits(NAN_BITS));
      g.L(clean);
    }
    g.vmovss(g.ptr[g.rdx], res);
    if (s.outer > 1) {
      g.add(g.rsi, static_cast<int32_t>(s.len * 4));
      g.add(g.rdx, 4);
      g.dec(g.r8);
      g.jnz(row, CodeGenerator::T_NEAR);
    }
  }
  v.finish();
  return Status::ok();
}

// The column blocks of the inner dimension: `body(nv, last)` emits one block of nv vectors (the
// last one of `last` floats) at x block base r10 / y block base r11; this loops over the full
// blocks of 4 vectors, then emits the remainder block.
void col_blocks(Gen& G, int64_t inner, int U, const std::function<void(int, int)>& body) {
  CodeGenerator& g = G.g;
  const int64_t bstep = int64_t(U) * G.W, nb = inner / bstep;
  if (nb >= 1) {
    Label blk;
    if (nb > 1) {
      g.mov(g.rcx, nb);
      g.align(16);
      g.L(blk);
    }
    body(U, G.W);
    g.add(g.r10, static_cast<int32_t>(bstep * 4));
    g.add(g.r11, static_cast<int32_t>(bstep * 4));
    if (nb > 1) {
      g.dec(g.rcx);
      g.jnz(blk, CodeGenerator::T_NEAR);
    }
  }
  const int64_t rem = inner - nb * bstep;
  const int tail = static_cast<int>(inner % G.W);
  const int nv = static_cast<int>(rem / G.W) + (tail ? 1 : 0);
  if (nv > 0) body(nv, tail ? tail : G.W);
}

// One walk down the axis for a block: r9 counts len steps, `p` (and `q`, if valid) advance by
// inner floats per step.
void col_walk(Gen& G, int64_t len, int64_t inner, const Reg64& p, const Reg64* q, const std::function<void()>& step) {
  CodeGenerator& g = G.g;
  Label loop;
  g.mov(g.r9, len);
  g.align(16);
  g.L(loop);
  step();
  g.add(p, static_cast<int32_t>(inner * 4));
  if (q) g.add(*q, static_cast<int32_t>(inner * 4));
  g.dec(g.r9);
  g.jnz(loop, CodeGenerator::T_NEAR);
}

Status emit_reduce_col(CodeGenerator& cg, const RowSpec& s) {
  // Register map:
  //   rsi x (outer slice), rdx y (outer slice), r10/r11 x/y block bases, rax x walker, r9 axis
  //   counter, rcx block counter, r8 outer counter
  //   vregs 0..3 accumulators, 4..7 loaded vectors, 8..11 NaN flags (MAX/MIN, AVX2; AVX-512:
  //   k3..k6), 15 tail mask (AVX2); k1 tail mask, k2 compare scratch
  Gen G(cg, s.isa);
  CodeGenerator& g = cg;
  VecGen& v = G.v;
  constexpr int U = 4;
  const bool mx = s.op == RowOp::MAX || s.op == RowOp::MIN;
  const uint32_t id = identity_bits(s.op);
  const int tail = static_cast<int>(s.inner % G.W);
  if (tail && !v.avx512()) G.mask = G.r(15);
  auto acc = [&](int c) { return G.r(c); };
  auto x = [&](int c) { return G.r(4 + c); };
  auto flag = [&](int c) { return G.r(8 + c); };
  {
    Frame f(g, 0);
    f.load_in(g.rsi, 0);
    f.load_out(g.rdx, 0);
    v.set_tail(tail, G.mask);
    Label outer;
    if (s.outer > 1) {
      g.mov(g.r8, s.outer);
      g.align(16);
      g.L(outer);
    }
    g.mov(g.r10, g.rsi);
    g.mov(g.r11, g.rdx);
    col_blocks(G, s.inner, U, [&](int nv, int last) {
      auto cnt = [&](int c) { return c == nv - 1 ? last : G.W; };
      for (int c = 0; c < nv; ++c) {
        if (id) g.vmovups(acc(c), v.cst_bits(id));
        else g.vxorps(acc(c), acc(c), acc(c));
        if (mx) G.nan_clear(c, flag(c));
      }
      g.mov(g.rax, g.r10);
      col_walk(G, s.len, s.inner, g.rax, nullptr, [&] {
        for (int c = 0; c < nv; ++c) {
          const Address a = g.ptr[g.rax + c * G.v.vbytes()];
          if (!mx && cnt(c) == G.W) {
            combine(g, s.op, acc(c), acc(c), a);
            continue;
          }
          v.load(x(c), a, cnt(c));  // lanes past cnt are never stored
          if (mx) {
            combine(g, s.op, acc(c), x(c), acc(c));
            G.nan_track(c, x(c), flag(c));
          } else {
            combine(g, s.op, acc(c), acc(c), x(c));
          }
        }
      });
      for (int c = 0; c < nv; ++c) {
        if (s.op == RowOp::MEAN) g.vdivps(acc(c), acc(c), v.cst(static_cast<float>(s.len)));
        if (mx) {
          if (v.avx512()) g.vmovups(acc(c) | Opmask(3 + c), v.cst_bits(NAN_BITS));
          else g.vblendvps(acc(c), acc(c), v.cst_bits(NAN_BITS), flag(c));
        }
        v.store(g.ptr[g.r11 + c * G.v.vbytes()], acc(c), cnt(c));
      }
    });
    if (s.outer > 1) {
      g.add(g.rsi, static_cast<int32_t>(s.len * s.inner * 4));
      g.add(g.rdx, static_cast<int32_t>(s.inner * 4));
      g.dec(g.r8);
      g.jnz(outer, CodeGenerator::T_NEAR);
    }
  }
  v.finish();
  return Status::ok();
}

// ---- softmax ----

// The registers of the softmax and cross-entropy kernels: shared ones first (so the ones the
// scalar code touches are below 16), then per unrolled copy an accumulator, a loaded vector and
// two snippet temporaries.
struct SmRegs {
  static constexpr int SHARED = 4;  // 0: m (broadcast max), 1: ln Σ or 1/Σ, 2: Σ loss (double), 3: dloss/rows
  int U;
  const Gen* G;
  Xmm m() const { return G->r(0); }
  Xmm s() const { return G->r(1); }
  Xmm total() const { return Xmm(2); }
  Xmm scale() const { return G->r(3); }
  Xmm acc(int c) const { return G->r(SHARED + c); }
  Xmm x(int c) const { return G->r(SHARED + U + c); }
  Xmm t0(int c) const { return G->r(SHARED + 2 * U + c); }
  Xmm t1(int c) const { return G->r(SHARED + 3 * U + c); }
  std::vector<Xmm> accs() const {
    std::vector<Xmm> a;
    for (int c = 0; c < U; ++c) a.push_back(acc(c));
    return a;
  }
};

// Pass 1 over the row at rsi: m = max (NaN ignored, as std::fmax), broadcast to every lane.
void row_max(Gen& G, const SmRegs& R, int64_t len) {
  CodeGenerator& g = G.g;
  for (int c = 0; c < R.U; ++c) g.vmovups(R.acc(c), G.v.cst_bits(NEG_INF_BITS));
  G.sweep(len, R.U, [&](int c, const Off& o, int count) {
    G.load_fill(R.x(c), G.at(g.rsi, o), count, NEG_INF_BITS, R.t0(c));
    g.vmaxps(R.acc(c), R.x(c), R.acc(c));
  });
  G.tree(R.accs(), [&](const Xmm& a, const Xmm& b) { g.vmaxps(a, a, b); });
  G.hreduce_ps(R.acc(0), R.x(0), RowOp::MAX);
  g.vbroadcastss(R.m(), Xmm(R.acc(0).getIdx()));
}

// Pass 2: Σ e^(x − m) into lane 0 of acc(0); with store, e^(x − m) is written to rdx as well.
void row_sum_exp(Gen& G, const SmRegs& R, int64_t len, bool store) {
  CodeGenerator& g = G.g;
  for (int c = 0; c < R.U; ++c) g.vxorps(R.acc(c), R.acc(c), R.acc(c));
  G.sweep(len, R.U, [&](int c, const Off& o, int count) {
    G.v.load(R.x(c), G.at(g.rsi, o), count);
    g.vsubps(R.x(c), R.x(c), R.m());
    vmath::exp(G.v, R.x(c), R.x(c), {R.t0(c), R.t1(c)});
    if (store) G.v.store(G.at(g.rdx, o), R.x(c), count);
    G.add_masked(R.acc(c), R.x(c), count);
  });
  G.tree(R.accs(), [&](const Xmm& a, const Xmm& b) { g.vaddps(a, a, b); });
  G.hreduce_ps(R.acc(0), R.x(0), RowOp::SUM);
}

// s = ln Σ in every lane, from lane 0 of acc(0).
void row_log_sum(Gen& G, const SmRegs& R) {
  G.g.vbroadcastss(R.s(), Xmm(R.acc(0).getIdx()));
  vmath::log(G.v, R.s(), R.s(), {R.x(0), R.t0(0), R.t1(0)});
}

Status emit_softmax_row(CodeGenerator& cg, const RowSpec& s) {
  // Register map:
  //   rsi x row, rdx y row, r8 rows left, r9 sweep index, rax scratch
  //   vregs (SmRegs) 0 max, 1 1/Σ or ln Σ, then per copy c < U: accumulator, x, two exp temps;
  //   15 tail mask (AVX2); k1 tail mask, k2 snippet scratch
  Gen G(cg, s.isa);
  CodeGenerator& g = cg;
  VecGen& v = G.v;
  const SmRegs R{unroll_for(G, 4, SmRegs::SHARED), &G};
  const bool log = s.op == RowOp::LOGSOFTMAX;
  const int tail = static_cast<int>(s.len % G.W);
  if (tail && !v.avx512()) G.mask = G.r(15);
  {
    Frame f(g, 0);
    f.load_in(g.rsi, 0);
    f.load_out(g.rdx, 0);
    v.set_tail(tail, G.mask);
    Label row;
    if (s.outer > 1) {
      g.mov(g.r8, s.outer);
      g.align(16);
      g.L(row);
    }
    row_max(G, R, s.len);
    row_sum_exp(G, R, s.len, !log);
    if (log) {
      row_log_sum(G, R);
      G.sweep(s.len, R.U, [&](int c, const Off& o, int count) {
        v.load(R.x(c), G.at(g.rsi, o), count);
        g.vsubps(R.x(c), R.x(c), R.m());
        g.vsubps(R.x(c), R.x(c), R.s());
        v.store(G.at(g.rdx, o), R.x(c), count);
      });
    } else {
      const Xmm one(R.x(0).getIdx());
      g.vmovss(one, v.cst(1.f));
      g.vdivss(one, one, Xmm(R.acc(0).getIdx()));
      g.vbroadcastss(R.s(), one);
      G.sweep(s.len, R.U, [&](int c, const Off& o, int count) {
        v.load(R.x(c), G.at(g.rdx, o), count);
        g.vmulps(R.x(c), R.x(c), R.s());
        v.store(G.at(g.rdx, o), R.x(c), count);
      });
    }
    if (s.outer > 1) {
      g.add(g.rsi, static_cast<int32_t>(s.len * 4));
      g.add(g.rdx, static_cast<int32_t>(s.len * 4));
      g.dec(g.r8);
      g.jnz(row, CodeGenerator::T_NEAR);
    }
  }
  v.finish();
  return Status::ok();
}

Status emit_softmax_col(CodeGenerator& cg, const RowSpec& s) {
  // Register map:
  //   rsi x (outer slice), rdx y (outer slice), r10/r11 x/y block bases, rax x walker,
  //   rbx y walker (saved), r9 axis counter, rcx block counter, r8 outer counter
  //   vregs per copy c < U: m, Σ (then 1/Σ or ln Σ), x, two snippet temps; 15 tail mask (AVX2);
  //   k1 tail mask, k2 snippet scratch
  Gen G(cg, s.isa);
  CodeGenerator& g = cg;
  VecGen& v = G.v;
  const int U = unroll_for(G, 5, 0);
  const bool log = s.op == RowOp::LOGSOFTMAX;
  const int tail = static_cast<int>(s.inner % G.W);
  if (tail && !v.avx512()) G.mask = G.r(15);
  auto m = [&](int c) { return G.r(c); };
  auto sum = [&](int c) { return G.r(U + c); };
  auto x = [&](int c) { return G.r(2 * U + c); };
  auto t0 = [&](int c) { return G.r(3 * U + c); };
  auto t1 = [&](int c) { return G.r(4 * U + c); };
  {
    Frame f(g, 1);
    f.load_in(g.rsi, 0);
    f.load_out(g.rdx, 0);
    v.set_tail(tail, G.mask);
    Label outer;
    if (s.outer > 1) {
      g.mov(g.r8, s.outer);
      g.align(16);
      g.L(outer);
    }
    g.mov(g.r10, g.rsi);
    g.mov(g.r11, g.rdx);
    col_blocks(G, s.inner, U, [&](int nv, int last) {
      auto cnt = [&](int c) { return c == nv - 1 ? last : G.W; };
      auto xa = [&](int c) { return g.ptr[g.rax + c * G.v.vbytes()]; };
      auto ya = [&](int c) { return g.ptr[g.rbx + c * G.v.vbytes()]; };
      for (int c = 0; c < nv; ++c) {
        g.vmovups(m(c), v.cst_bits(NEG_INF_BITS));
        g.vxorps(sum(c), sum(c), sum(c));
      }
      g.mov(g.rax, g.r10);
      col_walk(G, s.len, s.inner, g.rax, nullptr, [&] {
        for (int c = 0; c < nv; ++c) {
          v.load(x(c), xa(c), cnt(c));
          g.vmaxps(m(c), x(c), m(c));
        }
      });
      g.mov(g.rax, g.r10);
      g.mov(g.rbx, g.r11);
      col_walk(G, s.len, s.inner, g.rax, &g.rbx, [&] {
        for (int c = 0; c < nv; ++c) {
          v.load(x(c), xa(c), cnt(c));
          g.vsubps(x(c), x(c), m(c));
          vmath::exp(v, x(c), x(c), {t0(c), t1(c)});
          if (!log) v.store(ya(c), x(c), cnt(c));
          g.vaddps(sum(c), sum(c), x(c));
        }
      });
      for (int c = 0; c < nv; ++c) {
        if (log) {
          vmath::log(v, sum(c), sum(c), {x(c), t0(c), t1(c)});
        } else {
          g.vmovups(x(c), v.cst(1.f));
          g.vdivps(sum(c), x(c), sum(c));
        }
      }
      g.mov(g.rax, g.r10);
      g.mov(g.rbx, g.r11);
      col_walk(G, s.len, s.inner, g.rax, &g.rbx, [&] {
        for (int c = 0; c < nv; ++c) {
          if (log) {
            v.load(x(c), xa(c), cnt(c));
            g.vsubps(x(c), x(c), m(c));
            g.vsubps(x(c), x(c), sum(c));
          } else {
            v.load(x(c), ya(c), cnt(c));
            g.vmulps(x(c), x(c), sum(c));
          }
          v.store(ya(c), x(c), cnt(c));
        }
      });
    });
    if (s.outer > 1) {
      g.add(g.rsi, static_cast<int32_t>(s.len * s.inner * 4));
      g.add(g.rdx, static_cast<int32_t>(s.len * s.inner * 4));
      g.dec(g.r8);
      g.jnz(outer, CodeGenerator::T_NEAR);
    }
  }
  v.finish();
  return Status::ok();
}

// ---- softmax cross-entropy ----

struct CeSpec {
  Isa isa;
  int64_t rows, classes;
  bool ids, bwd;
};

Status emit_softmax_ce(CodeGenerator& cg, const CeSpec& s) {
  // Register map:
  //   rsi x row, rcx target (id or row), rdx dx row (BWD) / the loss (forward, at the end),
  //   r8 rows left, r9 sweep index, rax scratch (the id)
  //   vregs (SmRegs) 0 max, 1 ln Σ, 2 Σ loss terms (double, forward), 3 dloss/rows (BWD), then per
  //   copy c < U: accumulator, x, two snippet temps; 15 tail mask (AVX2); k1 tail mask,
  //   k2 snippet scratch
  Gen G(cg, s.isa);
  CodeGenerator& g = cg;
  VecGen& v = G.v;
  const SmRegs R{unroll_for(G, 4, SmRegs::SHARED), &G};
  const int64_t C = s.classes;
  const int tail = static_cast<int>(C % G.W);
  if (tail && !v.avx512()) G.mask = G.r(15);
  {
    Frame f(g, 0);
    f.load_in(g.rsi, 0);
    f.load_in(g.rcx, 1);
    if (s.bwd) {
      f.load_out(g.rdx, 0);
      f.load_in(g.rax, 2);
      const Xmm sc(R.x(0).getIdx());
      g.vmovss(sc, g.ptr[g.rax]);
      g.vdivss(sc, sc, v.cst(static_cast<float>(s.rows)));
      g.vbroadcastss(R.scale(), sc);
    } else {
      g.vxorps(R.total(), R.total(), R.total());
    }
    v.set_tail(tail, G.mask);
    Label row;
    if (s.rows > 1) {
      g.mov(g.r8, s.rows);
      g.align(16);
      g.L(row);
    }
    row_max(G, R, C);
    row_sum_exp(G, R, C, false);
    row_log_sum(G, R);
    Label next, bad;
    if (s.ids) {
      g.movsxd(g.rax, g.dword[g.rcx]);
      g.cmp(g.rax, static_cast<int32_t>(C));
      g.jae(bad, CodeGenerator::T_NEAR);  // unsigned: a negative id is huge
    }
    if (!s.bwd) {
      const Xmm d(R.x(0).getIdx());
      if (s.ids) {
        g.vmovss(d, g.ptr[g.rsi + g.rax * 4]);
        g.vsubss(d, d, Xmm(R.m().getIdx()));
        g.vsubss(d, d, Xmm(R.s().getIdx()));
      } else {
        for (int c = 0; c < R.U; ++c) g.vxorps(R.acc(c), R.acc(c), R.acc(c));
        G.sweep(C, R.U, [&](int c, const Off& o, int count) {
          v.load(R.x(c), G.at(g.rsi, o), count);
          g.vsubps(R.x(c), R.x(c), R.m());
          g.vsubps(R.x(c), R.x(c), R.s());
          v.load(R.t0(c), G.at(g.rcx, o), count);
          g.vmulps(R.t1(c), R.t0(c), R.x(c));
          const VMask nz = v.mask(0, R.t0(c));
          v.cmp(nz, R.t0(c), v.cst(0.f), VecGen::CMP_NEQ_UQ);  // the reference skips t == 0
          v.keep(R.t1(c), nz, R.t1(c));
          g.vaddps(R.acc(c), R.acc(c), R.t1(c));
        });
        G.tree(R.accs(), [&](const Xmm& a, const Xmm& b) { g.vaddps(a, a, b); });
        G.hreduce_ps(R.acc(0), R.x(0), RowOp::SUM);
        g.vmovss(d, d, Xmm(R.acc(0).getIdx()));
      }
      g.vcvtss2sd(d, d, d);
      g.vsubsd(R.total(), R.total(), d);
      if (s.ids) {
        g.jmp(next, CodeGenerator::T_NEAR);
        g.L(bad);
        g.vaddsd(R.total(), R.total(), v.cst_bits(0xffffffffu));  // a double NaN
      }
    } else {
      G.sweep(C, R.U, [&](int c, const Off& o, int count) {
        v.load(R.x(c), G.at(g.rsi, o), count);
        g.vsubps(R.x(c), R.x(c), R.m());
        g.vsubps(R.x(c), R.x(c), R.s());
        vmath::exp(v, R.x(c), R.x(c), {R.t0(c), R.t1(c)});
        if (!s.ids) {
          v.load(R.t0(c), G.at(g.rcx, o), count);
          g.vsubps(R.x(c), R.x(c), R.t0(c));
        }
        g.vmulps(R.x(c), R.x(c), R.scale());
        v.store(G.at(g.rdx, o), R.x(c), count);
      });
      if (s.ids) {
        // The target's element: the same lane computation on x[id] broadcast, minus 1.
        const Xmm e = R.x(0);
        g.vbroadcastss(e, g.ptr[g.rsi + g.rax * 4]);
        g.vsubps(e, e, R.m());
        g.vsubps(e, e, R.s());
        vmath::exp(v, e, e, {R.t0(0), R.t1(0)});
        g.vsubps(e, e, v.cst(1.f));
        g.vmulps(e, e, R.scale());
        g.vmovss(g.ptr[g.rdx + g.rax * 4], Xmm(e.getIdx()));
        g.jmp(next, CodeGenerator::T_NEAR);
        g.L(bad);
        g.vmovups(R.x(0), v.cst_bits(NAN_BITS));
        G.sweep(C, 1, [&](int, const Off& o, int count) { v.store(G.at(g.rdx, o), R.x(0), count); });
      }
    }
    g.L(next);
    if (s.rows > 1) {
      g.add(g.rsi, static_cast<int32_t>(C * 4));
      g.add(g.rcx, static_cast<int32_t>(s.ids ? 4 : C * 4));
      if (s.bwd) g.add(g.rdx, static_cast<int32_t>(C * 4));
      g.dec(g.r8);
      g.jnz(row, CodeGenerator::T_NEAR);
    }
    if (!s.bwd) {
      g.mov(g.rax, dbits(static_cast<double>(s.rows)));
      g.vmovq(Xmm(R.x(0).getIdx()), g.rax);
      g.vdivsd(R.total(), R.total(), Xmm(R.x(0).getIdx()));
      g.vcvtsd2ss(R.total(), R.total(), R.total());
      f.load_out(g.rdx, 0);
      g.vmovss(g.ptr[g.rdx], R.total());
    }
  }
  v.finish();
  return Status::ok();
}

// ---- gradient-norm clip ----

Status emit_clip(CodeGenerator& cg, Isa isa, const std::vector<int64_t>& sizes, double max_norm) {
  // Register map:
  //   rsi gradient k (read), rdx gradient k (written), r9 sweep index, rax scratch
  //   vregs 0..7 double accumulators (copy c, half h: 2c + h), 8..11 per-copy temporaries,
  //   12, 13 tail temporaries, 14 the scale (float, every lane), 15 tail mask (AVX2);
  //   k1 tail mask
  Gen G(cg, isa);
  CodeGenerator& g = cg;
  VecGen& v = G.v;
  constexpr int U = 4;
  const int half = G.W / 2;
  if (!v.avx512()) G.mask = G.r(15);
  auto acc = [&](int c, int h) { return G.r(2 * c + h); };
  auto tmp = [&](int c) { return G.r(8 + c); };
  const Xmm sc = G.r(14);
  {
    Frame f(g, 0);
    for (int i = 0; i < 2 * U; ++i) g.vxorpd(G.r(i), G.r(i), G.r(i));
    for (size_t k = 0; k < sizes.size(); ++k) {
      const int64_t n = sizes[k];
      if (n <= 0) continue;
      f.load_in(g.rsi, static_cast<int>(k));
      v.set_tail(static_cast<int>(n % G.W), G.mask);
      G.sweep(n, U, [&](int c, const Off& o, int count) {
        if (count == G.W) {
          for (int h = 0; h < 2; ++h) {
            g.vcvtps2pd(tmp(c), G.at(g.rsi, Off{o.use_idx, o.elem + h * half}));
            g.vfmadd231pd(acc(c, h), tmp(c), tmp(c));
          }
          return;
        }
        const Xmm a = G.r(12), b = G.r(13);
        v.load(a, G.at(g.rsi, o), count);
        if (v.avx512()) {
          g.vextractf64x4(Ymm(b.getIdx()), Zmm(a.getIdx()), 1);
          g.vcvtps2pd(Zmm(a.getIdx()), Ymm(a.getIdx()));
          g.vcvtps2pd(Zmm(b.getIdx()), Ymm(b.getIdx()));
        } else {
          g.vextractf128(Xmm(b.getIdx()), Ymm(a.getIdx()), 1);
          g.vcvtps2pd(Ymm(a.getIdx()), Xmm(a.getIdx()));
          g.vcvtps2pd(Ymm(b.getIdx()), Xmm(b.getIdx()));
        }
        g.vfmadd231pd(acc(c, 0), a, a);
        g.vfmadd231pd(acc(c, 1), b, b);
      });
    }
    std::vector<Xmm> accs;
    for (int i = 0; i < 2 * U; ++i) accs.push_back(G.r(i));
    G.tree(accs, [&](const Xmm& a, const Xmm& b) { g.vaddpd(a, a, b); });
    G.hreduce_pd(G.r(0), G.r(8));
    const Xmm norm(0), mn(1), eps(2);
    g.vsqrtsd(norm, norm, norm);
    g.mov(g.rax, dbits(max_norm));
    g.vmovq(mn, g.rax);
    Label done;
    g.vucomisd(norm, mn);
    g.jbe(done, CodeGenerator::T_NEAR);  // !(norm > max_norm), NaN included
    g.mov(g.rax, dbits(1e-6));
    g.vmovq(eps, g.rax);
    g.vaddsd(norm, norm, eps);
    g.vdivsd(mn, mn, norm);
    g.vcvtsd2ss(mn, mn, mn);
    g.vbroadcastss(sc, mn);
    for (size_t k = 0; k < sizes.size(); ++k) {
      const int64_t n = sizes[k];
      if (n <= 0) continue;
      f.load_out(g.rdx, static_cast<int>(k));
      v.set_tail(static_cast<int>(n % G.W), G.mask);
      G.sweep(n, U, [&](int c, const Off& o, int count) {
        v.load(tmp(c), G.at(g.rdx, o), count);
        g.vmulps(tmp(c), tmp(c), sc);
        v.store(G.at(g.rdx, o), tmp(c), count);
      });
    }
    g.L(done);
  }
  v.finish();
  return Status::ok();
}

const char* row_op_name(RowOp op) {
  switch (op) {
    case RowOp::SOFTMAX: return "softmax";
    case RowOp::LOGSOFTMAX: return "logsoftmax";
    case RowOp::SUM: return "reduce_sum";
    case RowOp::MEAN: return "reduce_mean";
    case RowOp::MAX: return "reduce_max";
    case RowOp::MIN: return "reduce_min";
    case RowOp::PROD: return "reduce_prod";
  }
  return "?";
}

}  // namespace

Result<KernelRef> rowwise_kernel(const RowSpec& s, KernelCache& cache) {
  if (s.isa == Isa::REF) return KernelRef();
  if (s.outer < 1 || s.len < 1 || s.inner < 1) return KernelRef();
  if (s.outer > MAX_ELEMS || s.len > MAX_ELEMS || s.inner > MAX_ELEMS || s.outer * s.len * s.inner > MAX_ELEMS)
    return KernelRef();
  const bool row = s.inner == 1;
  const std::string name = fmt::format("f32_{}__{}_{}", row_op_name(s.op), isa_name(s.isa), row ? "row" : "col");
  const std::string key = fmt::format("{}|{}x{}x{}", name, s.outer, s.len, s.inner);
  const bool softmax = s.op == RowOp::SOFTMAX || s.op == RowOp::LOGSOFTMAX;
  return build_kernel_measured(cache, key, name, 256 * 1024, [s, row, softmax](CodeGenerator& g) {
    if (softmax) return row ? emit_softmax_row(g, s) : emit_softmax_col(g, s);
    return row ? emit_reduce_row(g, s) : emit_reduce_col(g, s);
  });
}

Result<KernelRef> softmax_ce_kernel(Isa isa, int64_t rows, int64_t classes, bool ids, bool bwd, KernelCache& cache) {
  if (isa == Isa::REF || rows < 1 || classes < 1) return KernelRef();
  if (rows > MAX_ELEMS || classes > MAX_ELEMS || rows * classes > MAX_ELEMS) return KernelRef();
  const std::string name =
      fmt::format("f32_softmax_ce{}_{}__{}", bwd ? "_bwd" : "", ids ? "ids" : "probs", isa_name(isa));
  const std::string key = fmt::format("{}|{}x{}", name, rows, classes);
  const CeSpec s{isa, rows, classes, ids, bwd};
  return build_kernel_measured(cache, key, name, 256 * 1024, [s](CodeGenerator& g) { return emit_softmax_ce(g, s); });
}

Result<KernelRef> clip_norm_kernel(Isa isa, const std::vector<int64_t>& sizes, double max_norm, KernelCache& cache) {
  if (isa == Isa::REF || sizes.empty()) return KernelRef();
  for (int64_t n : sizes)
    if (n < 0 || n > MAX_ELEMS) return KernelRef();
  const std::string name = fmt::format("f32_clip_grad_norm__{}", isa_name(isa));
  std::string key = fmt::format("{}|{:016x}|", name, dbits(max_norm));
  for (int64_t n : sizes) key += fmt::format("{},", n);
  return build_kernel_measured(cache, key, name, size_t(8) << 20,
               [isa, sizes, max_norm](CodeGenerator& g) { return emit_clip(g, isa, sizes, max_norm); });
}

}  // namespace nnasm
