// The generated TO_NCHWC / TO_NCHW kernel: a transpose, tile by tile, between a block's b planes
// of H·W floats (H·W floats apart in the plain layout) and its H·W pixel vectors of b channels
// (contiguous in the blocked layout).
//
// A tile is T channels × T pixels, T the vector width of the code (16 in zmm, 8 in ymm): TO_NCHWC
// loads the T planes' next T pixels as T vectors, transposes them in registers and stores one
// vector per pixel; TO_NCHW loads T pixel vectors, transposes and stores T plane rows. The
// transpose is the usual four rounds of shuffles: vunpcklps / vunpckhps pair rows, vshufps 0x44 /
// 0xEE makes columns of four within each 128-bit lane, then the lanes are gathered, by two rounds
// of vshuff32x4 0x88 / 0xDD in zmm or one of vperm2f128 0x20 / 0x31 in ymm. b = 16 in ymm is two
// tiles of 8 channels per 8 pixels, at lanes 0–7 and 8–15 of the pixel vectors.
//
// Tails. The last tile of a plane (H·W mod T pixels) loads and stores its plane rows masked (an
// opmask, or vmaskmovps from VecGen's table; lanes past the tail read 0), and stores or loads
// only its pixels' vectors. The last block of an image (C mod b channels, when b does not divide
// C) has no planes past C: TO_NCHWC zeros those rows instead of loading them, so the padding
// lanes it writes are 0; TO_NCHW does not store them (the padding lanes it loads go nowhere).
// A tile of 8 channels wholly past C (b = 16 in ymm) stores zeros, or nothing.
//
// Loop nest: runs of blocks (runtime loops over the images of a part and the full blocks of an
// image; the partial block of an image after them, unrolled) → tiles of a block (a runtime loop,
// then the tail tile, unrolled). A part is a range of (n, channel block) pairs: consecutive pairs
// are consecutive in both layouts, so one pointer per tensor walks them all.
//
// Register map: rcx the plain tensor at the current block's first plane, rsi the current tile's
// pixel in it, rdx the current pixel vector in the blocked tensor; r8, r9, r10 the tile, block and
// image counters; rax scratch. Vectors: rows 0..T−1 in vreg 0..T−1, the shuffle rounds
// alternating between them and T..2T−1 (so the columns end in vreg 0..15 in zmm, 8..15 in ymm);
// the ymm tail mask in a register no live row holds (ymm15 while rows load, ymm0 after the
// transpose), k1 in zmm.
#include "ops/layout/nchwc_reorder_jit.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>
#include <xbyak/xbyak.h>

#include "jit/frame.h"
#include "jit/vecgen.h"

namespace nnasm {
namespace {

using namespace Xbyak;
using namespace Xbyak::util;

// Planes of fewer floats keep (b − 1) planes' bytes in a 32-bit displacement.
constexpr int64_t PLANE_LIMIT = int64_t(1) << 25;
constexpr int64_t PART_MIN_FLOATS = 64 * 1024;  // below this a hand-off costs more than it saves
constexpr int64_t PART_FLOATS = 32 * 1024;      // at least this many per part

class Gen {
 public:
  Gen(CodeGenerator& g, const NchwcGeom& geo, bool to_blocked, Isa code_isa, int64_t q0, int64_t q1)
      : g_(g), geo_(geo), to_blocked_(to_blocked), v_(g, code_isa), t_(v_.width()), q0_(q0), q1_(q1) {}

  Status emit() {
    {
      Frame f(g_, 0);
      f.load_in(to_blocked_ ? rPlain : rBlk, 0);
      f.load_out(to_blocked_ ? rBlk : rPlain, 0);
      const int64_t cbn = geo_.blocks();
      if (q0_ > 0) {
        add_bytes(rPlain, ((q0_ / cbn) * geo_.c + (q0_ % cbn) * geo_.b) * geo_.pixels * 4);
        add_bytes(rBlk, q0_ * geo_.pixels * geo_.b * 4);
      }
      runs();
    }
    v_.finish();
    return Status::ok();
  }

 private:
  const Reg64 &rPlain = rcx, &rWalk = rsi, &rBlk = rdx, &rPix = r8, &rBlocks = r9, &rImg = r10;

  void add_bytes(const Reg64& r, int64_t bytes) {
    g_.mov(rax, bytes);
    g_.add(r, rax);
  }

