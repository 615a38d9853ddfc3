// CONV2D_I8's JIT kernel (the contract is ops/quant/conv_i8.cpp's): per image, the quantization's
// parameters and x quantized into channel quads of u8 (C++ per level, vectorized with intrinsics),
// im2col of those dwords, then a generated int8 GEMM whose epilogue writes the NCHW output.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <immintrin.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <xbyak/xbyak.h>

#include "isa/activation.h"
#include "jit/act_snippet.h"
#include "jit/frame.h"
#include "jit/vecgen.h"
#include "ops/quant/conv_i8.h"
#include "ops/quant/i8_quant.h"
#include "ops/quant/linear_i8.h"

namespace nnasm {
namespace {

constexpr int64_t MAX_BYTES = int64_t(1) << 30;  // offsets stay within int32
constexpr size_t MEASURE_BYTES = 512 * 1024;
constexpr int64_t PIX = 16;  // pixels are padded to whole AVX-512 vectors in cols

int64_t quads(int64_t c) { return (c + 3) / 4; }
int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// ---- per-level quantization (C++; the reference's operations, vectorized) ----
//
// scan: lo, hi and p of n values (lane order differs from the reference's only in which NaN or
// zero sign min and max keep: i8_quant.h). quantize: channel quads of x (c channels of hw values)
// into dwords out[q·stride + p] = q(x[4q, p]) | q(x[4q + 1, p]) << 8 | …, the lanes past c zp.

using ScanFn = I8QParams (*)(const float* x, int64_t n);
using QuantizeFn = void (*)(const float* x, int64_t c, int64_t hw, float div, int32_t zp, uint32_t* out,
                            int64_t stride);

I8QParams finish_lanes(const float* lo, const float* hi, const float* p, int lanes) {
  float l = 0, h = 0, s = 0;
  for (int i = 0; i < lanes; ++i) {
    l = std::min(l, lo[i]);
    h = std::max(h, hi[i]);
    s += p[i];
  }
  return i8_qparams_finish(l, h, s);
}

// Each function names its target too: clang ignores GCC's target pragma, and its intrinsics then
// refuse to inline into a function compiled for the baseline.
#define AVX2_FN __attribute__((target("avx2,fma")))
#define AVX512_FN __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))

#pragma GCC push_options
#pragma GCC target("avx2,fma")
AVX2_FN I8QParams scan_avx2(const float* x, int64_t n) {
  __m256 lo = _mm256_setzero_ps(), hi = lo, p = lo;
  const __m256 zero = lo;
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t k = 0; k < n; k += 8) {
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::min<int64_t>(n - k, 8))), iota);
    const __m256 v = _mm256_maskload_ps(x + k, m);
    lo = _mm256_min_ps(lo, v);
    hi = _mm256_max_ps(hi, v);
    p = _mm256_fmadd_ps(v, zero, p);
  }
  alignas(32) float l[8], h[8], s[8];
  _mm256_store_ps(l, lo);
  _mm256_store_ps(h, hi);
  _mm256_store_ps(s, p);
  return finish_lanes(l, h, s, 8);
}

AVX2_FN void quantize_avx2(const float* x, int64_t c, int64_t hw, float div, int32_t zp, uint32_t* out, int64_t stride) {
  const __m256 vd = _mm256_set1_ps(div), lo = _mm256_set1_ps(-QCLAMP), hi = _mm256_set1_ps(QCLAMP);
  const __m256i vz = _mm256_set1_epi32(zp), zero = _mm256_setzero_si256(), top = _mm256_set1_epi32(255);
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t cq = 0; cq < quads(c); ++cq)
    for (int64_t p = 0; p < hw; p += 8) {
      const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::min<int64_t>(hw - p, 8))), iota);
      __m256i word = zero;
      for (int l = 0; l < 4; ++l) {
        const int64_t ch = 4 * cq + l;
        __m256i q = vz;
        if (ch < c) {
          __m256 v = _mm256_div_ps(_mm256_maskload_ps(x + ch * hw + p, m), vd);
          v = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
          v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
          q = _mm256_min_epi32(_mm256_max_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(v), vz), zero), top);
        }
        word = _mm256_or_si256(word, _mm256_slli_epi32(q, 8 * l));
      }
      _mm256_maskstore_epi32(reinterpret_cast<int*>(out + cq * stride + p), m, word);
    }
}
#pragma GCC pop_options

