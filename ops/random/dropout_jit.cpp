// DROPOUT's generated kernel, AVX2 and AVX-512: the reference's mask bit for bit, computed for a
// vector of elements at a time. Element i's draw is mix(S + (i + 1)·G) (ops/random/dropout.cpp);
// the kernel keeps those counters in 64-bit lanes and runs splitmix64's output function on them
// lane-wise: vpmullq on AVX-512, on AVX2 the low 64 bits of the product from three vpmuludq
// (lo·lo + (hi·lo + lo·hi)·2³²). Only the high 32 bits of each draw decide, so the two counter
// vectors of a block are packed into one vector of high halves (vshufps) before the last
// xor-shift and the unsigned compare against the threshold: each block of W floats takes two
// counter vectors, A with the elements {0, 1, 4, 5} of every group of 8 and B = A + 2G with
// {2, 3, 6, 7}, so that vshufps's per-128-bit-lane pick of odd dwords lands every high half in its
// element's lane.
//
// S depends on the run (seed, run_index, training: KernelArgs::state), so the kernel computes it
// on entry in general registers (three scalar mixes); everything else — the element count, the
// part's first element, the rate's threshold and scale, the key — is baked in at generation.
// Inference (or no state) copies x to y, and skips even that when y is x's memory.
//
// Register map. General: rdi KernelArgs*, rsi x, rdx y (both at the part's first element), rcx
// the loop index (a negative byte offset counting up to 0), rax the state pointer (and the
// tail's opmask bits), r8 the stream S, r9/r10 scalar scratch. Vector (ymm on AVX2, zmm on
// AVX-512): from 0 up, 4 per unrolled block (counters A and B, two scratch); from the top down
// the AVX2 tail mask (ymm15), the counter base (lane q of A for the next block), the two
// multipliers, the scale and the threshold. Opmasks: k1 the tail, k2+b block b's keep mask.
#include "ops/random/dropout.h"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <vector>

#include <fmt/format.h>
#include <xbyak/xbyak.h>

#include "jit/elementwise.h"
#include "jit/frame.h"
#include "jit/vecgen.h"

namespace nnasm {
namespace {

using namespace Xbyak;
using namespace Xbyak::util;

constexpr int64_t MAX_ELEMS = int64_t(1) << 28;  // byte offsets stay within int32
constexpr size_t MEASURE_BYTES = 64 * 1024;
constexpr int MAX_UNROLL = 4;
constexpr int ODD_DWORDS = 0xDD;  // vshufps: dwords 1, 3 of the first source, then of the second

// One kernel: `count` elements from element `first` of the tensor.
struct DropoutSpec {
  Isa isa = Isa::AVX2;
  int64_t first = 0, count = 0;
  DropoutMask mask;
};

class Gen {
 public:
  Gen(CodeGenerator& g, const DropoutSpec& s) : g_(g), s_(s), v_(g, s.isa) {
    const int W = v_.width();
    int top = v_.num_vregs();
    if (!v_.avx512()) tail_reg_ = v_.vreg(--top);
    base_ = v_.vreg(--top);
    mul1_ = v_.vreg(--top);
    mul2_ = v_.vreg(--top);
    scale_ = v_.vreg(--top);
    threshold_ = v_.vreg(--top);
    unroll_ = std::min(MAX_UNROLL, top / 4);
    step_ = int64_t(unroll_) * W;
  }

  Status emit() {
    Label copy, done;
    {
      Frame f(g_, 0);
      f.load_in(rX, 0);
      f.load_out(rY, 0);
      if (s_.first) {
        g_.add(rX, static_cast<int32_t>(s_.first * 4));
        g_.add(rY, static_cast<int32_t>(s_.first * 4));
      }
      v_.set_tail(static_cast<int>(s_.count % v_.width()), tail_reg_);
      if (!s_.mask.identity) {
        g_.mov(rax, ptr[Frame::args() + offsetof(KernelArgs, state)]);
        g_.test(rax, rax);
        g_.jz(copy, CodeGenerator::T_NEAR);
        g_.cmp(byte[rax + offsetof(RunState, training)], 0);
        g_.je(copy, CodeGenerator::T_NEAR);
        emit_stream();
        emit_masked();
        g_.jmp(done, CodeGenerator::T_NEAR);
      }
      g_.L(copy);
      g_.cmp(rX, rY);
      g_.je(done, CodeGenerator::T_NEAR);
      emit_loop(MAX_UNROLL, [&](int b, const Address& x, const Address& y, int64_t, int count) {
        v_.load(v_.vreg(b), x, count);
        v_.store(y, v_.vreg(b), count);
      }, nullptr);
      g_.L(done);
    }
    v_.finish();
    return Status::ok();
  }

