// Code for the GEMM plans of jit/gemm_plan.h: the loop nest, B packing, the register-tiled
// micro-kernels (called as local subroutines, one per distinct tile/K-block shape) and the dot
// kernel. Every size is a constant of the generated code; tails are exact (opmasks on AVX-512,
// a mask table and vmaskmovps on AVX2), so nothing is read or written outside the operands.
#include <algorithm>
#include <cstddef>
#include <map>
#include <tuple>

#include <xbyak/xbyak.h>

#include "jit/act_snippet.h"
#include "jit/frame.h"
#include "jit/gemm_plan.h"
#include "jit/vecgen.h"

namespace nnasm {
namespace gemm {
namespace {

using namespace Xbyak;
using namespace Xbyak::util;

// Stack slots of the loop nest, bytes from rsp.
constexpr int S_BATCH = 0;  // one counter per batch loop (at most MAX_RANK - 2 of them)
constexpr int S_JC_CNT = 32;
constexpr int S_PC_CNT = 40;
constexpr int S_JC = 48;  // byte offset of the current N block in a row of C (columns × 4)
constexpr int S_PC = 56;  // first k of the current K block
constexpr int S_AROW = 64;  // A at the current row panel (when A is packed)
constexpr int S_C = 72;     // C, while a K split's part points rC at its slots
constexpr int S_STATE = 80;  // KernelArgs::state (a K split's part counter)
constexpr int FRAME_BYTES = 96;

constexpr int UNROLL = 4;  // k steps per micro-kernel loop iteration
// The GEMV's: one row of B per iteration, since four rows measured slower for 1×784·784×256
// (BM_gemm_gemv_784x256_nnasm; the same instructions but for the pointer steps: not understood;
// docs/benchmarks.md, Measurements behind design choices).
constexpr int GEMV_UNROLL = 1;

// A micro-kernel: mr rows × nv vectors, the last vector `lanes` wide, over kc steps of k.
struct MicroKey {
  int mr, nv, lanes;
  int64_t kc;
  bool operator<(const MicroKey& o) const {
    return std::tie(mr, nv, lanes, kc) < std::tie(o.mr, o.nv, o.lanes, o.kc);
  }
};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

class Gen {
 public:
  Gen(CodeGenerator& g, const Plan& p)
      : g_(g), p_(p), avx512_(p.isa == Isa::AVX512), vb_(p.vlen * 4), vg_(g, p.isa) {}
  void emit();

 private:
  // Base pointers of the current batch: A, B, C, the bias, the packing buffer (scratch).
  const Reg64 &rA = r15, &rB = r14, &rC = r13, &rBias = r12, &rPack = rbx;

  Xmm vec(int i) const { return avx512_ ? Xmm(Zmm(i)) : Xmm(Ymm(i)); }
  Address mask_row(int lanes) {
    mask_used_ = true;
    return ptr[rip + mask_table_ + (8 - lanes) * 4];
  }
  void set_opmask(const Opmask& k, const Reg32& tmp, int lanes) {
    g_.mov(tmp, (1u << lanes) - 1);
    g_.kmovw(k, tmp);
  }

  template <class F>
  void repeat(int64_t count, const Reg64& counter, F body);
  template <class F>
  void repeat_slot(int64_t count, int slot, F body);
  template <class Step, class Advance>
  void unrolled(int64_t total, int u, const Reg64& counter, Step step, Advance advance);

  void batch(size_t d);
  void body_gemm();
  void body_k_part();
  void combine_slots();
  void n_block(int64_t w);
  void k_block(int64_t w, int64_t kcw);
  void columns(int mr, int64_t w, int64_t kcw);
  Label& micro(int mr, int nv, int lanes, int64_t kc) { return micro_[MicroKey{mr, nv, lanes, kc}]; }
  void emit_micro(const MicroKey& key, Label& entry);
  void activate(int mr, int nv, bool masked, int smask);
  void pack(int64_t w, int64_t kcw);
  void pack_panel(int64_t wp, int64_t kcw);
  void pack_transposed(int64_t rows, int64_t kcw, int64_t src_stride, int64_t dst_stride, int blocks);
  void transpose_block(int jb, int valid_rows, int kt, int64_t src_stride, int64_t dst_stride);
  void pack_a_rows(int mr, int64_t kcw);
  void body_dot();
  void dot_pass(int64_t row0);
  void dot_group(int rv);
  void dot_chunk(int64_t off, int rv, bool masked);
  void dot_reduce_store(int m, int rv);
  void load_n(int reg, const Address& a, int cnt, int width, int mask_reg);
  void store_n(const Address& a, int reg, int cnt, int width, int mask_reg);