  // The part's pairs [q0, q1) as runs of full blocks, each run maybe followed by an image's
  // partial block: the rest of q0's image, whole images, then the start of q1's image.
  void runs() {
    const int64_t cbn = geo_.blocks(), tail = geo_.c % geo_.b;
    if (tail == 0) {
      run(q1_ - q0_, false, 1);
      return;
    }
    int64_t q = q0_;
    if (q % cbn != 0 || q1_ - q < cbn) {
      const int64_t image_end = (q / cbn + 1) * cbn, e = std::min(q1_, image_end);
      run(std::min(e, image_end - 1) - q, e == image_end, 1);
      q = e;
    }
    const int64_t images = (q1_ - q) / cbn;
    run(cbn - 1, true, images);
    q += images * cbn;
    run(q1_ - q, false, 1);
  }

  // `repeat` times: `full` full blocks, then the partial block if `partial`.
  void run(int64_t full, bool partial, int64_t repeat) {
    if (repeat <= 0 || (full <= 0 && !partial)) return;
    Label image, block;
    if (repeat > 1) {
      g_.mov(rImg, repeat);
      g_.L(image);
    }
    if (full > 0) {
      if (full > 1) {
        g_.mov(rBlocks, full);
        g_.L(block);
      }
      one_block(static_cast<int>(geo_.b));
      if (full > 1) {
        g_.dec(rBlocks);
        g_.jnz(block, CodeGenerator::T_NEAR);
      }
    }
    if (partial) one_block(static_cast<int>(geo_.c % geo_.b));
    if (repeat > 1) {
      g_.dec(rImg);
      g_.jnz(image, CodeGenerator::T_NEAR);
    }
  }

  // One block of `channels` real channels: its tiles, then rcx to the next block's first plane.
  void one_block(int channels) {
    const int64_t tiles = geo_.pixels / t_;
    const int tail = static_cast<int>(geo_.pixels % t_);
    g_.mov(rWalk, rPlain);
    if (tiles > 0) {
      Label loop;
      if (tiles > 1) {
        g_.mov(rPix, tiles);
        g_.L(loop);
      }
      tile(t_, channels);
      g_.add(rWalk, t_ * 4);
      g_.add(rBlk, static_cast<int>(t_ * geo_.b * 4));
      if (tiles > 1) {
        g_.dec(rPix);
        g_.jnz(loop, CodeGenerator::T_NEAR);
      }
    }
    if (tail > 0) {
      tile(tail, channels);
      g_.add(rBlk, static_cast<int>(tail * geo_.b * 4));
    }
    g_.add(rPlain, static_cast<int>(channels * geo_.pixels * 4));
  }

  // `pixels` (≤ T) pixels of a block of `channels` real channels, T channels at a time.
  void tile(int pixels, int channels) {
    for (int s = 0; s < geo_.b / t_; ++s) {
      const int rows = std::clamp(channels - s * t_, 0, t_);
      if (to_blocked_) to_blocked(pixels, rows, s);
      else to_plain(pixels, rows, s);
    }
  }

  Xmm vreg(int i) const { return v_.vreg(i); }
  // Where column j of the transposed tile ends.
  Xmm col(int j) const { return vreg(t_ == 16 ? j : 8 + j); }
  // Plane row r of channel slice s at the tile's pixel; pixel j's vector of slice s.
  Address plane(int s, int r) const { return ptr[rWalk + static_cast<int>((s * t_ + r) * geo_.pixels * 4)]; }
  Address pixel(int s, int j) const { return ptr[rBlk + static_cast<int>((j * geo_.b + s * t_) * 4)]; }

  // TO_NCHWC: channel slice s (`rows` real channels) of `pixels` pixels.
  void to_blocked(int pixels, int rows, int s) {
    if (rows == 0) {
      const Xmm z = vreg(0);
      g_.vxorps(z, z, z);
      for (int j = 0; j < pixels; ++j) g_.vmovups(pixel(s, j), z);
      return;
    }
    if (pixels < t_) v_.set_tail(pixels, vreg(2 * t_ - 1));
    for (int r = 0; r < t_; ++r) {
      if (r < rows) v_.load(vreg(r), plane(s, r), pixels);
      else g_.vxorps(vreg(r), vreg(r), vreg(r));
    }
    transpose();
    for (int j = 0; j < pixels; ++j) g_.vmovups(pixel(s, j), col(j));
  }

  // TO_NCHW: channel slice s (`rows` real channels) of `pixels` pixels.
  void to_plain(int pixels, int rows, int s) {
    if (rows == 0) return;
    for (int j = 0; j < t_; ++j) {
      if (j < pixels) g_.vmovups(vreg(j), pixel(s, j));
      else g_.vxorps(vreg(j), vreg(j), vreg(j));
    }
    transpose();
    if (pixels < t_) v_.set_tail(pixels, vreg(0));
    for (int r = 0; r < rows; ++r) v_.store(plane(s, r), col(r), pixels);
  }

