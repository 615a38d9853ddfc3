// LINEAR_BF16: a dense layer whose weight is stored in bf16, for inference with half the weight
// bytes of LINEAR (a batch-1 layer streams its whole weight once per run, so the bytes are the
// cost).
//
// Computes   y = act(Σ_k bf16(x[k])·W[k, :] + b): each x value rounded to the nearest bf16 (ties
//            to even), each product of two bf16 values (exact in f32: 8 × 8 significand bits)
//            accumulated in f32 from 0, then the bias added and the fused activation applied.
// Inputs     x: f32[..., in] (rank ≥ 1; the leading dims are rows); W: bf16[in, out] (stored
//            input-major, as LINEAR's); b: f32[out].
// Outputs    y: f32[..., out].
// Immediates act, act_alpha: as LINEAR's (ops/linalg/linear.cpp).
// Gradient   none: bf16 weights are inference storage; training stays f32 (LINEAR), so autodiff
//            refuses a program that needs one through this op, by name.
// Kernels    reference: plain loops, summing k = 0 … in−1 in order.
//            JIT (AVX2 and AVX-512): row blocks of up to 4 rows, 8 accumulators per block (8
//            rows and 16 with vdpbf16ps; a single row, batch 1, gets 8 vectors of columns: its
//            adds are 8 independent chains);
//            each block's x rows rounded to bf16 into the scratch first, then every block of
//            output columns streams W once (batch 1 is a GEMV), the bias, the activation snippet
//            (jit/act_snippet.h, LINEAR's) and the store fused. With AVX512_BF16
//            (`bf16_linear__avx512_dpbf16_8x32`, `_1x128` for one row): two
//            rows of W interleaved into bf16 pairs in registers (vpunpcklwd / vpunpckhwd, so W
//            needs no packed copy) and vdpbf16ps against the broadcast pair of x, the columns put
//            back in order (vpermi2ps) once per block. Without it (`__avx512_4x32`,
//            `__avx2_4x16`, `_1x64`): W widened to f32 (vpmovzxwd, vpslld 16) and an FMA with x rounded
//            to bf16, the same exact products. Results differ from the reference only in the
//            order of the f32 sums (vdpbf16ps adds a pair's two products one after the other).
//            On several threads, parallel parts of the same kernel: slices of the output columns
//            (whole column blocks), or blocks of rows where the columns make fewer blocks than
//            threads; each output element is one part's, summed as on one thread (same bits).
// Notes      NaN and ±inf propagate as in f32 arithmetic. Denormals: vcvtneps2bf16 and vdpbf16ps
//            treat denormal inputs as zero and flush denormal results, as the run's default
//            (flush_denormals) does for the reference and the FMA kernels; with flushing off the
//            dpbf16 kernel still flushes.
#include <algorithm>
#include <cstdint>
#include <vector>

#include <fmt/format.h>
#include <xbyak/xbyak.h>

#include "isa/activation.h"
#include "isa/bf16.h"
#include "jit/act_snippet.h"
#include "jit/frame.h"
#include "jit/vecgen.h"
#include "ops/elementwise/activation.h"
#include "ops/op.h"
#include "ops/quant/linear_bf16.h"