  CodeGenerator& g_;
  const Plan& p_;
  const bool avx512_;
  const int vb_;  // bytes per vector
  VecGen vg_;     // the activation snippets' constants
  std::map<MicroKey, Label> micro_;
  int mg_ = 0, rows_ = 0;  // dot: rows of A in this pass, rows of Bᵀ per group
  Label mask_table_;
  bool mask_used_ = false;
};

template <class F>
void Gen::repeat(int64_t count, const Reg64& counter, F body) {
  if (count <= 0) return;
  if (count == 1) {
    body();
    return;
  }
  Label top;
  g_.mov(counter, count);
  g_.L(top);
  body();
  g_.dec(counter);
  g_.jnz(top, CodeGenerator::T_NEAR);
}

template <class F>
void Gen::repeat_slot(int64_t count, int slot, F body) {
  if (count <= 0) return;
  if (count == 1) {
    body();
    return;
  }
  Label top;
  g_.mov(g_.qword[rsp + slot], count);
  g_.L(top);
  body();
  g_.dec(g_.qword[rsp + slot]);
  g_.jnz(top, CodeGenerator::T_NEAR);
}

// `total` steps, `u` per loop iteration, the remainder unrolled after the loop. step(s) emits step
// s of an iteration relative to the moving pointers; advance(n) moves them on by n steps (the
// pointers end `total` steps on).
template <class Step, class Advance>
void Gen::unrolled(int64_t total, int u, const Reg64& counter, Step step, Advance advance) {
  const int64_t iters = total / u;
  const int rem = static_cast<int>(total % u);
  if (iters >= 2) {
    Label top;
    g_.mov(counter, iters);
    g_.L(top);
    for (int s = 0; s < u; ++s) step(s);
    advance(u);
    g_.dec(counter);
    g_.jnz(top, CodeGenerator::T_NEAR);
    for (int s = 0; s < rem; ++s) step(s);
    if (rem) advance(rem);
  } else {
    const int n = static_cast<int>(total);
    for (int s = 0; s < n; ++s) step(s);
    if (n) advance(n);
  }
}

// Register map (whole kernel):
//   rdi          KernelArgs* on entry; then the row-panel counter (packing: panel counter)
//   r15 r14 r13  A, B, C of the current batch;  r12 bias
//   rbx          scratch: packed B block, then the packed A panel at ap_offset; dot: A rows;
//                a K split's part: the shared scratch (the slots)
//   rsi          A at (first row of the panel, first k of the block)
//   rdx          B panel (packed) or B at (k block, column) (gemv); dot: current rows of Bᵀ
//   rcx          C at (row panel, column);  r8 bias at the column
//   r9           bit 0: 0 while the first K block is written, 1 once C holds a partial sum;
//                bit 1: the last K block (apply the activation), set only when there is one;
//                bit 2: a K split's slot, written without the bias
//   rbp          column-panel counter (packing, dot: k-step counter)
//   rax r10 r11  micro-kernel counter and moving A/B pointers; packing source/destination
//   [rsp+..]     batch counters, N/K block counters and offsets (S_* above)
void Gen::emit() {
  {
    Frame f(g_, 6);
    g_.sub(rsp, FRAME_BYTES);
    g_.mov(rax, ptr[Frame::args() + offsetof(KernelArgs, in)]);
    g_.mov(rA, ptr[rax]);
    g_.mov(rB, ptr[rax + 8]);
    if (p_.bias) g_.mov(rBias, ptr[rax + 16]);
    g_.mov(rax, ptr[Frame::args() + offsetof(KernelArgs, out)]);
    g_.mov(rC, ptr[rax]);
    if (p_.k_parts > 1) {
      g_.mov(rPack, ptr[Frame::args() + offsetof(KernelArgs, shared)]);
      g_.mov(rax, ptr[Frame::args() + offsetof(KernelArgs, state)]);
      g_.mov(g_.qword[rsp + S_STATE], rax);
    } else {
      g_.mov(rPack, ptr[Frame::args() + offsetof(KernelArgs, scratch)]);
    }
    if (p_.a_skip) g_.add(rA, p_.a_skip);
    if (p_.b_skip) g_.add(rB, p_.b_skip);
    if (p_.c_skip) g_.add(rC, p_.c_skip);
    if (p_.bias && p_.bias_skip) g_.add(rBias, p_.bias_skip);
    if (p_.k_parts > 1) body_k_part();
    else batch(0);
    g_.add(rsp, FRAME_BYTES);
  }
  for (auto& [key, entry] : micro_) emit_micro(key, entry);
  if (mask_used_) {
    // mask_row(l): 8 words, the first l all ones.
    g_.align(32);
    g_.L(mask_table_);
    for (int i = 0; i < 16; ++i) g_.dd(i < 8 ? 0xffffffffu : 0u);
  }
  vg_.finish();
}

void Gen::batch(size_t d) {
  if (d == p_.loops.size()) {
    if (p_.mode == Mode::DOT) body_dot();
    else body_gemm();
    return;
  }
  const BatchLoop& l = p_.loops[d];
  const int slot = S_BATCH + 8 * static_cast<int>(d);
  Label top;
  g_.mov(g_.qword[rsp + slot], l.count);
  g_.L(top);
  batch(d + 1);
  if (l.a_step) g_.add(rA, l.a_step);
  if (l.b_step) g_.add(rB, l.b_step);
  g_.add(rC, l.c_step);
  g_.dec(g_.qword[rsp + slot]);
  g_.jnz(top, CodeGenerator::T_NEAR);
  if (d > 0) {  // rewind for the enclosing loop's next step
    if (l.a_step) g_.sub(rA, l.a_step * l.count);
    if (l.b_step) g_.sub(rB, l.b_step * l.count);
    g_.sub(rC, l.c_step * l.count);
  }
}

void Gen::body_gemm() {
  const int64_t blocks = ceil_div(p_.n, p_.nc), last = p_.n - (blocks - 1) * p_.nc;
  g_.mov(g_.qword[rsp + S_JC], 0);
  repeat_slot(last == p_.nc ? blocks : blocks - 1, S_JC_CNT, [&] {
    n_block(p_.nc);
    g_.add(g_.qword[rsp + S_JC], p_.nc * 4);
  });
  if (last != p_.nc) n_block(last);
}

// A part of a GEMV split along K (Plan::k_parts): its segments, chained into C by part 0 and
// into their slots by the others; then the part counter, and the last part to finish completes
// C. (No batch loops: the split is planned only without them.)
void Gen::body_k_part() {
  const int S = p_.kseg;
  g_.mov(g_.qword[rsp + S_JC], 0);
  g_.mov(g_.qword[rsp + S_C], rC);
  for (int b = p_.seg_begin(p_.k_part); b < p_.seg_begin(p_.k_part + 1); ++b) {
    g_.mov(g_.qword[rsp + S_PC], b * p_.kc);
    if (p_.k_part == 0) {
      g_.mov(r9d, b == 0 && !p_.accumulate ? 0 : 1);
    } else {
      g_.lea(rC, ptr[rPack + b * p_.slot_bytes]);
      g_.mov(r9d, 4);  // the raw sum: no bias
    }
    k_block(p_.n, b == S - 1 ? p_.k - (S - 1) * p_.kc : p_.kc);
  }
  g_.mov(rC, g_.qword[rsp + S_C]);
  // lock xadd orders this part's stores before the count, and the last part's loads after it.
  Label done;
  g_.mov(rax, g_.qword[rsp + S_STATE]);
  g_.mov(ecx, 1);
  g_.lock();
  g_.xadd(g_.dword[rax + offsetof(RunState, parts_done)], ecx);
  g_.cmp(ecx, p_.k_parts - 1);
  g_.jne(done, CodeGenerator::T_NEAR);
  combine_slots();
  g_.mov(rax, g_.qword[rsp + S_STATE]);
  g_.mov(g_.dword[rax + offsetof(RunState, parts_done)], 0);
  g_.L(done);
}

// Register map (the last part; in: rC C, rbx the slots, k1 / ymm15 the tail mask):
//   vec(0)  one vector of C, the slots added in segment order, then activated
//   vec(1..13)  the activation snippet's scratch;  AVX2 ymm14 a masked slot load
//   r10 C at the row and column;  r11 the slots at the row and column;  rdi vector counter
// Each element gets C + the slots of segments seg_begin(1) … kseg−1 left to right and then the
// activation: the additions and the snippet the whole kernel's later K blocks and epilogue
// perform.
void Gen::combine_slots() {
  const int64_t full = p_.n / p_.vlen;
  const int tail = static_cast<int>(p_.n % p_.vlen);
  const bool act = p_.act != Activation::NONE;
  const ActSnippet s = act_snippet(act ? p_.act : Activation::RELU, p_.act_alpha);
  std::vector<Xmm> t;
  for (int r = 1; act && static_cast<int>(t.size()) < s.n_tmp; ++r) t.push_back(vec(r));
  if (tail) {
    if (avx512_) set_opmask(k1, eax, tail);
    else g_.vmovups(Ymm(15), mask_row(tail));
  }
  const Xmm x = vec(0);
  auto one = [&](bool masked) {
    if (!masked) g_.vmovups(x, ptr[r10]);
    else if (avx512_) g_.vmovups(x | k1 | T_z, ptr[r10]);
    else g_.vmaskmovps(Ymm(0), Ymm(15), ptr[r10]);
    for (int seg = p_.seg_begin(1); seg < p_.kseg; ++seg) {
      const Address slot = ptr[r11 + seg * p_.slot_bytes];
      if (!masked) {
        g_.vaddps(x, x, slot);
      } else if (avx512_) {
        g_.vaddps(x | k1, x, slot);
      } else {
        g_.vmaskmovps(Ymm(14), Ymm(15), slot);
        g_.vaddps(x, x, Ymm(14));
      }
    }
    if (act) s.body(vg_, x, x, t);
    if (!masked) g_.vmovups(ptr[r10], x);
    else if (avx512_) g_.vmovups(ptr[r10] | k1, x);
    else g_.vmaskmovps(ptr[r10], Ymm(15), Ymm(0));
  };
  for (int64_t i = 0; i < p_.m; ++i) {
    g_.lea(r10, ptr[rC + i * p_.ldc * 4]);
    g_.lea(r11, ptr[rPack + i * p_.n * 4]);
    repeat(full, rdi, [&] {
      one(false);
      g_.add(r10, vb_);
      g_.add(r11, vb_);
    });
    if (tail) one(true);
  }
}

// Columns [jc, jc + w) of C, over all of K in blocks of kc.
void Gen::n_block(int64_t w) {
  const int64_t blocks = ceil_div(p_.k, p_.kc), last = p_.k - (blocks - 1) * p_.kc;
  // Accumulating, C already holds a partial sum before the first block.
  if (p_.accumulate) g_.mov(r9d, 1);
  else g_.xor_(r9d, r9d);
  g_.mov(g_.qword[rsp + S_PC], 0);
  if (p_.act != Activation::NONE) {
    // The last block on its own, flagged, so that its epilogue applies the activation.
    repeat_slot(blocks - 1, S_PC_CNT, [&] {
      k_block(w, p_.kc);
      g_.mov(r9d, 1);
      g_.add(g_.qword[rsp + S_PC], p_.kc);
    });
    g_.or_(r9d, 2);
    k_block(w, last);
    return;
  }
  repeat_slot(last == p_.kc ? blocks : blocks - 1, S_PC_CNT, [&] {
    k_block(w, p_.kc);
    g_.mov(r9d, 1);
    g_.add(g_.qword[rsp + S_PC], p_.kc);
  });
  if (last != p_.kc) k_block(w, last);
}

// One K block of one N block: pack B, then every row panel of A (balanced: row panels differ by
// one row at most; packed first if the plan says so) over every column panel.
void Gen::k_block(int64_t w, int64_t kcw) {
  if (p_.pack_b) pack(w, kcw);
  g_.mov(rsi, g_.qword[rsp + S_PC]);
  g_.imul(rsi, rsi, static_cast<int>(p_.a_ks));
  g_.add(rsi, rA);
  if (p_.pack_a) g_.mov(g_.qword[rsp + S_AROW], rsi);
  g_.mov(rcx, g_.qword[rsp + S_JC]);
  g_.add(rcx, rC);
  const int64_t panels = ceil_div(p_.m, p_.mr_max), lo = p_.m / panels, n_hi = p_.m % panels;
  const std::pair<int64_t, int64_t> kinds[2] = {{lo + 1, n_hi}, {lo, panels - n_hi}};
  for (const auto& [mr, count] : kinds)
    repeat(count, rdi, [&, mr = mr] {
      if (p_.pack_a) {
        g_.mov(rax, g_.qword[rsp + S_AROW]);
        g_.lea(r11, ptr[rPack + p_.ap_offset]);
        if (p_.ta) pack_a_rows(static_cast<int>(mr), kcw);
        else pack_transposed(mr, kcw, p_.a_rs, p_.ap_ks, static_cast<int>(ceil_div(mr, 8)));
        g_.lea(rsi, ptr[rPack + p_.ap_offset]);
        g_.add(g_.qword[rsp + S_AROW], mr * p_.a_rs);
      }
      columns(static_cast<int>(mr), w, kcw);
      if (!p_.pack_a) g_.add(rsi, mr * p_.a_rs);
      g_.add(rcx, mr * p_.ldc * 4);
    });
}

void Gen::columns(int mr, int64_t w, int64_t kcw) {
  const int64_t nr = p_.nr();
  int64_t b_step;
  if (p_.pack_b) {
    g_.mov(rdx, rPack);
    b_step = kcw * nr * 4;
  } else {
    g_.mov(rdx, g_.qword[rsp + S_PC]);
    g_.imul(rdx, rdx, static_cast<int>(p_.ldb * 4));
    g_.add(rdx, g_.qword[rsp + S_JC]);
    g_.add(rdx, rB);
    b_step = nr * 4;
  }
  if (p_.bias) {
    g_.mov(r8, g_.qword[rsp + S_JC]);
    g_.add(r8, rBias);
  }
  const int64_t full = w / nr, tail = w % nr;
  repeat(full, rbp, [&] {
    g_.call(micro(mr, p_.nvec, p_.vlen, kcw));
    g_.add(rdx, b_step);
    g_.add(rcx, nr * 4);
    if (p_.bias) g_.add(r8, nr * 4);
  });
  if (tail) {
    const int nv = static_cast<int>(ceil_div(tail, p_.vlen));
    g_.call(micro(mr, nv, static_cast<int>(tail - (nv - 1) * p_.vlen), kcw));
  }
  if (full) g_.sub(rcx, full * nr * 4);
}

// Register map (micro-kernel; in: rsi A, rdx B, rcx C, r8 bias, r9 store mode):
//   vec(i·nv + v)        accumulator of row i, vector v
//   vec(mr·nv + v)       B vector v of the current k (when mr > 1; one row uses B from memory)
//   t0, t1               AVX2: broadcasts of A, alternating (AVX-512 broadcasts inside the FMA);
//                        t0 the bias in the epilogue; AVX2: t1 holds the store mask
//   mk                   AVX2 gemv: mask of B's last vector
//   k1                   AVX-512: mask of the last vector
//   rax                  k loop counter;  r10, r11 moving A and B pointers
// The epilogue writes C (plus the bias row) on the first K block and adds into C after it.
// The last K block (r9 bit 1) then applies the activation to the C it has just written
// (activate()): the accumulators fill the register file, so the activation reads C back from L1
// a vector at a time with the snippet's scratch registers free. Earlier blocks store partial sums.
void Gen::emit_micro(const MicroKey& key, Label& entry) {
  const int mr = key.mr, nv = key.nv, lanes = key.lanes;
  const bool masked = lanes < p_.vlen;
  const bool b_masked = masked && !p_.pack_b;  // B is read at its own edge
  const int sets = p_.mode == Mode::GEMV ? p_.kacc : 1;
  const int b0 = sets * mr * nv, t0 = b0 + (mr > 1 ? nv : 0), t1 = t0 + 1, mk = t1 + 1;
  const int64_t a_ks = p_.pack_a ? p_.ap_ks : p_.a_ks, a_rs = p_.pack_a ? 4 : p_.a_rs;
  const int64_t b_ks = p_.pack_b ? p_.nr() * 4 : p_.ldb * 4;
  const int64_t ldc = p_.ldc * 4;
  auto acc = [&](int i, int v) { return vec(i * nv + v); };
  // Set u's accumulator (set 0 is acc).
  auto acc_in = [&](int u, int i, int v) { return vec((u * mr + i) * nv + v); };
  auto last = [&](int v) { return masked && v == nv - 1; };

  g_.align(16);
  g_.L(entry);
  if (masked) {
    if (avx512_) set_opmask(k1, eax, lanes);
    else if (b_masked) g_.vmovups(Ymm(mk), mask_row(lanes));
  }
  for (int u = 0; u < sets; ++u)
    for (int i = 0; i < mr; ++i)
      for (int v = 0; v < nv; ++v) g_.vxorps(acc_in(u, i, v), acc_in(u, i, v), acc_in(u, i, v));
  g_.mov(r10, rsi);
  g_.mov(r11, rdx);
  unrolled(
      key.kc, p_.mode == Mode::GEMV ? std::max(GEMV_UNROLL, sets) : UNROLL, rax,
      [&](int s) {
        const int64_t ao = s * a_ks, bo = s * b_ks;
        auto acc = [&, u = s % sets](int i, int v) { return acc_in(u, i, v); };
        if (mr == 1) {
          g_.vbroadcastss(vec(t0), ptr[r10 + ao]);
          for (int v = 0; v < nv; ++v) {
            const Address b = ptr[r11 + bo + v * vb_];
            if (b_masked && last(v)) {
              if (avx512_) {
                g_.vfmadd231ps(acc(0, v) | k1, vec(t0), b);
              } else {
                g_.vmaskmovps(Ymm(t1), Ymm(mk), b);
                g_.vfmadd231ps(acc(0, v), vec(t0), vec(t1));
              }
            } else {
              g_.vfmadd231ps(acc(0, v), vec(t0), b);
            }
          }
          return;
        }
        if (p_.b_prefetch)
          for (int64_t line = 0; line < nv * vb_; line += 64) g_.prefetcht0(ptr[r11 + bo + p_.b_prefetch + line]);
        for (int v = 0; v < nv; ++v) {
          const Address b = ptr[r11 + bo + v * vb_];
          if (b_masked && last(v)) {
            if (avx512_) g_.vmovups(vec(b0 + v) | k1 | T_z, b);
            else g_.vmaskmovps(Ymm(b0 + v), Ymm(mk), b);
          } else {
            g_.vmovups(vec(b0 + v), b);
          }
        }
        for (int i = 0; i < mr; ++i) {
          if (avx512_) {
            // A's element as the FMA's embedded broadcast: one fused load+FMA per vector,
            // fewer uops to rename than a separate broadcast (measured slightly faster).
            for (int v = 0; v < nv; ++v) g_.vfmadd231ps(acc(i, v), vec(b0 + v), g_.ptr_b[r10 + i * a_rs + ao]);
            continue;
          }
          const Xmm t = vec(i & 1 ? t1 : t0);
          g_.vbroadcastss(t, ptr[r10 + i * a_rs + ao]);
          for (int v = 0; v < nv; ++v) g_.vfmadd231ps(acc(i, v), vec(b0 + v), t);
        }
      },
      [&](int64_t steps) {
        g_.add(r10, steps * a_ks);
        g_.add(r11, steps * b_ks);
      });
  // The sets into set 0, pairwise in a fixed order.
  for (int half = 1; half < sets; half *= 2)
    for (int u = 0; u + half < sets; u += 2 * half)
      for (int i = 0; i < mr; ++i)
        for (int v = 0; v < nv; ++v) g_.vaddps(acc_in(u, i, v), acc_in(u, i, v), acc_in(u + half, i, v));

  // AVX2 stores the last vector through a mask register: mk (gemv), else t1 (free by now).
  const int smask = b_masked ? mk : t1;
  auto c_at = [&](int i, int v) { return ptr[rcx + i * ldc + v * vb_]; };
  // Both paths end in the stores; the activation's code (the same for both) follows the second.
  Label activation;
  auto store_all = [&](bool first) {
    for (int i = 0; i < mr; ++i)
      for (int v = 0; v < nv; ++v) {
        if (!last(v)) g_.vmovups(c_at(i, v), acc(i, v));
        else if (avx512_) g_.vmovups(c_at(i, v) | k1, acc(i, v));
        else g_.vmaskmovps(c_at(i, v), Ymm(smask), Ymm(i * nv + v));
      }
    if (p_.act != Activation::NONE) {
      if (first) {
        g_.jmp(activation, CodeGenerator::T_NEAR);
        return;
      }
      g_.L(activation);
      activate(mr, nv, masked, smask);
    }
    g_.ret();
  };
  Label accumulate;
  g_.test(r9d, 1);
  g_.jnz(accumulate, CodeGenerator::T_NEAR);
  if (masked && !avx512_ && !b_masked) g_.vmovups(Ymm(t1), mask_row(lanes));
  Label no_bias;
  if (p_.bias && p_.k_part > 0) {
    g_.test(r9d, 4);
    g_.jnz(no_bias, CodeGenerator::T_NEAR);
  }
  if (p_.bias) {
    for (int v = 0; v < nv; ++v) {
      const Address b = ptr[r8 + v * vb_];
      if (!last(v)) g_.vmovups(vec(t0), b);
      else if (avx512_) g_.vmovups(vec(t0) | k1 | T_z, b);
      else g_.vmaskmovps(Ymm(t0), Ymm(smask), b);
      for (int i = 0; i < mr; ++i) g_.vaddps(acc(i, v), acc(i, v), vec(t0));
    }
  }
  g_.L(no_bias);
  store_all(true);

  g_.L(accumulate);
  if (masked && !avx512_ && !b_masked) g_.vmovups(Ymm(t1), mask_row(lanes));
  for (int i = 0; i < mr; ++i)
    for (int v = 0; v < nv; ++v) {
      if (!last(v)) {
        g_.vaddps(acc(i, v), acc(i, v), c_at(i, v));
      } else if (avx512_) {
        g_.vaddps(acc(i, v) | k1, acc(i, v), c_at(i, v));
      } else {
        g_.vmaskmovps(Ymm(t0), Ymm(smask), c_at(i, v));
        g_.vaddps(acc(i, v), acc(i, v), vec(t0));
      }
    }
  store_all(false);
}

// Register map (activation; in: rcx C, r9 store mode, k1 / vec(smask) the tail mask):
//   vec(0)  one vector of C;  vec(1..)  the snippet's scratch, past smask on AVX2
//   r10     C at the current row;  rax  row counter (free after the k loop)
// C = act(C) over the mr × nv tile just stored, when r9 says this is the last K block; a loop
// over the rows, so that the code grows with nv only.
void Gen::activate(int mr, int nv, bool masked, int smask) {
  Label done;
  g_.test(r9d, 2);
  g_.jz(done, CodeGenerator::T_NEAR);
  const ActSnippet s = act_snippet(p_.act, p_.act_alpha);
  const Xmm x = vec(0);
  std::vector<Xmm> t;
  for (int r = 1; static_cast<int>(t.size()) < s.n_tmp; ++r)
    if (avx512_ || !masked || r != smask) t.push_back(vec(r));
  g_.mov(r10, rcx);
  repeat(mr, rax, [&] {
    for (int v = 0; v < nv; ++v) {
      const Address c = ptr[r10 + v * vb_];
      const bool tail = masked && v == nv - 1;
      if (!tail) g_.vmovups(x, c);
      else if (avx512_) g_.vmovups(x | k1 | T_z, c);
      else g_.vmaskmovps(Ymm(0), Ymm(smask), c);
      s.body(vg_, x, x, t);
      if (!tail) g_.vmovups(c, x);
      else if (avx512_) g_.vmovups(c | k1, x);
      else g_.vmaskmovps(c, Ymm(smask), Ymm(0));
    }
    g_.add(r10, p_.ldc * 4);
  });
  g_.L(done);
}

// Packs op(B)[pc : pc+kcw, jc : jc+w] into NR-wide panels at rbx: panel p holds kcw rows of NR
// floats (row k at p·kcw·NR + k·NR). A last narrow panel fills only the vectors its
// micro-kernel loads. Uses rax (source panel), r10, r11, rdi, rbp, r8 (mask), vec 0..15, k2, k3.
// The A packing (inside the row-panel loop) uses the same registers but rdi.
void Gen::pack(int64_t w, int64_t kcw) {
  const int64_t nr = p_.nr(), full = w / nr, tail = w % nr;
  g_.mov(r11, rPack);
  if (!p_.tb) {
    g_.mov(rax, g_.qword[rsp + S_PC]);
    g_.imul(rax, rax, static_cast<int>(p_.ldb * 4));
    g_.add(rax, g_.qword[rsp + S_JC]);
    g_.add(rax, rB);
    repeat(full, rdi, [&] {
      pack_panel(nr, kcw);
      g_.add(rax, nr * 4);
    });
    if (tail) pack_panel(tail, kcw);
  } else {
    g_.mov(rax, g_.qword[rsp + S_JC]);
    g_.imul(rax, rax, static_cast<int>(p_.k));
    g_.mov(r10, g_.qword[rsp + S_PC]);
    g_.lea(rax, ptr[rax + r10 * 4]);
    g_.add(rax, rB);
    const int64_t src = p_.k * 4, dst = nr * 4;
    auto blocks = [&](int64_t wp) { return static_cast<int>(ceil_div(wp, p_.vlen) * p_.vlen / 8); };
    repeat(full, rdi, [&] {
      pack_transposed(nr, kcw, src, dst, blocks(nr));
      g_.add(rax, nr * p_.k * 4);
    });
    if (tail) pack_transposed(tail, kcw, src, dst, blocks(tail));
  }
}

// B row-major: each k row of the panel is a contiguous run of wp floats of B.
void Gen::pack_panel(int64_t wp, int64_t kcw) {
  const int nv = static_cast<int>(ceil_div(wp, p_.vlen));
  const int lanes = static_cast<int>(wp - (nv - 1) * p_.vlen);
  const bool masked = lanes < p_.vlen;
  const int64_t nr4 = p_.nr() * 4, ldb = p_.ldb * 4;
  if (masked) {
    if (avx512_) set_opmask(k2, r8d, lanes);
    else g_.vmovups(Ymm(15), mask_row(lanes));
  }
  g_.mov(r10, rax);
  unrolled(
      kcw, UNROLL, rbp,
      [&](int s) {
        for (int v = 0; v < nv; ++v) {
          const int r = s * nv + v;
          const Address src = ptr[r10 + s * ldb + v * vb_];
          if (!masked || v < nv - 1) g_.vmovups(vec(r), src);
          else if (avx512_) g_.vmovups(vec(r) | k2 | T_z, src);
          else g_.vmaskmovps(Ymm(r), Ymm(15), src);
          g_.vmovups(ptr[r11 + s * nr4 + v * vb_], vec(r));
        }
      },
      [&](int64_t steps) {
        g_.add(r10, steps * ldb);
        g_.add(r11, steps * nr4);
      });
}

// Packs `rows` rows of kcw floats (row j at rax + j·src_stride) k-major to r11: k row t at
// t·dst_stride holds those rows' k-th floats, `blocks` groups of 8 (rows past `rows` zero); r11
// ends past the last k row. Bᵀ panels and row-major A panels alike. 8×8 blocks are transposed
// in registers.
void Gen::pack_transposed(int64_t rows, int64_t kcw, int64_t src_stride, int64_t dst_stride, int blocks) {
  auto valid = [&](int jb) { return static_cast<int>(std::clamp<int64_t>(rows - jb * 8, 0, 8)); };
  g_.mov(r10, rax);
  repeat(kcw / 8, rbp, [&] {
    for (int jb = 0; jb < blocks; ++jb) transpose_block(jb, valid(jb), 8, src_stride, dst_stride);
    g_.add(r10, 32);
    g_.add(r11, 8 * dst_stride);
  });
  if (const int rem = static_cast<int>(kcw % 8)) {
    if (avx512_) set_opmask(k3, r8d, rem);
    for (int jb = 0; jb < blocks; ++jb) transpose_block(jb, valid(jb), rem, src_stride, dst_stride);
    g_.add(r11, rem * dst_stride);
  }
}

// Aᵀ stored [K, M]: the mr floats of each k are contiguous; copied with one masked vector per k
// from rax to r11 (k rows ap_ks bytes apart).
void Gen::pack_a_rows(int mr, int64_t kcw) {
  if (avx512_) set_opmask(k2, r8d, mr);
  else g_.vmovups(Ymm(15), mask_row(mr));
  g_.mov(r10, rax);
  unrolled(
      kcw, UNROLL, rbp,
      [&](int s) {
        const Address src = ptr[r10 + s * p_.a_ks];
        if (avx512_) g_.vmovups(vec(s) | k2 | T_z, src);
        else g_.vmaskmovps(Ymm(s), Ymm(15), src);
        g_.vmovups(ptr[r11 + s * p_.ap_ks], vec(s));
      },
      [&](int64_t steps) {
        g_.add(r10, steps * p_.a_ks);
        g_.add(r11, steps * p_.ap_ks);
      });
}

// Register map: ymm0..7 source rows jb·8 + r (k from r10, kt of them; rows past `valid_rows`
// are zero), ymm8..15 temporaries and then the transposed rows; AVX2 ymm8 first holds the k
// mask.
void Gen::transpose_block(int jb, int valid_rows, int kt, int64_t src_stride, int64_t dst_stride) {
  const bool masked = kt < 8;
  if (masked && !avx512_ && valid_rows > 0) g_.vmovups(Ymm(8), mask_row(kt));
  for (int r = 0; r < 8; ++r) {
    const Ymm y(r);
    if (r >= valid_rows) {
      g_.vxorps(y, y, y);
      continue;
    }
    const Address src = ptr[r10 + (jb * 8 + r) * src_stride];
    if (!masked) g_.vmovups(y, src);
    else if (avx512_) g_.vmovups(y | k3 | T_z, src);
    else g_.vmaskmovps(y, Ymm(8), src);
  }
  auto Y = [](int i) { return Ymm(i); };
  for (int q = 0; q < 4; ++q) {
    g_.vunpcklps(Y(8 + 2 * q), Y(2 * q), Y(2 * q + 1));
    g_.vunpckhps(Y(9 + 2 * q), Y(2 * q), Y(2 * q + 1));
  }
  for (int h = 0; h < 2; ++h) {  // rows 0..3, then 4..7
    const int t = 8 + 4 * h, o = 4 * h;
    g_.vshufps(Y(o + 0), Y(t + 0), Y(t + 2), 0x44);
    g_.vshufps(Y(o + 1), Y(t + 0), Y(t + 2), 0xEE);
    g_.vshufps(Y(o + 2), Y(t + 1), Y(t + 3), 0x44);
    g_.vshufps(Y(o + 3), Y(t + 1), Y(t + 3), 0xEE);
  }
  for (int c = 0; c < 4; ++c) {
    g_.vperm2f128(Y(8 + c), Y(c), Y(c + 4), 0x20);
    g_.vperm2f128(Y(12 + c), Y(c), Y(c + 4), 0x31);
  }
  for (int t = 0; t < kt; ++t) g_.vmovups(ptr[r11 + t * dst_stride + jb * 32], Y(8 + t));
}

// Register map (dot; M = mg_ rows of A per pass, R = rows_ rows of Bᵀ per group):
//   vec(m·R + r)   accumulator of A row m · Bᵀ row r
//   vec(M·R + m)   A row m at the current k;  vec(M·R + M) a row of Bᵀ, then a temporary
//   AVX2 vec(M·R + M + 1) the k (then store) mask;  AVX-512 k2 k mask, k3 store mask
//   rsi A rows (or their packed copy at rbx);  rdx Bᵀ rows of the group;  rcx C;  r8 bias
//   r10 byte offset of k;  rdi k loop counter;  rbp group counter
// Every register index stays below 16: the horizontal adds are VEX-only.
void Gen::body_dot() {
  const int64_t M = p_.m;
  if (p_.ta) {
    // Aᵀ is [K, M]: copy the M rows of A out of it, contiguous, into the scratch.
    g_.mov(r10, rA);
    g_.mov(r11, rPack);
    repeat(p_.k, rdi, [&] {
      for (int64_t m = 0; m < M; ++m) {
        g_.mov(eax, ptr[r10 + m * 4]);
        g_.mov(ptr[r11 + m * p_.k * 4], eax);
      }
      g_.add(r10, M * 4);
      g_.add(r11, 4);
    });
  }
  // Passes of at most DOT_ROWS rows, balanced.
  const int64_t passes = ceil_div(M, Plan::DOT_ROWS), lo = M / passes, n_hi = M % passes;
  int64_t row0 = 0;
  for (int64_t i = 0; i < passes; ++i) {
    mg_ = static_cast<int>(i < n_hi ? lo + 1 : lo);
    // Accumulators M·R, A rows M, a Bᵀ row, the AVX2 mask: at most 16 registers.
    static const int rows512[5] = {0, 8, 4, 4, 2}, rows2[5] = {0, 8, 4, 2, 2};
    rows_ = (avx512_ ? rows512 : rows2)[mg_];
    dot_pass(row0);
    row0 += mg_;
  }
}

// Rows [row0, row0 + mg_) of C: one pass over Bᵀ.
void Gen::dot_pass(int64_t row0) {
  const int64_t R = rows_;
  g_.lea(rsi, ptr[(p_.ta ? rPack : rA) + row0 * p_.k * 4]);
  g_.mov(rdx, rB);
  g_.lea(rcx, ptr[rC + row0 * p_.ldc * 4]);
  if (p_.bias) g_.mov(r8, rBias);
  repeat(p_.n / R, rbp, [&] {
    dot_group(static_cast<int>(R));
    g_.add(rdx, R * p_.k * 4);
    g_.add(rcx, R * 4);
    if (p_.bias) g_.add(r8, R * 4);
  });
  if (const int rv = static_cast<int>(p_.n % R)) dot_group(rv);
}

void Gen::dot_group(int rv) {
  const int M = mg_, R = rows_, mk = M * R + M + 1;
  for (int i = 0; i < M * R; ++i) g_.vxorps(vec(i), vec(i), vec(i));
  g_.xor_(r10d, r10d);
  unrolled(
      p_.k / p_.vlen, UNROLL, rdi, [&](int s) { dot_chunk(int64_t(s) * vb_, rv, false); },
      [&](int64_t steps) { g_.add(r10, steps * vb_); });
  if (const int tail = static_cast<int>(p_.k % p_.vlen)) {
    if (avx512_) set_opmask(k2, eax, tail);
    else g_.vmovups(Ymm(mk), mask_row(tail));
    dot_chunk(0, rv, true);
  }
  for (int m = 0; m < M; ++m) dot_reduce_store(m, rv);
}

void Gen::dot_chunk(int64_t off, int rv, bool masked) {
  const int M = mg_, R = rows_, x0 = M * R, bt = M * R + M, mk = bt + 1;
  for (int m = 0; m < M; ++m) {
    const Address xa = ptr[rsi + r10 + m * p_.k * 4 + off];
    if (!masked) g_.vmovups(vec(x0 + m), xa);
    else if (avx512_) g_.vmovups(vec(x0 + m) | k2 | T_z, xa);
    else g_.vmaskmovps(Ymm(x0 + m), Ymm(mk), xa);
  }
  for (int r = 0; r < rv; ++r) {
    const Address ba = ptr[rdx + r10 + r * p_.k * 4 + off];
    if (M == 1 && !masked) {
      g_.vfmadd231ps(vec(r), vec(x0), ba);
    } else if (M == 1 && avx512_) {
      g_.vfmadd231ps(vec(r) | k2, vec(x0), ba);
    } else {
      if (!masked) g_.vmovups(vec(bt), ba);
      else if (avx512_) g_.vmovups(vec(bt) | k2 | T_z, ba);
      else g_.vmaskmovps(Ymm(bt), Ymm(mk), ba);
      for (int m = 0; m < M; ++m) g_.vfmadd231ps(vec(m * R + r), vec(x0 + m), vec(bt));
    }
  }
}

// Sums each of the R accumulators of row m across its lanes (a fixed tree of horizontal adds),
// adds the bias and stores the rv results of this group.
void Gen::dot_reduce_store(int m, int rv) {
  const int M = mg_, R = rows_, base = m * R, tmp = M * R + M, mk = tmp + 1;
  auto a = [&](int r) { return Ymm(base + r); };
  if (avx512_)
    for (int r = 0; r < R; ++r) {
      g_.vextractf64x4(Ymm(tmp), Zmm(base + r), 1);
      g_.vaddps(a(r), a(r), Ymm(tmp));
    }
  int width;
  if (R == 8) {
    for (int r = 0; r < 8; r += 2) g_.vhaddps(a(r), a(r), a(r + 1));
    g_.vhaddps(a(0), a(0), a(2));
    g_.vhaddps(a(4), a(4), a(6));
    g_.vperm2f128(Ymm(tmp), a(0), a(4), 0x20);
    g_.vperm2f128(a(0), a(0), a(4), 0x31);
    g_.vaddps(a(0), a(0), Ymm(tmp));
    width = 8;
  } else {
    if (R == 4) {
      g_.vhaddps(a(0), a(0), a(1));
      g_.vhaddps(a(2), a(2), a(3));
      g_.vhaddps(a(0), a(0), a(2));
    } else {
      g_.vhaddps(a(0), a(0), a(1));
      g_.vhaddps(a(0), a(0), a(0));
    }
    g_.vextractf128(Xmm(tmp), a(0), 1);
    g_.vaddps(Xmm(base), Xmm(base), Xmm(tmp));
    width = R;
  }
  if (p_.bias) {
    load_n(tmp, ptr[r8], rv, width, mk);
    if (width == 8) g_.vaddps(a(0), a(0), Ymm(tmp));
    else g_.vaddps(Xmm(base), Xmm(base), Xmm(tmp));
  }
  store_n(ptr[rcx + m * p_.ldc * 4], base, rv, width, mk);
}

// cnt floats at `a` into register `reg` (viewed as `width` lanes: 8 ymm, else xmm); the rest
// zero. AVX2 masked cases use `mask_reg`; AVX-512 k3 (and eax).
void Gen::load_n(int reg, const Address& a, int cnt, int width, int mask_reg) {
  if (cnt == 8) g_.vmovups(Ymm(reg), a);
  else if (cnt == 4) g_.vmovups(Xmm(reg), a);
  else if (cnt == 2) g_.vmovq(Xmm(reg), a);
  else if (cnt == 1) g_.vmovss(Xmm(reg), a);
  else if (avx512_) {
    set_opmask(k3, eax, cnt);
    if (width == 8) g_.vmovups(Ymm(reg) | k3 | T_z, a);
    else g_.vmovups(Xmm(reg) | k3 | T_z, a);
  } else if (width == 8) {
    g_.vmovups(Ymm(mask_reg), mask_row(cnt));
    g_.vmaskmovps(Ymm(reg), Ymm(mask_reg), a);
  } else {
    g_.vmovups(Xmm(mask_reg), mask_row(cnt));
    g_.vmaskmovps(Xmm(reg), Xmm(mask_reg), a);
  }
}

void Gen::store_n(const Address& a, int reg, int cnt, int width, int mask_reg) {
  if (cnt == 8) g_.vmovups(a, Ymm(reg));
  else if (cnt == 4) g_.vmovups(a, Xmm(reg));
  else if (cnt == 2) g_.vmovq(a, Xmm(reg));
  else if (cnt == 1) g_.vmovss(a, Xmm(reg));
  else if (avx512_) {
    set_opmask(k3, eax, cnt);
    if (width == 8) g_.vmovups(a | k3, Ymm(reg));
    else g_.vmovups(a | k3, Xmm(reg));
  } else if (width == 8) {
    g_.vmovups(Ymm(mask_reg), mask_row(cnt));
    g_.vmaskmovps(a, Ymm(mask_reg), Ymm(reg));
  } else {
    g_.vmovups(Xmm(mask_reg), mask_row(cnt));
    g_.vmaskmovps(a, Xmm(mask_reg), Xmm(reg));
  }
}

}  // namespace

void emit_gemm(CodeGenerator& g, const Plan& p) { Gen(g, p).emit(); }

}  // namespace gemm
}  // namespace nnasm
