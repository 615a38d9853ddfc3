// The direct stride-1 convolution kernel of conv_direct.h.
//
// Register map (AVX2 16 ymm / AVX-512 32 zmm, W = 8 / 16 floats a vector): acc[o][v] = vreg(o·nv
// + v) for an ob × nv block of output channels × output vectors; then the tap's nv input vectors
// and the broadcast weight (after the loop: the activation's temporaries, then the row copy's);
// the tail mask when the stored rows are not a multiple of W (AVX2: ymm15; AVX-512: k1). General
// registers: rX the padded input at the current output row and column block, rW the weights of
// the current channel block, rY the output row, rB the bias, rXc / rWc the input-channel walk,
// rCnt its counter, rRow the row counter, rBlk the channel-block counter, rT the flat buffer.
//
// Loop nest: channel blocks of ob (a runtime loop, then one shorter block) → output rows (a
// runtime loop; one flat row in flat mode) → column blocks of nv vectors (unrolled) → input
// channels (a runtime loop) → taps kh × kw (unrolled): nv input loads, ob broadcasts and ob·nv
// FMAs. Flat mode with junk columns then copies the block's rows from the buffer into y.
#include "ops/conv/conv_direct.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <xbyak/xbyak.h>

#include "jit/act_snippet.h"
#include "jit/frame.h"
#include "jit/vecgen.h"
#include "ops/conv/conv_columns.h"

namespace nnasm {
namespace {

using namespace Xbyak;
using namespace Xbyak::util;

constexpr int VREGS = 16;
constexpr int64_t MAX_DISP = int64_t(1) << 30;  // byte offsets the code bakes in stay below this
constexpr int64_t MAX_FLAT_VECTORS = 32;        // a flat row's column blocks are unrolled

// Emits block(ob) for og / ob full blocks of output channels (a runtime loop on `counter`), then
// block(og % ob) once for the rest. Each block leaves its pointers advanced past its channels.
template <class Block>
void channel_blocks(CodeGenerator& g, const Reg64& counter, int64_t og, int ob, Block block) {
  const int64_t full = og / ob, rest = og % ob;
  if (full > 0) {
    Label top;
    g.mov(counter, full);
    g.L(top);
    block(ob);
    g.dec(counter);
    g.jnz(top, CodeGenerator::T_NEAR);
  }
  if (rest > 0) block(static_cast<int>(rest));
}

// The block shape: nv vectors of output columns (of nvec in a row) × ob output channels. In the
// tap loop the registers hold ob·nv accumulators, the nv input vectors of the tap and one
// broadcast weight (plus the tail mask); each tap loads nv + ob values for ob·nv FMAs, so the
// shape with the fewest loads per FMA wins, as long as it has the 8 independent accumulators two
// FMA pipes of latency 4 need (or all the channels there are). After the loop the input and
// weight registers serve the activation as temporaries.
struct Blocking {
  int nvec, nv, ob;
  int tail;  // lanes of the last vector stored (rows of y, or the flat row without junk); 0: whole
};

bool avx512(const DirectConv& d) { return d.lanes == 16; }

Blocking blocking(const DirectConv& d) {
  const int64_t stored = d.flat && !d.flat_junk() ? d.ho * d.wo : d.wo;
  Blocking best{static_cast<int>(d.flat ? d.flat_vectors() : (d.wo + d.lanes - 1) / d.lanes), 1, 1,
                static_cast<int>(stored % d.lanes)};
  const int free = (avx512(d) ? 32 : VREGS) - (best.tail && !avx512(d) ? 1 : 0);
  const int n_tmp = act_snippet(d.act, d.act_alpha).n_tmp;
  double best_cost = 1e9;
  for (int nv = 1; nv <= std::min(best.nvec, 4); ++nv) {
    const int ob = static_cast<int>(std::min<int64_t>(d.og, (free - nv - 1) / nv));
    if (ob < 1 || free - ob * nv < n_tmp) continue;
    // Loads per FMA, a block of fewer than 8 accumulators counted as stalling, and the FMAs of
    // column blocks past the row's vectors wasted.
    const int col_blocks = (best.nvec + nv - 1) / nv;
    double cost = static_cast<double>(nv + ob) / (ob * nv);
    if (ob * nv < 8 && ob < d.og) cost *= 8.0 / (ob * nv);
    cost *= static_cast<double>(col_blocks * nv) / best.nvec;
    if (cost < best_cost) best_cost = cost, best.nv = nv, best.ob = ob;
  }
  return best;
}

class Gen {
 public:
  Gen(CodeGenerator& g, const DirectConv& d)
      : g_(g), d_(d), b_(blocking(d)), v_(g, avx512(d) ? Isa::AVX512 : Isa::AVX2), w_(v_.width()) {}