namespace nnasm {
namespace {

Status linear_bf16_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  const Shape &x = in[0].shape, &w = in[1].shape, &b = in[2].shape;
  if (in[0].dtype != DType::F32)
    return Status::errorf("LINEAR_BF16: x, {}, must be f32 (it is rounded to bf16 in the kernel)",
                          operand_str(ins, 0, in[0]));
  if (x.rank < 1) return Status::errorf("LINEAR_BF16: x, {}, must have rank 1 or more", operand_str(ins, 0, in[0]));
  if (in[1].dtype != DType::BF16)
    return Status::errorf("LINEAR_BF16: the weight, {}, must be bf16 (an f32 weight takes LINEAR)",
                          operand_str(ins, 1, in[1]));
  if (w.rank != 2)
    return Status::errorf("LINEAR_BF16: the weight, {}, must have rank 2 [in, out]", operand_str(ins, 1, in[1]));
  if (w[0] != x[x.rank - 1])
    return Status::errorf("LINEAR_BF16: x, {}, has {} features but the weight, {}, expects {}",
                          operand_str(ins, 0, in[0]), x[x.rank - 1], operand_str(ins, 1, in[1]), w[0]);
  if (in[2].dtype != DType::F32 || b.rank != 1 || b[0] != w[1])
    return Status::errorf("LINEAR_BF16: the bias, {}, must be f32[{}] to match the weight, {}",
                          operand_str(ins, 2, in[2]), w[1], operand_str(ins, 1, in[1]));
  Shape y = x;
  y[y.rank - 1] = w[1];
  (*out)[0] = TensorType{DType::F32, y};
  return Status::ok();
}

struct Dims {
  int64_t rows, in, out;
};
Dims dims_of(const TensorType* in) {
  const Shape& w = in[1].shape;
  return Dims{w[0] ? in[0].shape.numel() / w[0] : 0, w[0], w[1]};
}

void linear_bf16_ref(const KernelArgs* a) {
  const Dims d = dims_of(a->in_type);
  const float* x = static_cast<const float*>(a->in[0]);
  const uint16_t* w = static_cast<const uint16_t*>(a->in[1]);
  const float* b = static_cast<const float*>(a->in[2]);
  float* y = static_cast<float*>(a->out[0]);
  const Activation f = fused_act(*a->ins);
  const float alpha = static_cast<float>(fused_act_alpha(*a->ins));
  for (int64_t r = 0; r < d.rows; ++r) {
    float* yr = y + r * d.out;
    std::fill(yr, yr + d.out, 0.f);
    for (int64_t k = 0; k < d.in; ++k) {
      const float xk = bf16_to_f32(bf16_from_f32(x[r * d.in + k]));
      const uint16_t* wk = w + k * d.out;
      for (int64_t j = 0; j < d.out; ++j) yr[j] += xk * bf16_to_f32(wk[j]);
    }
    for (int64_t j = 0; j < d.out; ++j) yr[j] = act::apply(f, yr[j] + b[j], alpha);
  }
}

// ---- JIT ----
//
// Register map. General: rdi KernelArgs*; rsi x and rdx y at the current row block; r8 W; r9 the
// bias; rbx the scratch (the block's x rows in bf16 pairs, or rounded f32); r13 row blocks left;
// rcx W, r14 y and r15 the bias at the current column block; r12 column blocks left; rax W and
// r11 the scratch at the current k; r10 k steps left. Vector: 0, 1 W (rows k and k+1, or the
// widened vectors: all of a row's with several rows, 0 and 1 in turn with one), 2, 3 W pairs
// (dpbf16; 2, 3 widened too with several rows), 4 the broadcast x (widening), 5 zero (an odd
// in's last pair), 6 … 13 the accumulators (row i, vector j at 6 + nv·i + j, nv vectors a row;
// 6 … 21 for dpbf16's 8 rows), the activation's temporaries in 0 … 4 and 14 (31 at AVX-512; W is
// dead by then), AVX2's tail mask in 15.
// Opmasks: k1 the output tail (VecGen), k3 the word mask of W's last column group and x's tail
// (set before each use: the activation snippets clobber k2 … k7).

using namespace Xbyak;
using namespace Xbyak::util;

constexpr int MR = 4;  // rows per block
// With vdpbf16ps (AVX-512: 32 registers), 8: the two W rows' interleaving (vpunpck{l,h}wd) is
// shared by every row of the block, so more rows pay it less often; 16 accumulators.
constexpr int MR_DPBF16 = 8;
int block_rows(bool dpbf16) { return dpbf16 ? MR_DPBF16 : MR; }
constexpr int64_t MAX_BYTES = int64_t(1) << 30;  // offsets stay within int32
constexpr size_t MEASURE_BYTES = 64 * 1024;

struct Bf16Spec {
  Isa isa = Isa::AVX2;
  bool dpbf16 = false;
  Dims d{};
  // The part's rows [r0, r1) and output columns [c0, c1); the whole layer for one part.
  int64_t r0 = 0, r1 = 0, c0 = 0, c1 = 0;
  Activation act = Activation::NONE;
  float act_alpha = 0;
};

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }
int64_t pairs(int64_t in) { return (in + 1) / 2; }
// Bytes of one row of converted x in the scratch: the bf16 pairs (dpbf16) or rounded f32.
int64_t x_row_bytes(bool dpbf16, int64_t in) { return round_up(dpbf16 ? pairs(in) * 4 : in * 4, 64); }