// GCC 12's AVX-512 intrinsics pass an _mm512_undefined_* source to their builtins, which
// -Wmaybe-uninitialized reports at every use: a false positive, silenced for this section only.
#pragma GCC push_options
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")
AVX512_FN __mmask16 lanes16(int64_t left) { return left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1); }

AVX512_FN I8QParams scan_avx512(const float* x, int64_t n) {
  __m512 lo = _mm512_setzero_ps(), hi = lo, p = lo;
  const __m512 zero = lo;
  for (int64_t k = 0; k < n; k += 16) {
    const __m512 v = _mm512_maskz_loadu_ps(lanes16(n - k), x + k);
    lo = _mm512_min_ps(lo, v);
    hi = _mm512_max_ps(hi, v);
    p = _mm512_fmadd_ps(v, zero, p);
  }
  alignas(64) float l[16], h[16], s[16];
  _mm512_store_ps(l, lo);
  _mm512_store_ps(h, hi);
  _mm512_store_ps(s, p);
  return finish_lanes(l, h, s, 16);
}

AVX512_FN void quantize_avx512(const float* x, int64_t c, int64_t hw, float div, int32_t zp, uint32_t* out, int64_t stride) {
  const __m512 vd = _mm512_set1_ps(div), lo = _mm512_set1_ps(-QCLAMP), hi = _mm512_set1_ps(QCLAMP);
  const __m512i vz = _mm512_set1_epi32(zp), zero = _mm512_setzero_si512(), top = _mm512_set1_epi32(255);
  for (int64_t cq = 0; cq < quads(c); ++cq)
    for (int64_t p = 0; p < hw; p += 16) {
      const __mmask16 m = lanes16(hw - p);
      __m512i word = zero;
      for (int l = 0; l < 4; ++l) {
        const int64_t ch = 4 * cq + l;
        __m512i q = vz;
        if (ch < c) {
          __m512 v = _mm512_div_ps(_mm512_maskz_loadu_ps(m, x + ch * hw + p), vd);
          v = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
          v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
          q = _mm512_min_epi32(_mm512_max_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(v), vz), zero), top);
        }
        word = _mm512_or_si512(word, _mm512_slli_epi32(q, 8 * l));
      }
      _mm512_mask_storeu_epi32(out + cq * stride + p, m, word);
    }
}
#pragma GCC diagnostic pop
#pragma GCC pop_options

// cols[(q·kh + i)·kw + j][p] = qx[q][iy][ix] (dwords: four channels' u8), `fill` (zp in every
// byte) outside the image; rows `pp` dwords apart; the pixels p0 ≤ p < p1 only.
void im2col_u8(const ConvGeom& g, const uint32_t* qx, uint32_t fill, int64_t pp, int64_t p0, int64_t p1,
               uint32_t* cols) {
  for (int64_t cq = 0; cq < quads(g.c); ++cq)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        uint32_t* row = cols + ((cq * g.kh + i) * g.kw + j) * pp;
        const int64_t x0 = j * g.dw - g.pw;  // ix = ox·sw + x0
        const int64_t lo = std::min(g.wo, x0 >= 0 ? 0 : (-x0 + g.sw - 1) / g.sw);
        const int64_t hi = std::max(lo, std::min(g.wo, x0 > g.w - 1 ? 0 : (g.w - 1 - x0) / g.sw + 1));
        for (int64_t oy = p0 / g.wo; oy * g.wo < p1; ++oy) {
          uint32_t* d = row + oy * g.wo;
          const int64_t a = std::max<int64_t>(0, p0 - oy * g.wo), b = std::min(g.wo, p1 - oy * g.wo);
          const int64_t iy = oy * g.sh - g.ph + i * g.dh;
          if (iy < 0 || iy >= g.h) {
            std::fill(d + a, d + b, fill);
            continue;
          }
          const uint32_t* s = qx + (cq * g.h + iy) * g.w + x0;
          const int64_t l = std::clamp(lo, a, b), r = std::clamp(hi, a, b);
          std::fill(d + a, d + l, fill);
          if (g.sw == 1) std::memcpy(d + l, s + l, static_cast<size_t>(r - l) * 4);
          else
            for (int64_t ox = l; ox < r; ++ox) d[ox] = s[ox * g.sw];
          std::fill(d + r, d + b, fill);
        }
      }
}