  Status emit() {
    {
      Frame f(g_, 6);
      if (b_.tail) v_.set_tail(b_.tail, Ymm(VREGS - 1));
      f.load_in(rX0, 0);
      f.load_in(rW, 1);
      if (d_.bias) f.load_in(rB, 2);
      if (d_.flat_junk()) f.load_in(rT, 3);
      f.load_out(rY, 0);
      channel_blocks(g_, rBlk, d_.og, b_.ob, [this](int ob) { channel_block(ob); });
    }
    v_.finish();
    return Status::ok();
  }

 private:
  const Reg64 &rX0 = rsi, &rW = rdx, &rY = rcx, &rB = r8, &rX = r9, &rXc = r10, &rWc = r11, &rCnt = rax,
              &rRow = rbx, &rBlk = rbp, &rYrow = r12, &rT = r13;

  int64_t row_bytes() const { return d_.rs() * 4; }
  int64_t phase_bytes() const { return d_.hp() * row_bytes(); }
  int64_t plane_bytes() const { return d_.sw * phase_bytes(); }  // one input channel's phases
  int64_t taps() const { return d_.kh * d_.kw; }
  Xmm acc(int o, int v) const { return v_.vreg(o * b_.nv + v); }
  // Registers past the accumulators: the tap's input vectors, then the broadcast weight.
  Xmm spare(int i) const { return v_.vreg(b_.ob * b_.nv + i); }

  // ob output channels from rW / rY / rB on; leaves them advanced past the block.
  void channel_block(int ob) {
    g_.mov(rX, rX0);
    g_.mov(rYrow, rY);
    if (d_.flat) {
      columns(ob);
      if (d_.flat_junk()) copy_rows(ob);
    } else {
      Label row;
      g_.mov(rRow, d_.ho);
      g_.L(row);
      columns(ob);
      g_.add(rX, d_.sh * row_bytes());
      g_.add(rYrow, d_.wo * 4);
      g_.dec(rRow);
      g_.jnz(row, CodeGenerator::T_NEAR);
    }
    g_.add(rW, ob * d_.cg * taps() * 4);
    g_.add(rY, ob * d_.ho * d_.wo * 4);
    if (d_.bias) g_.add(rB, ob * 4);
  }

  void columns(int ob) {
    for (int col = 0, left = b_.nvec; left > 0; left -= b_.nv) {
      const int nv = std::min(b_.nv, left);
      column_block(ob, nv, col);
      col += nv;
    }
  }

  // Flat with junk: the ho rows of wo outputs of ob channels from the buffer (a channel's flat
  // row every nvec vectors) into y.
  void copy_rows(int ob) {
    const int chunks = static_cast<int>((d_.wo + w_ - 1) / w_);
    g_.mov(rXc, rT);
    Label row;
    g_.mov(rRow, d_.ho);
    g_.L(row);
    for (int o = 0; o < ob; ++o)
      for (int c = 0; c < chunks; ++c) {
        const Xmm t = spare((o * chunks + c) % 2);
        const int n = c == chunks - 1 && b_.tail ? b_.tail : w_;
        v_.load(t, ptr[rXc + (o * b_.nvec + c) * v_.vbytes()], n);
        v_.store(ptr[rYrow + (o * d_.ho * d_.wo + c * w_) * 4], t, n);
      }
    g_.add(rXc, row_bytes());
    g_.add(rYrow, d_.wo * 4);
    g_.dec(rRow);
    g_.jnz(row, CodeGenerator::T_NEAR);
  }