class Bf16Gen {
 public:
  Bf16Gen(CodeGenerator& g, const Bf16Spec& s) : g_(g), s_(s), v_(g, s.isa) {}

  // Vectors of columns per row: 8 accumulators in all up to 4 rows, so that a single row (batch
  // 1, where each accumulator's chain of dependent adds is what limits) still has 8 chains; 2
  // from 3 rows on (dpbf16's 8-row blocks: 16).
  static int vectors_per_row(int mr) { return mr == 1 ? 8 : mr == 2 ? 4 : 2; }

  Status emit() {
    const int W = v_.width();
    xs_ = x_row_bytes(s_.dpbf16, s_.d.in);
    {
      Frame f(g_, 6);
      f.load_in(rsi, 0);
      f.load_in(r8, 1);
      f.load_in(r9, 2);
      f.load_out(rdx, 0);
      g_.mov(rbx, ptr[Frame::args() + offsetof(KernelArgs, scratch)]);
      // A part starts at its first row and column (64-bit offsets: only a row block's are bounded).
      auto advance = [&](const Reg64& r, int64_t bytes) {
        if (!bytes) return;
        g_.mov(rax, bytes);
        g_.add(r, rax);
      };
      advance(rsi, s_.r0 * s_.d.in * 4);
      advance(rdx, s_.r0 * s_.d.out * 4 + s_.c0 * 4);
      advance(r8, s_.c0 * 2);
      advance(r9, s_.c0 * 4);
      const int64_t cols = s_.c1 - s_.c0, rows = s_.r1 - s_.r0;
      if (cols % W) v_.set_tail(static_cast<int>(cols % W), Ymm(15));
      g_.vpxor(Xmm(5), Xmm(5), Xmm(5));
      const int mrb = block_rows(s_.dpbf16);
      const int64_t full = rows / mrb, rest = rows % mrb;
      if (full > 0) {
        Label loop;
        g_.mov(r13, full);
        g_.L(loop);
        row_block(mrb);
        g_.add(rsi, static_cast<int32_t>(mrb * s_.d.in * 4));
        g_.add(rdx, static_cast<int32_t>(mrb * s_.d.out * 4));
        g_.dec(r13);
        g_.jnz(loop, CodeGenerator::T_NEAR);
      }
      if (rest) row_block(static_cast<int>(rest));
    }
    v_.finish();
    return Status::ok();
  }

 private:
  Xmm acc(int i, int j) const { return v_.vreg(6 + nv_ * i + j); }

  void set_k3(uint32_t bits) {
    g_.mov(eax, bits);
    g_.kmovd(k3, eax);
  }

  // x rows 0 … mr−1 of the block into the scratch, rounded to bf16: as bf16 pairs (dpbf16) or
  // as f32 values with the low 16 bits cleared (round to nearest even by adding 0x7fff plus the
  // lowest kept bit; NaN kept as it is, which the carry could turn into ±inf).
  void convert_x(int mr) {
    const int W = v_.width();
    const int64_t full = s_.d.in / W;
    const int tail = static_cast<int>(s_.d.in % W);
    if (tail) {
      if (v_.avx512()) set_k3((1u << tail) - 1);
      else g_.vmovups(Ymm(3), v_.lane_mask((1u << tail) - 1));
    }
    const int out_step = s_.dpbf16 ? W * 2 : W * 4;
    for (int i = 0; i < mr; ++i) {
      // The pad word of an odd in's last pair is zero (its W partner is the zero register).
      if (s_.dpbf16 && s_.d.in % 2) g_.mov(dword[rbx + i * xs_ + (pairs(s_.d.in) - 1) * 4], 0);
      g_.lea(rax, ptr[rsi + i * s_.d.in * 4]);
      g_.lea(r11, ptr[rbx + i * xs_]);
      if (full > 0) {
        Label loop;
        g_.mov(r10, full);
        g_.L(loop);
        convert_chunk(false);
        g_.add(rax, W * 4);
        g_.add(r11, out_step);
        g_.dec(r10);
        g_.jnz(loop, CodeGenerator::T_NEAR);
      }
      if (tail) convert_chunk(true);
    }
  }