// ---- the generated GEMM ----
//
// y[o, p] = act(fma(f32(Σ_q cols[q, p, :]·w[o, q, :] − zc[o]), mul[o], b[o]) + nanflag) for one
// image: cols u8 [kq, pp, 4], w i8 [O, kq, 4] (VNNI) or i16 [O, kq, 4] (widening), zc and mul
// per image in the scratch.
// Register map. General: rdi KernelArgs*; r8 cols, r9 w, r12 b, rdx y; rsi the scratch (nanflag
// at 0, zc at ZC, mul at mul_off); r13 the pixel block's byte offset (4 bytes a pixel in cols' rows
// and in y's alike); r14 the row block's byte offset in zc, mul and b, rbp its w rows, r11 its y
// rows; in the quad loop rax rows 0–2 and r15 rows 3–5 of w ([rax + rcx·i], rcx the w row
// stride), rbx cols at the quad, r10 quads left.
// Vector, AVX-512: 8 … 31 the accumulators; 0 … 3 the cols vectors (widened halves for the
// widening kernel), 4 its broadcast weights, 5 a product. AVX2: 8 … 15 the accumulators; 0 and 1
// cols, 2 the broadcast weights, 3 a product, 7 the pixel tail mask. Epilogue: 0 and 1 the
// per-row values, then 0 … 7 (AVX2: 0 … 6) the activation's temporaries. Opmask k1: the tail.

using namespace Xbyak;
using namespace Xbyak::util;

constexpr int ZC = 64;

struct GemmSpec {
  Isa isa = Isa::AVX2;
  bool vnni = false, bias = false;
  int64_t o = 0, kq = 0, p = 0, pp = 0;
  int64_t p0 = 0, p1 = 0;  // the part's pixels: whole vectors from p0
  Activation act = Activation::NONE;
  float act_alpha = 0;
  int64_t mul_off() const { return ZC + round_up(o * 4, 64); }
};

class ConvI8Gen {
 public:
  ConvI8Gen(CodeGenerator& g, const GemmSpec& s) : g_(g), s_(s), v_(g, s.isa) {}

  static int rows(const GemmSpec& s) { return s.isa == Isa::AVX512 ? 6 : 4; }
  static int vecs(const GemmSpec& s) { return (s.isa == Isa::AVX512 ? 4 : 2) / (s.vnni ? 1 : 2); }

  Status emit() {
    const int W = v_.width();
    const ActSnippet act = act_snippet(s_.act, s_.act_alpha);
    if (act.n_tmp > (z() ? 8 : 7)) return Status::error("CONV2D_I8: the activation needs more registers");
    {
      Frame f(g_, 6);
      f.load_in(r8, 0);
      f.load_in(r9, 1);
      if (s_.bias) f.load_in(r12, 2);
      f.load_out(rdx, 0);
      g_.mov(rsi, ptr[Frame::args() + offsetof(KernelArgs, scratch)]);
      g_.mov(rcx, s_.kq * unit());
      const int64_t n = s_.p1 - s_.p0;
      if (n % W) v_.set_tail(static_cast<int>(n % W), Ymm(7));
      const int64_t blk = vecs(s_) * W, full = n / blk;
      const int rest = static_cast<int>(n % blk);
      g_.mov(r13, s_.p0 * 4);
      if (full) {
        Label loop;
        g_.L(loop);
        row_blocks(static_cast<int>(blk));
        g_.add(r13, static_cast<int32_t>(blk * 4));
        g_.cmp(r13, static_cast<int32_t>((s_.p0 + full * blk) * 4));
        g_.jb(loop, CodeGenerator::T_NEAR);
      }
      if (rest) row_blocks(rest);
    }
    v_.finish();
    return Status::ok();
  }