  // Output vectors [col, col + nv) of the current row for ob channels.
  void column_block(int ob, int nv, int col) {
    for (int o = 0; o < ob; ++o)
      for (int v = 0; v < nv; ++v) {
        if (d_.bias) v_.broadcast(acc(o, v), ptr[rB + o * 4]);
        else g_.vxorps(acc(o, v), acc(o, v), acc(o, v));
      }
    g_.lea(rXc, ptr[rX + col * v_.vbytes()]);
    g_.mov(rWc, rW);
    Label channel;
    g_.mov(rCnt, d_.cg);
    g_.L(channel);
    const Xmm w = spare(nv);
    for (int64_t i = 0; i < d_.kh; ++i)
      for (int64_t j = 0; j < d_.kw; ++j) {
        const int64_t tap_col = j * d_.dw;
        const int64_t x_off = i * d_.dh * row_bytes() + tap_col % d_.sw * phase_bytes() + tap_col / d_.sw * 4;
        for (int v = 0; v < nv; ++v) {
          // Flat without junk: the last vector's lanes past the output are past the input too.
          const bool masked = d_.flat && !d_.flat_junk() && col + v == b_.nvec - 1 && b_.tail;
          v_.load(spare(v), ptr[rXc + x_off + v * v_.vbytes()], masked ? b_.tail : w_);
        }
        for (int o = 0; o < ob; ++o) {
          g_.vbroadcastss(w, ptr[rWc + (o * d_.cg * taps() + i * d_.kw + j) * 4]);
          for (int v = 0; v < nv; ++v) g_.vfmadd231ps(acc(o, v), w, spare(v));
        }
      }
    g_.add(rXc, plane_bytes());
    g_.add(rWc, taps() * 4);
    g_.dec(rCnt);
    g_.jnz(channel, CodeGenerator::T_NEAR);

    const ActSnippet act = act_snippet(d_.act, d_.act_alpha);
    std::vector<Xmm> t;
    for (int i = 0; i < act.n_tmp; ++i) t.push_back(spare(i));
    for (int o = 0; o < ob; ++o)
      for (int v = 0; v < nv; ++v) {
        if (d_.act != Activation::NONE) act.body(v_, acc(o, v), acc(o, v), t);
        const bool last = col + v == b_.nvec - 1;
        if (d_.flat_junk()) g_.vmovups(ptr[rT + (o * b_.nvec + col + v) * v_.vbytes()], acc(o, v));
        else v_.store(ptr[rYrow + (o * d_.ho * d_.wo + (col + v) * w_) * 4], acc(o, v), last && b_.tail ? v_.tail() : w_);
      }
  }

  CodeGenerator& g_;
  const DirectConv& d_;
  Blocking b_;
  VecGen v_;
  const int w_;  // floats a vector
};

// The weight gradient (direct_weight_kernel). Register map: acc[o][j] = ymm(o·kw + j) for ob
// output channels × kw taps of one kernel row i; then ob dy vectors, the input vector of the
// current tap (loaded once for the ob FMAs; masked on the row's tail) and ymm15 the tail mask. Loop nest: channel blocks of ob (runtime, then one
// shorter block) → input channels (runtime) → kernel rows i (unrolled) → output rows (runtime) →
// output vectors (unrolled): ob dy loads, then per tap one input load and ob FMAs.
class WeightGen {
 public:
  WeightGen(CodeGenerator& g, const DirectConv& d) : g_(g), d_(d), v_(g, Isa::AVX2) {
    nvec_ = static_cast<int>((d.wo + 7) / 8);
    tail_ = static_cast<int>(d.wo % 8);
    ob_ = static_cast<int>(std::clamp<int64_t>((VREGS - 2) / (d.kw + 1), 1, d.og));
  }