  // One vector of x at rax rounded into the scratch at r11; `part`: the tail (mask k3 or ymm3).
  void convert_chunk(bool part) {
    const Xmm v = v_.vreg(0), t = v_.vreg(1), m3 = v_.vreg(3);
    const Address in = ptr[rax];
    if (!part) g_.vmovups(v, in);
    else if (v_.avx512()) g_.vmovups(v | k3 | T_z, in);
    else g_.vmaskmovps(v, m3, in);
    if (s_.dpbf16) {
      g_.vcvtneps2bf16(Ymm(t.getIdx()), Zmm(v.getIdx()));
      if (!part) g_.vmovdqu16(ptr[r11], Ymm(t.getIdx()));
      else g_.vmovdqu16(ptr[r11] | k3, Ymm(t.getIdx()));
      return;
    }
    // vpand has no EVEX form: zmm takes vpandd.
    auto pand = [&](const Xmm& d, const Xmm& a, const Address& m) {
      if (v_.avx512()) g_.vpandd(d, a, m);
      else g_.vpand(d, a, m);
    };
    g_.vpsrld(t, v, 16);
    pand(t, t, v_.cst_u32({1}));
    g_.vpaddd(t, t, v_.cst_u32({0x7fff}));
    g_.vpaddd(t, t, v);
    pand(t, t, v_.cst_u32({0xffff0000u}));
    const VMask nan = v_.mask(0, v_.vreg(2));
    v_.cmp(nan, v, v, VecGen::CMP_UNORD);
    v_.move_if(t, nan, v);
    if (!part) g_.vmovups(ptr[r11], t);
    else if (v_.avx512()) g_.vmovups(ptr[r11] | k3, t);
    else g_.vmaskmovps(ptr[r11], m3, t);
  }

  void row_block(int mr) {
    convert_x(mr);
    nv_ = vectors_per_row(mr);
    const int nb = nv_ * v_.width();
    g_.mov(rcx, r8);
    g_.mov(r14, rdx);
    g_.mov(r15, r9);
    const int64_t full = (s_.c1 - s_.c0) / nb;
    const int tail = static_cast<int>((s_.c1 - s_.c0) % nb);
    if (full > 0) {
      Label loop;
      g_.mov(r12, full);
      g_.L(loop);
      col_block(mr, nb);
      g_.add(rcx, nb * 2);
      g_.add(r14, nb * 4);
      g_.add(r15, nb * 4);
      g_.dec(r12);
      g_.jnz(loop, CodeGenerator::T_NEAR);
    }
    if (tail) col_block(mr, tail);
  }

  // One pair of k for `cols` columns and mr rows: per group of 32 columns, the two W rows'
  // words (masked by k3 in a partial last group) interleaved into pairs, and vdpbf16ps against
  // each row's x pair (broadcast from the scratch). `zero_partner`: the pair's second W row is
  // past the end (an odd in), so zeros stand in for it.
  void step_dpbf16(int mr, int cols, bool zero_partner) {
    const Zmm w0(0), w1(1), lo(2), hi(3), zero(5);
    const int groups = (cols + 31) / 32;
    for (int p = 0; p < groups; ++p) {
      const bool part = cols - 32 * p < 32;
      auto load = [&](const Zmm& d, const Address& a) {
        if (part) g_.vmovdqu16(d | k3 | T_z, a);
        else g_.vmovdqu16(d, a);
      };
      load(w0, ptr[rax + p * 64]);
      if (!zero_partner) load(w1, ptr[rax + s_.d.out * 2 + p * 64]);
      const Zmm& partner = zero_partner ? zero : w1;
      g_.vpunpcklwd(lo, w0, partner);
      g_.vpunpckhwd(hi, w0, partner);
      for (int i = 0; i < mr; ++i) {
        g_.vdpbf16ps(Zmm(acc(i, 2 * p).getIdx()), lo, ptr_b[r11 + i * xs_]);
        g_.vdpbf16ps(Zmm(acc(i, 2 * p + 1).getIdx()), hi, ptr_b[r11 + i * xs_]);
      }
    }
  }