 private:
  bool z() const { return v_.avx512(); }
  int unit() const { return s_.vnni ? 4 : 8; }  // bytes of one weight quad
  int per() const { return s_.vnni ? 1 : 2; }
  Xmm acc(int i, int j, int h) const { return v_.vreg(8 + (i * vecs(s_) + j) * per() + h); }
  Address row(int i) const {
    const Reg64& base = i < 3 ? rax : r15;
    const int k = i % 3;
    return k == 0 ? ptr[base] : k == 1 ? ptr[base + rcx] : ptr[base + rcx * 2];
  }
  Address row_b(int i) const {
    const Reg64& base = i < 3 ? rax : r15;
    const int k = i % 3;
    return k == 0 ? ptr_b[base] : k == 1 ? ptr_b[base + rcx] : ptr_b[base + rcx * 2];
  }

  // Every row block for the pixel block at r13 of `cols` pixels.
  void row_blocks(int cols) {
    const int mr = rows(s_);
    const int64_t full = s_.o / mr;
    const int rest = static_cast<int>(s_.o % mr);
    g_.mov(rbp, r9);
    g_.mov(r11, rdx);
    g_.xor_(r14, r14);
    if (full) {
      Label loop;
      g_.L(loop);
      block(mr, cols);
      g_.add(rbp, static_cast<int32_t>(mr * s_.kq * unit()));
      g_.add(r11, static_cast<int32_t>(mr * s_.p * 4));
      g_.add(r14, mr * 4);
      g_.cmp(r14, static_cast<int32_t>(full * mr * 4));
      g_.jb(loop, CodeGenerator::T_NEAR);
    }
    if (rest) block(rest, cols);
  }

  void block(int mr, int cols) {
    const int W = v_.width();
    const int nv = (cols + W - 1) / W;
    for (int i = 0; i < mr; ++i)
      for (int j = 0; j < nv; ++j)
        for (int h = 0; h < per(); ++h) {
          const Xmm a = acc(i, j, h);
          if (z()) g_.vpxord(a, a, a);
          else g_.vpxor(a, a, a);
        }
    g_.mov(rax, rbp);
    if (mr > 3) {
      g_.lea(r15, ptr[rbp + rcx * 2]);
      g_.add(r15, rcx);
    }
    g_.lea(rbx, ptr[r8 + r13]);
    Label loop;
    g_.mov(r10, s_.kq);
    g_.L(loop);
    step(mr, nv);
    g_.add(rax, unit());
    if (mr > 3) g_.add(r15, unit());
    g_.add(rbx, static_cast<int32_t>(s_.pp * 4));
    g_.dec(r10);
    g_.jnz(loop, CodeGenerator::T_NEAR);
    epilogue(mr, cols);
  }