  Status emit() {
    {
      Frame f(g_, 3);
      if (tail_) v_.set_tail(tail_, Ymm(VREGS - 1));
      f.load_in(rX0, 0);
      f.load_in(rDy, 1);
      f.load_out(rAcc, 0);
      channel_blocks(g_, rBlk, d_.og, ob_, [this](int ob) { channel_block(ob); });
    }
    v_.finish();
    return Status::ok();
  }

 private:
  const Reg64 &rX0 = rsi, &rDy = rdx, &rAcc = rcx, &rXc = r8, &rAccC = r9, &rXr = r10, &rDyr = r11, &rCnt = rax,
              &rRow = rbx, &rBlk = rbp;

  int64_t row_bytes() const { return d_.rs() * 4; }
  int64_t taps() const { return d_.kh * d_.kw; }
  Ymm acc(int o, int64_t j) const { return Ymm(static_cast<int>(o * d_.kw + j)); }
  Ymm dyv(int o) const { return Ymm(static_cast<int>(ob_ * d_.kw) + o); }
  Ymm xv_reg() const { return Ymm(static_cast<int>(ob_ * d_.kw + ob_)); }
  int64_t acc_offset(int o, int64_t i, int64_t j) const { return ((o * d_.cg * d_.kh + i) * d_.kw + j) * 32; }

  void channel_block(int ob) {
    g_.mov(rXc, rX0);
    g_.mov(rAccC, rAcc);
    Label channel;
    g_.mov(rCnt, d_.cg);
    g_.L(channel);
    for (int64_t i = 0; i < d_.kh; ++i) kernel_row(ob, i);
    g_.add(rXc, d_.hp() * row_bytes());
    g_.add(rAccC, taps() * 32);
    g_.dec(rCnt);
    g_.jnz(channel, CodeGenerator::T_NEAR);
    g_.add(rDy, ob * d_.ho * d_.wo * 4);
    g_.add(rAcc, ob * d_.cg * taps() * 32);
  }

  void kernel_row(int ob, int64_t i) {
    for (int o = 0; o < ob; ++o)
      for (int64_t j = 0; j < d_.kw; ++j) g_.vmovups(acc(o, j), ptr[rAccC + acc_offset(o, i, j)]);
    g_.lea(rXr, ptr[rXc + i * d_.dh * row_bytes()]);
    g_.mov(rDyr, rDy);
    Label row;
    g_.mov(rRow, d_.ho);
    g_.L(row);
    for (int xv = 0; xv < nvec_; ++xv) {
      const int lanes = xv == nvec_ - 1 && tail_ ? tail_ : 8;
      for (int o = 0; o < ob; ++o) v_.load(dyv(o), ptr[rDyr + (o * d_.ho * d_.wo + xv * 8) * 4], lanes);
      for (int64_t j = 0; j < d_.kw; ++j) {
        v_.load(xv_reg(), ptr[rXr + xv * 32 + j * d_.dw * 4], lanes);
        for (int o = 0; o < ob; ++o) g_.vfmadd231ps(acc(o, j), dyv(o), xv_reg());
      }
    }
    g_.add(rXr, row_bytes());
    g_.add(rDyr, d_.wo * 4);
    g_.dec(rRow);
    g_.jnz(row, CodeGenerator::T_NEAR);
    for (int o = 0; o < ob; ++o)
      for (int64_t j = 0; j < d_.kw; ++j) g_.vmovups(ptr[rAccC + acc_offset(o, i, j)], acc(o, j));
  }