  // One k for `cols` columns and mr rows: W's words widened to f32 (a bf16 is the top half of
  // its f32), then an FMA with each row's rounded x. A single row streams W through two
  // registers; several rows hold the (at most 4) vectors for all of them.
  void step_widen(int mr, int cols) {
    const int W = v_.width();
    const int nv = (cols + W - 1) / W;
    auto widen = [&](const Xmm& wj, int j) {
      const int count = std::min(W, cols - j * W);
      if (v_.avx512()) {
        if (count == W) g_.vpmovzxwd(wj, yword[rax + j * W * 2]);
        else g_.vpmovzxwd(wj | k1 | T_z, yword[rax + j * W * 2]);
      } else if (count == W) {
        g_.vpmovzxwd(wj, xword[rax + j * W * 2]);
      } else {
        // No word-masked load on AVX2: the tail's words one by one, nothing past W's end read.
        const Xmm n(wj.getIdx());
        g_.vpxor(n, n, n);
        for (int e = 0; e < count; ++e) g_.vpinsrw(n, n, word[rax + j * W * 2 + e * 2], e);
        g_.vpmovzxwd(wj, n);
      }
      g_.vpslld(wj, wj, 16);
    };
    const Xmm xb = v_.vreg(4);
    if (mr == 1) {
      v_.broadcast(xb, dword[r11]);
      for (int j = 0; j < nv; ++j) {
        widen(v_.vreg(j % 2), j);
        g_.vfmadd231ps(acc(0, j), v_.vreg(j % 2), xb);
      }
      return;
    }
    for (int j = 0; j < nv; ++j) widen(v_.vreg(j), j);
    for (int i = 0; i < mr; ++i) {
      v_.broadcast(xb, dword[r11 + i * xs_]);
      for (int j = 0; j < nv; ++j) g_.vfmadd231ps(acc(i, j), v_.vreg(j), xb);
    }
  }

  void col_block(int mr, int cols) {
    const int W = v_.width();
    // dpbf16: both accumulators of every 32-column group, whatever part of it is used.
    const int nacc = s_.dpbf16 ? 2 * ((cols + 31) / 32) : (cols + W - 1) / W;
    for (int i = 0; i < mr; ++i)
      for (int j = 0; j < nacc; ++j) g_.vxorps(acc(i, j), acc(i, j), acc(i, j));
    if (s_.dpbf16 && cols % 32) set_k3((1u << (cols % 32)) - 1);
    g_.mov(rax, rcx);
    g_.mov(r11, rbx);
    const int64_t steps = s_.dpbf16 ? s_.d.in / 2 : s_.d.in;
    if (steps > 0) {
      Label loop;
      g_.mov(r10, steps);
      g_.L(loop);
      if (s_.dpbf16) step_dpbf16(mr, cols, false);
      else step_widen(mr, cols);
      g_.add(rax, static_cast<int32_t>((s_.dpbf16 ? 2 : 1) * s_.d.out * 2));
      g_.add(r11, 4);
      g_.dec(r10);
      g_.jnz(loop, CodeGenerator::T_NEAR);
    }
    if (s_.dpbf16 && s_.d.in % 2) step_dpbf16(mr, cols, true);
    if (s_.dpbf16) unpermute(mr, nacc / 2);
    epilogue(mr, cols);
  }

  // vpunpcklwd / vpunpckhwd pair the words within each 128-bit lane: lane L of a group's low
  // accumulator holds its columns 8L … 8L+3, of the high one 8L+4 … 8L+7. Back to column order.
  void unpermute(int mr, int groups) {
    std::vector<uint32_t> idx[2];
    for (uint32_t c = 0; c < 32; ++c) {
      const uint32_t lane = c / 8, r = c % 8;
      idx[c / 16].push_back(r < 4 ? 4 * lane + r : 16 + 4 * lane + r - 4);
    }
    for (int i = 0; i < mr; ++i)
      for (int p = 0; p < groups; ++p) {
        const Zmm a(acc(i, 2 * p).getIdx()), b(acc(i, 2 * p + 1).getIdx()), t0(0), t1(1);
        g_.vmovups(t0, v_.cst_u32(idx[0]));
        g_.vmovups(t1, v_.cst_u32(idx[1]));
        g_.vpermi2ps(t0, a, b);
        g_.vpermi2ps(t1, a, b);
        g_.vmovaps(a, t0);
        g_.vmovaps(b, t1);
      }
  }