 private:
  using Block = std::function<void(int b, const Address& x, const Address& y, int64_t elem, int count)>;

  // splitmix64's output function on the 64-bit register z, in place (tmp clobbered).
  void scalar_mix(const Reg64& z, const Reg64& tmp) {
    g_.mov(tmp, z);
    g_.shr(tmp, 30);
    g_.xor_(z, tmp);
    g_.mov(tmp, Rng::MIX_MUL1);
    g_.imul(z, tmp);
    g_.mov(tmp, z);
    g_.shr(tmp, 27);
    g_.xor_(z, tmp);
    g_.mov(tmp, Rng::MIX_MUL2);
    g_.imul(z, tmp);
    g_.mov(tmp, z);
    g_.shr(tmp, 31);
    g_.xor_(z, tmp);
  }

  // S from the run state (rax), then the counter base: lane q of A holds the counter of element
  // first + 4·(q / 2) + q % 2, i.e. S + (that + 1)·G.
  void emit_stream() {
    g_.mov(rS, ptr[rax + offsetof(RunState, seed)]);
    scalar_mix(rS, r9);
    g_.mov(r9, s_.mask.key * Rng::GOLDEN);
    g_.add(rS, r9);
    scalar_mix(rS, r9);
    g_.mov(r9, ptr[rax + offsetof(RunState, run_index)]);
    g_.mov(r10, Rng::GOLDEN);
    g_.imul(r9, r10);
    g_.add(rS, r9);
    scalar_mix(rS, r9);
    g_.mov(r9, static_cast<uint64_t>(s_.first + 1) * Rng::GOLDEN);
    g_.add(rS, r9);
    if (v_.avx512()) {
      g_.vpbroadcastq(base_, rS);
    } else {
      g_.vmovq(Xmm(base_.getIdx()), rS);
      g_.vpbroadcastq(base_, Xmm(base_.getIdx()));
    }
    std::vector<uint64_t> lanes;
    for (int q = 0; q < v_.width() / 2; ++q) lanes.push_back(static_cast<uint64_t>(4 * (q / 2) + q % 2) * Rng::GOLDEN);
    g_.vpaddq(base_, base_, v_.cst_u64(lanes));
  }

  void emit_masked() {
    g_.vmovups(mul1_, v_.cst_u64({Rng::MIX_MUL1}));
    g_.vmovups(mul2_, v_.cst_u64({Rng::MIX_MUL2}));
    g_.vmovups(scale_, v_.cst(s_.mask.scale));
    g_.vmovups(threshold_, v_.cst_u32({s_.mask.threshold}));
    const Address next = v_.cst_u64({static_cast<uint64_t>(step_) * Rng::GOLDEN});
    emit_loop(unroll_, [&](int b, const Address& x, const Address& y, int64_t elem, int count) {
      masked_block(b, x, y, elem, count);
    }, [&] { g_.vpaddq(base_, base_, next); });
  }

  // The blocks of W elements: a loop over `unroll` blocks at a time (after_iter advances what the
  // blocks keep across iterations), then the remaining whole blocks and the tail, unrolled.
  // block(b, x, y, elem, count): block b of an iteration at element `elem` after the base.
  void emit_loop(int unroll, const Block& block, const std::function<void()>& after_iter) {
    const int W = v_.width();
    const int64_t step = int64_t(unroll) * W, n_iter = s_.count / step;
    if (n_iter >= 1) {
      Label loop;
      g_.mov(rIdx, -n_iter * step * 4);
      g_.align(16);
      g_.L(loop);
      for (int b = 0; b < unroll; ++b) {
        const int32_t disp = static_cast<int32_t>((n_iter * step + int64_t(b) * W) * 4);
        block(b, ptr[rX + rIdx + disp], ptr[rY + rIdx + disp], int64_t(b) * W, W);
      }
      if (after_iter) after_iter();
      g_.add(rIdx, static_cast<int32_t>(step * 4));
      g_.jnz(loop, CodeGenerator::T_NEAR);
    }
    const int64_t done = n_iter * step;
    const int full = static_cast<int>((s_.count - done) / W), tail = static_cast<int>(s_.count % W);
    for (int j = 0; j <= full; ++j) {
      const int count = j < full ? W : tail;
      if (count == 0) break;
      const int32_t disp = static_cast<int32_t>((done + int64_t(j) * W) * 4);
      block(j, ptr[rX + disp], ptr[rY + disp], int64_t(j) * W, count);
    }
  }