  // The T×T tile with row r in vreg r, transposed: column j to col(j).
  void transpose() {
    const int t = t_;
    for (int i = 0; i < t / 2; ++i) {
      g_.vunpcklps(vreg(t + 2 * i), vreg(2 * i), vreg(2 * i + 1));
      g_.vunpckhps(vreg(t + 2 * i + 1), vreg(2 * i), vreg(2 * i + 1));
    }
    // Rows 4i..4i+3: vreg 4i+k holds, in each 128-bit lane L, their column 4L + k.
    for (int i = 0; i < t / 4; ++i) {
      const int a = t + 4 * i;
      g_.vshufps(vreg(4 * i), vreg(a), vreg(a + 2), 0x44);
      g_.vshufps(vreg(4 * i + 1), vreg(a), vreg(a + 2), 0xee);
      g_.vshufps(vreg(4 * i + 2), vreg(a + 1), vreg(a + 3), 0x44);
      g_.vshufps(vreg(4 * i + 3), vreg(a + 1), vreg(a + 3), 0xee);
    }
    if (t == 8) {
      for (int k = 0; k < 4; ++k) {
        const Ymm lo(k), hi(4 + k);
        g_.vperm2f128(Ymm(8 + k), lo, hi, 0x20);
        g_.vperm2f128(Ymm(12 + k), lo, hi, 0x31);
      }
      return;
    }
    // zmm 16+k: lanes 0 and 2 of rows 0–3 and 4–7 (columns k, 8+k); 20+k: lanes 1 and 3
    // (columns 4+k, 12+k); 24+k and 28+k the same of rows 8–15.
    for (int k = 0; k < 4; ++k) {
      g_.vshuff32x4(Zmm(16 + k), Zmm(k), Zmm(4 + k), 0x88);
      g_.vshuff32x4(Zmm(20 + k), Zmm(k), Zmm(4 + k), 0xdd);
      g_.vshuff32x4(Zmm(24 + k), Zmm(8 + k), Zmm(12 + k), 0x88);
      g_.vshuff32x4(Zmm(28 + k), Zmm(8 + k), Zmm(12 + k), 0xdd);
    }
    for (int k = 0; k < 4; ++k) {
      g_.vshuff32x4(Zmm(k), Zmm(16 + k), Zmm(24 + k), 0x88);
      g_.vshuff32x4(Zmm(8 + k), Zmm(16 + k), Zmm(24 + k), 0xdd);
      g_.vshuff32x4(Zmm(4 + k), Zmm(20 + k), Zmm(28 + k), 0x88);
      g_.vshuff32x4(Zmm(12 + k), Zmm(20 + k), Zmm(28 + k), 0xdd);
    }
  }

  CodeGenerator& g_;
  const NchwcGeom& geo_;
  bool to_blocked_;
  VecGen v_;
  int t_;  // floats per vector: the tile's side
  int64_t q0_, q1_;  // the (n, channel block) pairs this kernel (part) moves
};

}  // namespace

bool nchwc_reorder_jit_applies(const NchwcGeom& g) { return nchwc_block_valid(g.b) && g.pixels < PLANE_LIMIT; }

int nchwc_reorder_jit_parts(const NchwcGeom& g, int threads) {
  const int64_t floats = g.total_blocks() * g.pixels * g.b;
  if (!nchwc_reorder_jit_applies(g) || threads <= 1 || floats < PART_MIN_FLOATS) return 1;
  return static_cast<int>(std::clamp<int64_t>(std::min(floats / PART_FLOATS, g.total_blocks()), 1, threads));
}

Result<std::shared_ptr<const JitKernel>> nchwc_reorder_jit_kernel(const NchwcGeom& g, bool to_blocked, Isa isa,
                                                                  int part, int n_parts, KernelCache& cache) {
  if (isa == Isa::REF || !nchwc_reorder_jit_applies(g)) return std::shared_ptr<const JitKernel>();
  const Isa code_isa = isa == Isa::AVX512 && g.b == 16 ? Isa::AVX512 : Isa::AVX2;
  const int64_t q0 = g.total_blocks() * part / n_parts, q1 = g.total_blocks() * (part + 1) / n_parts;
  const std::string name = to_blocked ? fmt::format("f32_nchw_to_nchwc{}__{}", g.b, isa_name(code_isa))
                                      : fmt::format("f32_nchwc{}_to_nchw__{}", g.b, isa_name(code_isa));
  const std::string key = fmt::format("{}|{}x{}x{}|{}-{}", name, g.n, g.c, g.pixels, q0, q1);
  return build_kernel_measured(cache, key, name, size_t(64) << 10, [g, to_blocked, code_isa, q0, q1](CodeGenerator& cg) {
    return Gen(cg, g, to_blocked, code_isa, q0, q1).emit();
  });
}

}  // namespace nnasm