  // + bias, the activation, the store: LINEAR's epilogue.
  void epilogue(int mr, int cols) {
    const int W = v_.width();
    const ActSnippet act = act_snippet(s_.act, s_.act_alpha);
    const std::vector<Xmm> tmp{v_.vreg(0), v_.vreg(1), v_.vreg(2), v_.vreg(3), v_.vreg(4), v_.vreg(v_.avx512() ? 31 : 14)};
    for (int i = 0; i < mr; ++i)
      for (int j = 0; j * W < cols; ++j) {
        const int count = std::min(W, cols - j * W);
        const Xmm y = acc(i, j);
        v_.load(tmp[0], ptr[r15 + j * W * 4], count);
        g_.vaddps(y, y, tmp[0]);
        act.body(v_, y, y, tmp);
        v_.store(ptr[r14 + i * s_.d.out * 4 + j * W * 4], y, count);
      }
  }

  CodeGenerator& g_;
  const Bf16Spec& s_;
  VecGen v_;
  int nv_ = 2;  // vectors of columns per row in the current row block
  int64_t xs_ = 0;
};

// Enough for either kernel: MR rows of rounded f32 or MR_DPBF16 rows of bf16 pairs.
size_t linear_bf16_scratch(const Instruction&, const TensorType* in, const TensorType*) {
  const int64_t n = dims_of(in).in;
  return static_cast<size_t>(std::max(MR * x_row_bytes(false, n), MR_DPBF16 * x_row_bytes(true, n)));
}

// ---- Parallel parts ----
//
// Each part computes its own rows and columns of y whole (every k, in the one kernel's order), so
// the results are the one-part kernel's bits at any thread count. Columns split in units of the
// kernel's column block (a part's block loop then runs as the whole's does, with the whole's
// tail in the last part), each part rounding all of x (a few hundred values a row against
// streaming its slice of W for each); rows, in blocks of MR, where there are fewer column blocks
// than threads but rows enough.

// The same floor as LINEAR's GEMV (jit/gemm_plan.cpp): below it a parallel step's hand-off costs
// about what the split saves.
constexpr int64_t PART_FLOPS = int64_t(1) << 18;

int64_t column_block(const Dims& d, Isa isa) {
  // The same for MR and MR_DPBF16 rows: 2 vectors a row from 3 rows on.
  const int mr = static_cast<int>(std::min<int64_t>(d.rows, MR));
  return Bf16Gen::vectors_per_row(mr) * (isa == Isa::AVX512 ? 16 : 8);
}
int64_t column_units(const Dims& d, Isa isa) { return (d.out + column_block(d, isa) - 1) / column_block(d, isa); }
bool uses_dpbf16(Isa isa) { return isa == Isa::AVX512 && cpu_info().avx512_bf16; }
int64_t row_blocks(const Dims& d, bool dpbf16) { return (d.rows + block_rows(dpbf16) - 1) / block_rows(dpbf16); }

// Part `part` of `n` into s's rows and columns; false where n parts do not fit (the parts hook
// never asks for such a count).
bool part_range(Bf16Spec* s, int part, int n) {
  const Dims& d = s->d;
  s->r0 = 0, s->r1 = d.rows, s->c0 = 0, s->c1 = d.out;
  if (n <= 1) return true;
  if (part < 0 || part >= n) return false;
  const int64_t units = column_units(d, s->isa), unit = column_block(d, s->isa), blocks = row_blocks(d, s->dpbf16);
  const int mrb = block_rows(s->dpbf16);
  if (units >= n) {
    s->c0 = std::min(d.out, units * part / n * unit);
    s->c1 = std::min(d.out, units * (part + 1) / n * unit);
    return true;
  }
  if (blocks < n) return false;
  s->r0 = std::min(d.rows, blocks * part / n * mrb);
  s->r1 = std::min(d.rows, blocks * (part + 1) / n * mrb);
  return true;
}