  // One quad of k: nv vectors of cols against each row's broadcast weight quad.
  void step(int mr, int nv) {
    const int vb = v_.vbytes();
    if (s_.vnni) {
      for (int j = 0; j < nv; ++j) {
        if (z()) g_.vmovdqu32(Zmm(j), ptr[rbx + j * vb]);
        else g_.vmovdqu(Ymm(j), ptr[rbx + j * vb]);
      }
      for (int i = 0; i < mr; ++i) {
        if (!z()) g_.vpbroadcastd(Ymm(2), row(i));
        for (int j = 0; j < nv; ++j) {
          if (z()) g_.vpdpbusd(acc(i, j, 0), Zmm(j), row_b(i));
          else g_.vpdpbusd(acc(i, j, 0), Ymm(j), Ymm(2), VexEncoding);
        }
      }
      return;
    }
    const Xmm qb = v_.vreg(z() ? 4 : 2), prod = v_.vreg(z() ? 5 : 3);
    for (int j = 0; j < nv; ++j)
      for (int h = 0; h < 2; ++h) {
        const Address src = z() ? yword[rbx + j * vb + h * 32] : xword[rbx + j * vb + h * 16];
        g_.vpmovzxbw(v_.vreg(2 * j + h), src);
      }
    for (int i = 0; i < mr; ++i) {
      g_.vpbroadcastq(qb, row(i));
      for (int j = 0; j < nv; ++j)
        for (int h = 0; h < 2; ++h) {
          g_.vpmaddwd(prod, v_.vreg(2 * j + h), qb);
          g_.vpaddd(acc(i, j, h), acc(i, j, h), prod);
        }
    }
  }

  // − zp·colsum, the conversion, fma with sx·s and b, + nanflag, the activation, the store.
  void epilogue(int mr, int cols) {
    const int W = v_.width();
    const ActSnippet act = act_snippet(s_.act, s_.act_alpha);
    std::vector<Xmm> tmp;
    for (int t = 0; t < (z() ? 8 : 7); ++t) tmp.push_back(v_.vreg(t));
    const Xmm t0 = tmp[0], t1 = tmp[1];
    for (int i = 0; i < mr; ++i)
      for (int j = 0; j * W < cols; ++j) {
        const int count = std::min(W, cols - j * W);
        if (!s_.vnni) i8_combine_pairs(v_, acc(i, j, 0), acc(i, j, 1));
        const Xmm y = acc(i, j, 0);
        v_.broadcast(t0, dword[rsi + r14 + ZC + i * 4]);
        g_.vpsubd(y, y, t0);
        g_.vcvtdq2ps(y, y);
        v_.broadcast(t0, dword[rsi + r14 + static_cast<int32_t>(s_.mul_off()) + i * 4]);
        if (s_.bias) v_.broadcast(t1, dword[r12 + r14 + i * 4]);
        else g_.vxorps(t1, t1, t1);
        g_.vfmadd213ps(y, t0, t1);
        v_.broadcast(t0, dword[rsi]);
        g_.vaddps(y, y, t0);
        act.body(v_, y, y, tmp);
        v_.store(ptr[r11 + r13 + static_cast<int32_t>(i * s_.p * 4 + j * W * 4)], y, count);
      }
  }

  CodeGenerator& g_;
  const GemmSpec& s_;
  VecGen v_;
};

// ---- the bound kernel ----

struct Layout {
  int64_t c4 = 0, kq = 0, p = 0, pp = 0;
  bool pointwise = false;
  size_t zc = ZC, mul = 0, w16 = 0, qx = 0, cols = 0, total = 0;
};

Layout layout_of(const ConvGeom& g) {
  Layout l;
  l.c4 = quads(g.c);
  l.kq = l.c4 * g.kh * g.kw;
  l.p = g.p();
  l.pp = round_up(l.p, PIX);
  l.pointwise = g.pointwise();
  l.mul = static_cast<size_t>(ZC + round_up(g.o * 4, 64));
  l.w16 = l.mul + static_cast<size_t>(round_up(g.o * 4, 64));
  l.qx = l.w16 + static_cast<size_t>(round_up(g.o * l.kq * 8, 64));
  const int64_t qx_bytes = l.pointwise ? l.c4 * l.pp * 4 : round_up(l.c4 * g.h * g.w * 4, 64);
  l.cols = l.pointwise ? l.qx : l.qx + static_cast<size_t>(qx_bytes);
  l.total = l.cols + static_cast<size_t>(l.kq * l.pp * 4) + 64;
  return l;
}