  CodeGenerator& g_;
  const DirectConv& d_;
  VecGen v_;
  int nvec_, tail_, ob_;
};

}  // namespace

bool direct_weight_applies(const ConvGeom& g) {
  return direct_conv_applies(g) && (g.wo + 7) / 8 <= 16 && g.kw <= 13 && g.o * g.k() * 32 < MAX_DISP;
}

Result<std::shared_ptr<const JitKernel>> direct_weight_kernel(const DirectConv& d, Isa isa, KernelCache& cache) {
  if (isa == Isa::REF || d.lanes != 8) return std::shared_ptr<const JitKernel>();
  const int ob = static_cast<int>(std::clamp<int64_t>((VREGS - 2) / (d.kw + 1), 1, d.og));
  const std::string name = fmt::format("f32_conv2d_bwd_weight_direct__avx2_{}x{}", ob, d.kw);
  const std::string key = fmt::format("{}|{}x{}x{}x{}x{}x{}x{}x{}", name, d.cg, d.og, d.ho, d.wo, d.kh, d.kw, d.dh, d.dw);
  return build_kernel_measured(cache, key, name, size_t(4) << 20, [d](CodeGenerator& g) { return WeightGen(g, d).emit(); });
}

bool direct_conv_applies(const ConvGeom& g, bool strided) {
  if (strided ? g.sh < 1 || g.sw < 1 || g.sw > 2 : g.sh != 1 || g.sw != 1) return false;
  DirectConv d{g.cg(), g.og(), g.ho, g.wo, g.kh, g.kw, g.dh, g.dw};
  d.lanes = 16;  // the widest rows either level pads to
  d.sh = g.sh, d.sw = g.sw;
  // Baked-in offsets: a plane of the padded input, a block of weights, a block of output.
  return d.padded_floats() * 4 < MAX_DISP && g.o * g.k() * 4 < MAX_DISP && g.o * g.p() * 4 < MAX_DISP &&
         g.kh * g.kw <= 121;
}

bool direct_flat_applies(const ConvGeom& g, int lanes) {
  if (!direct_conv_applies(g)) return false;
  DirectConv d{g.cg(), g.og(), g.ho, g.wo, g.kh, g.kw, g.dh, g.dw};
  d.lanes = lanes;
  d.flat = true;
  return d.flat_vectors() <= MAX_FLAT_VECTORS;
}

Result<std::shared_ptr<const JitKernel>> direct_conv_kernel(const DirectConv& d, Isa isa, KernelCache& cache) {
  if (isa == Isa::REF || d.lanes != (isa == Isa::AVX512 ? 16 : 8)) return std::shared_ptr<const JitKernel>();
  const Blocking b = blocking(d);
  const std::string stride = d.sh == 1 && d.sw == 1 ? "" : fmt::format("s{}x{}_", d.sh, d.sw);
  const std::string name = fmt::format("f32_conv2d_direct{}{}{}__{}_{}{}x{}", d.flat ? "_flat" : "", d.bias ? "_bias" : "",
                                       d.act == Activation::NONE ? "" : "_" + std::string(activation_name(d.act)),
                                       isa_name(isa), stride, b.ob, b.nv);
  const std::string key = fmt::format("{}|{}x{}x{}x{}x{}x{}x{}x{}|{}", name, d.cg, d.og, d.ho, d.wo, d.kh, d.kw, d.dh,
                                      d.dw, d.act_alpha);
  return build_kernel_measured(cache, key, name, size_t(4) << 20, [d](CodeGenerator& g) { return Gen(g, d).emit(); });
}

void direct_conv_pad(const DirectConv& d, const float* x, int64_t h, int64_t w, int64_t ph, int64_t pw, float* xp) {
  std::memset(xp, 0, static_cast<size_t>(d.padded_floats()) * sizeof(float));
  const int64_t hp = d.hp(), rs = d.rs(), rows = std::min(h, hp - ph), cols = std::min(w, d.sw * rs - pw);
  for (int64_t c = 0; c < d.cg; ++c)
    for (int64_t r = 0; r < rows; ++r) {
      const float* src = x + (c * h + r) * w;
      float* row = xp + (c * d.sw * hp + r + ph) * rs;
      if (d.sw == 1) {
        std::memcpy(row + pw, src, static_cast<size_t>(cols) * sizeof(float));
        continue;
      }
      split_columns(src, cols, pw, row, row + hp * rs);
    }
}

}  // namespace nnasm