int linear_bf16_parts(const JitRequest& r, int threads) {
  const Dims d = dims_of(r.in);
  if (threads <= 1 || r.isa == Isa::REF || d.rows <= 0 || d.in <= 0 || d.out <= 0) return 1;
  if (2 * d.rows * d.in * d.out < PART_FLOPS) return 1;
  const int64_t units = column_units(d, r.isa);
  if (units >= threads || row_blocks(d, uses_dpbf16(r.isa)) >= threads) return threads;
  return static_cast<int>(std::max<int64_t>(1, units));
}

// A part reads all of x for a column split (its rows for a row split) and finishes its rows and
// columns of y: one contiguous span where it has one row or all the columns. It cannot split k
// (a join's split_reduction): that request gets no kernel.
bool linear_bf16_span(const JitRequest& r, bool output, int k, int64_t* begin, int64_t* end) {
  if (r.split_reduction || k != 0) return false;
  Bf16Spec s;
  s.d = dims_of(r.in);
  s.isa = r.isa;
  s.dpbf16 = uses_dpbf16(r.isa);
  if (!part_range(&s, r.part, r.n_parts)) return false;
  if (!output) {
    *begin = s.r0 * s.d.in;
    *end = s.r1 * s.d.in;
    return true;
  }
  if (s.r1 - s.r0 != 1 && (s.c0 != 0 || s.c1 != s.d.out)) return false;
  *begin = s.r0 * s.d.out + s.c0;
  *end = (s.r1 - 1) * s.d.out + s.c1;
  return true;
}

Result<std::shared_ptr<const JitKernel>> linear_bf16_jit(const JitRequest& r, KernelCache& cache) {
  if (r.split_reduction) return std::shared_ptr<const JitKernel>();
  return linear_bf16_kernel(r.ins, r.in, r.isa, uses_dpbf16(r.isa), cache, r.part,
                            r.n_parts);
}

}  // namespace

Result<std::shared_ptr<const JitKernel>> linear_bf16_kernel(const Instruction& ins, const TensorType* in, Isa isa,
                                                            bool dpbf16, KernelCache& cache, int part, int n_parts) {
  Bf16Spec s;
  s.d = dims_of(in);
  if (s.d.rows <= 0 || s.d.in <= 0 || s.d.out <= 0) return std::shared_ptr<const JitKernel>();
  if (s.d.in * s.d.out * 2 > MAX_BYTES || MR_DPBF16 * s.d.out * 4 > MAX_BYTES || MR_DPBF16 * s.d.in * 4 > MAX_BYTES)
    return std::shared_ptr<const JitKernel>();
  if (isa == Isa::REF || (dpbf16 && (isa != Isa::AVX512 || !cpu_info().avx512_bf16)))
    return std::shared_ptr<const JitKernel>();
  s.isa = isa;
  s.dpbf16 = dpbf16;
  if (!part_range(&s, part, n_parts)) return std::shared_ptr<const JitKernel>();
  s.act = fused_act(ins);
  s.act_alpha = static_cast<float>(fused_act_alpha(ins));
  const int W = isa == Isa::AVX512 ? 16 : 8;
  const std::string act = s.act == Activation::NONE ? "" : fmt::format("_{}", activation_name(s.act));
  const int mr = static_cast<int>(std::min<int64_t>(s.r1 - s.r0, block_rows(s.dpbf16)));
  const std::string name = fmt::format("bf16_linear{}__{}{}_{}x{}", act, isa_name(s.isa), s.dpbf16 ? "_dpbf16" : "", mr,
                                       Bf16Gen::vectors_per_row(mr) * W);
  const std::string key = fmt::format("{}|{}x{}x{}|{}|rows{}-{}|cols{}-{}", name, s.d.rows, s.d.in, s.d.out,
                                      s.act_alpha, s.r0, s.r1, s.c0, s.c1);
  return build_kernel_measured(cache, key, name, MEASURE_BYTES, [&s](CodeGenerator& g) { return Bf16Gen(g, s).emit(); });
}

// No gradient hook: autodiff refuses a path through it, by name.
OpHooks op_hooks_LINEAR_BF16() {
  OpHooks h{linear_bf16_shape, linear_bf16_ref, linear_bf16_scratch, nullptr, linear_bf16_jit, linear_bf16_parts};
  h.span = linear_bf16_span;
  return h;
}

}  // namespace nnasm