struct Bound {
  ConvGeom g;
  Layout l;
  bool vnni = false, tensor = false, given = false, per_out = false;
  int64_t p0 = 0, p1 = 0;
  ScanFn scan = nullptr;
  QuantizeFn quantize = nullptr;
  KernelFn gemm = nullptr;
  std::shared_ptr<const JitKernel> keep;
};

void forward(const KernelArgs* a, const void* data) {
  const Bound& k = *static_cast<const Bound*>(data);
  const ConvGeom& g = k.g;
  const Layout& l = k.l;
  const float* x = static_cast<const float*>(a->in[0]);
  const int8_t* wp = static_cast<const int8_t*>(a->in[1]);
  const int32_t* colsum = static_cast<const int32_t*>(a->in[2]);
  const float* scale = static_cast<const float*>(a->in[3]);
  const float* b = conv2d_i8_has_bias(*a->ins, a->n_in) ? static_cast<const float*>(a->in[4]) : nullptr;
  float* y = static_cast<float*>(a->out[0]);
  char* s = static_cast<char*>(a->scratch);
  int32_t* zc = reinterpret_cast<int32_t*>(s + l.zc);
  float* mul = reinterpret_cast<float*>(s + l.mul);
  uint32_t* qx = reinterpret_cast<uint32_t*>(s + l.qx);
  uint32_t* cols = reinterpret_cast<uint32_t*>(s + l.cols);
  const void* w = wp;
  if (!k.vnni) {
    int16_t* w16 = reinterpret_cast<int16_t*>(s + l.w16);
    for (int64_t i = 0; i < g.o * l.kq * 4; ++i) w16[i] = wp[i];
    w = w16;
  }
  const int64_t image = g.c * g.h * g.w;
  const I8QParams all = k.tensor ? k.scan(x, g.n * image) : I8QParams{};
  for (int64_t n = 0; n < g.n; ++n) {
    const float* xn = x + n * image;
    I8QParams qp = k.tensor ? all : k.scan(xn, image);
    if (k.given) {  // the scan for its nanflag alone (+0 or NaN, as the reference's sum)
      const float sx = *static_cast<const float*>(a->in[a->n_in - 2]);
      qp.sx = sx;
      qp.div = sx == 0 ? 1.f : sx;
      qp.zp = *static_cast<const uint8_t*>(a->in[a->n_in - 1]);
    }
    std::memcpy(s, &qp.p, 4);
    for (int64_t o = 0; o < g.o; ++o) {
      zc[o] = qp.zp * colsum[o];
      mul[o] = qp.sx * scale[k.per_out ? o : 0];
    }
    k.quantize(xn, g.c, g.h * g.w, qp.div, qp.zp, qx, l.pointwise ? l.pp : g.h * g.w);
    if (!l.pointwise) im2col_u8(g, qx, static_cast<uint32_t>(qp.zp) * 0x01010101u, l.pp, k.p0, k.p1, cols);
    call_kernel(k.gemm, {cols, w, b}, y + n * g.o * l.p, s);
  }
}

}  // namespace

size_t conv2d_i8_scratch(const Instruction& ins, const TensorType* in, const TensorType*) {
  return std::max(conv2d_i8_ref_scratch(ins, in), layout_of(conv2d_i8_geom(ins, in)).total);
}