  // z = z·m (mod 2⁶⁴), m the multiplier in `mul`; p and t scratch.
  void mul64(const Xmm& z, const Xmm& mul, uint64_t m, const Xmm& p, const Xmm& t) {
    if (v_.avx512()) {
      g_.vpmullq(z, z, mul);
      return;
    }
    g_.vpmuludq(p, z, mul);  // lo·lo
    g_.vpsrlq(t, z, 32);
    g_.vpmuludq(t, t, mul);  // hi·lo
    g_.vpmuludq(z, z, v_.cst_u64({m >> 32}));  // lo·hi
    g_.vpaddq(t, t, z);
    g_.vpsllq(t, t, 32);
    g_.vpaddq(z, p, t);
  }

  void vxor(const Xmm& d, const Xmm& a, const Xmm& b) {
    if (v_.avx512()) g_.vpxorq(d, a, b);
    else g_.vpxor(d, a, b);
  }

  // mix's first two rounds, lane-wise on 64-bit z; the third is done on the high halves.
  void mix_rounds(const Xmm& z, const Xmm& p, const Xmm& t) {
    g_.vpsrlq(t, z, 30);
    vxor(z, z, t);
    mul64(z, mul1_, Rng::MIX_MUL1, p, t);
    g_.vpsrlq(t, z, 27);
    vxor(z, z, t);
    mul64(z, mul2_, Rng::MIX_MUL2, p, t);
  }

  // y = x·scale where the draw keeps the element, else +0, for `count` elements of block b at
  // element `elem` after the counter base.
  void masked_block(int b, const Address& x, const Address& y, int64_t elem, int count) {
    const Xmm a = v_.vreg(4 * b), bb = v_.vreg(4 * b + 1), p = v_.vreg(4 * b + 2), t = v_.vreg(4 * b + 3);
    if (elem == 0) {
      if (v_.avx512()) g_.vmovdqa64(a, base_);
      else g_.vmovdqa(a, base_);
    } else {
      g_.vpaddq(a, base_, v_.cst_u64({static_cast<uint64_t>(elem) * Rng::GOLDEN}));
    }
    g_.vpaddq(bb, a, v_.cst_u64({2 * Rng::GOLDEN}));
    mix_rounds(a, p, t);
    mix_rounds(bb, p, t);
    // u: the high halves in element order; then mix's last round, z ^ (z >> 31), on them alone.
    g_.vshufps(a, a, bb, ODD_DWORDS);
    g_.vpsrld(t, a, 31);
    vxor(a, a, t);
    if (count < v_.width()) v_.load(bb, x, count);
    const Operand& xs = count < v_.width() ? static_cast<const Operand&>(bb) : static_cast<const Operand&>(x);
    if (v_.avx512()) {
      const Opmask keep(2 + b);
      g_.vpcmpud(keep, a, threshold_, 5);  // u ≥ threshold (NLT)
      g_.vmulps(bb | keep | g_.T_z, scale_, xs);
    } else {
      g_.vpmaxud(t, a, threshold_);
      g_.vpcmpeqd(t, t, a);  // u ≥ threshold: max(u, threshold) is u
      g_.vmulps(bb, scale_, xs);
      g_.vandps(bb, bb, t);
    }
    v_.store(y, bb, count);
  }

  const Reg64 &rX = rsi, &rY = rdx, &rIdx = rcx, &rS = r8;

  CodeGenerator& g_;
  const DropoutSpec& s_;
  VecGen v_;
  Xmm tail_reg_, base_, mul1_, mul2_, scale_, threshold_;
  int unroll_ = 1;
  int64_t step_ = 0;
};

}  // namespace

Result<std::shared_ptr<const JitKernel>> dropout_jit(const JitRequest& r, KernelCache& cache) {
  const int64_t n = r.out[0].shape.numel();
  if (n <= 0 || n > MAX_ELEMS) return std::shared_ptr<const JitKernel>();
  // The elementwise ops' split (whole cache lines a part), one row of n elements.
  EwSpec part;
  part.inner = n;
  part.in = {Feed::STREAM};
  elementwise_part(&part, r.part, r.n_parts);
  DropoutSpec s;
  s.isa = r.isa;
  s.first = part.out_skip;
  s.count = part.inner;
  s.mask = dropout_mask(r.ins);
  const std::string name = fmt::format("f32_dropout__{}", isa_name(r.isa));
  const std::string key = fmt::format("{}|{}+{}|{}|{:#x}|{}|{}", name, s.first, s.count, s.mask.identity,
                                      s.mask.threshold, s.mask.scale, s.mask.key);
  return build_kernel_measured(cache, key, name, MEASURE_BYTES, [&s](CodeGenerator& g) { return Gen(g, s).emit(); });
}

}  // namespace nnasm