Result<std::shared_ptr<const JitKernel>> conv2d_i8_kernel(const Instruction& ins, const TensorType* in, Isa isa,
                                                          bool vnni, KernelCache& cache, int part, int n_parts) {
  if (isa == Isa::REF || (vnni && !linear_i8_has_vnni(isa))) return std::shared_ptr<const JitKernel>();
  auto k = std::make_shared<Bound>();
  k->g = conv2d_i8_geom(ins, in);
  const ConvGeom& g = k->g;
  k->l = layout_of(g);
  const Layout& l = k->l;
  if (g.n <= 0 || g.o <= 0 || l.p <= 0 || l.kq <= 0) return std::shared_ptr<const JitKernel>();
  if (g.o * l.p * 4 > MAX_BYTES || l.total > static_cast<size_t>(MAX_BYTES)) return std::shared_ptr<const JitKernel>();
  k->vnni = vnni;
  k->tensor = ins.i(NNASM_IMM(CONV2D_I8, x_scale)) == NNASM_CHOICE(CONV2D_I8, x_scale, tensor);
  k->given = conv2d_i8_given(ins);
  k->per_out = in[3].shape[0] == g.o && g.o != 1;
  k->scan = isa == Isa::AVX512 ? scan_avx512 : scan_avx2;
  k->quantize = isa == Isa::AVX512 ? quantize_avx512 : quantize_avx2;
  GemmSpec s;
  s.isa = isa;
  s.vnni = vnni;
  s.bias = conv2d_i8_has_bias(ins, ins.in.size());
  s.o = g.o;
  s.kq = l.kq;
  s.p = l.p;
  s.pp = l.pp;
  const int64_t vecs = (l.p + PIX - 1) / PIX;
  s.p0 = k->p0 = vecs * part / n_parts * PIX;
  s.p1 = k->p1 = std::min(l.p, vecs * (part + 1) / n_parts * PIX);
  if (s.p1 <= s.p0) return std::shared_ptr<const JitKernel>();
  s.act = fused_act(ins);
  s.act_alpha = static_cast<float>(fused_act_alpha(ins));
  const int W = isa == Isa::AVX512 ? 16 : 8;
  const std::string act = s.act == Activation::NONE ? "" : fmt::format("_{}", activation_name(s.act));
  const std::string name = fmt::format("i8_conv2d{}__{}{}_{}x{}", act, isa_name(isa), vnni ? "_vnni" : "",
                                       ConvI8Gen::rows(s), ConvI8Gen::vecs(s) * W);
  const std::string gkey =
      fmt::format("{}|{}x{}x{}|{}|{}|{}-{}", name, s.o, s.kq, s.p, s.act_alpha, s.bias, s.p0, s.p1);
  Result<std::shared_ptr<const JitKernel>> gemm =
      build_kernel_measured(cache, gkey, name, MEASURE_BYTES, [&s](CodeGenerator& gen) { return ConvI8Gen(gen, s).emit(); });
  if (!gemm || !gemm.value()) return gemm;
  k->gemm = gemm.value()->fn();
  k->keep = gemm.value();
  const std::string key = fmt::format("{}|bound|{}x{}x{}x{}|{}x{}|{}|{}|{}|{}|{}|{}|{}", gkey, g.n, g.c, g.h, g.w, g.kh,
                                      g.kw, fmt::join(ins.ints(CONV_STRIDE), ","), fmt::join(ins.ints(CONV_PAD), ","), fmt::join(ins.ints(CONV_DILATION), ","),
                                      k->tensor + 2 * k->given, k->per_out, isa_name(isa), vnni);
  return cache.get(key, [&] { return build_bound_kernel(name, forward, std::shared_ptr<const void>(k)); });
}

Result<std::shared_ptr<const JitKernel>> conv2d_i8_jit(const JitRequest& r, KernelCache& cache) {
  return conv2d_i8_kernel(r.ins, r.in, r.isa, linear_i8_has_vnni(r.isa), cache, r.part, r.n_parts);
}

// Parts split the pixels in whole vectors; each quantizes the image again (C·H·W divisions against
// O·P·K/parts products), so only a large convolution is split, into parts of 4 vectors or more.
int conv2d_i8_parts(const JitRequest& r, int threads) {
  const ConvGeom g = conv2d_i8_geom(r.ins, r.in);
  if (threads <= 1 || g.n * g.o * g.p() * g.k() < (int64_t(1) << 20)) return 1;
  const int64_t vecs = (g.p() + PIX - 1) / PIX;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, vecs / 4)));
}

}  // namespace nnasm
