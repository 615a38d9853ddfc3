// The generated MAXPOOL2D / AVGPOOL2D forward kernel for unpadded windows at column stride 1 or 2
// (LeNet's and most CNNs' 2×2/2; padded windows and other strides run the reference).
//
// Register map (AVX2 code, used at both JIT levels: the loads and shuffles gain nothing from
// zmm on the CPUs this engine targets): ymm0 the accumulator of 8 outputs, ymm1/ymm2 the tap's
// two input vectors (stride 2: 16 floats, deinterleaved into ymm1), ymm3 the NaN test, ymm15 the
// tail mask. General registers: rX the current plane's input, rXr the output row's first input
// row, rY the output (contiguous), rPlane / rRow the loop counters.
//
// Loop nest: planes (runtime) → output rows (runtime) → vectors of 8 outputs (unrolled; the last
// one masked so nothing is read past the window's last needed column) → taps kh × kw (unrolled),
// folded in row-major window order exactly as the reference folds them: the same max with NaN
// sticking, the same sums from 0 then one division, so results are bitwise the reference's.
#include "ops/pool/pool_jit.h"

#include <algorithm>

#include <fmt/format.h>
#include <xbyak/xbyak.h>

#include "jit/frame.h"
#include "jit/vecgen.h"

namespace nnasm {
namespace {

using namespace Xbyak;
using namespace Xbyak::util;

class Gen {
 public:
  Gen(CodeGenerator& g, const PoolGeom& p, bool max, int64_t p0, int64_t p1)
      : g_(g), p_(p), max_(max), p0_(p0), p1_(p1), v_(g, Isa::AVX2) {}

  Status emit() {
    {
      Frame f(g_, 0);
      f.load_in(rX, 0);
      f.load_out(rY, 0);
      if (p0_ > 0) {
        g_.mov(rRow, p0_ * p_.h * p_.w * 4);
        g_.add(rX, rRow);
        g_.mov(rRow, p0_ * p_.ho * p_.wo * 4);
        g_.add(rY, rRow);
      }
      Label plane, row;
      g_.mov(rPlane, p1_ - p0_);
      g_.L(plane);
      g_.mov(rXr, rX);
      g_.mov(rRow, p_.ho);
      g_.L(row);
      for (int64_t ox0 = 0; ox0 < p_.wo; ox0 += 8) vector(ox0, static_cast<int>(std::min<int64_t>(8, p_.wo - ox0)));
      g_.add(rXr, p_.sh * p_.w * 4);
      g_.add(rY, p_.wo * 4);
      g_.dec(rRow);
      g_.jnz(row, CodeGenerator::T_NEAR);
      g_.add(rX, p_.h * p_.w * 4);
      g_.dec(rPlane);
      g_.jnz(plane, CodeGenerator::T_NEAR);
    }
    v_.finish();
    return Status::ok();
  }

 private:
  const Reg64 &rX = rsi, &rY = rdx, &rXr = rcx, &rPlane = r8, &rRow = r9;
  const Ymm acc = ymm0, a = ymm1, b = ymm2, t = ymm3, mask = ymm15;

  // dst = `count` floats from src, the rest 0 (count 0: all zero).
  void load(const Ymm& dst, const Address& src, int count) {
    if (count <= 0) {
      g_.vxorps(dst, dst, dst);
      return;
    }
    if (count < 8) v_.set_tail(count, mask);
    v_.load(dst, src, std::min(count, 8));
  }

  // Outputs [ox0, ox0 + n) of the current row.
  void vector(int64_t ox0, int n) {
    if (max_) g_.vmovups(acc, v_.cst(-std::numeric_limits<float>::infinity()));
    else g_.vxorps(acc, acc, acc);
    for (int64_t i = 0; i < p_.kh; ++i)
      for (int64_t j = 0; j < p_.kw; ++j) {
        const int64_t col = ox0 * p_.sw + j;  // the tap's input column for output ox0
        const int64_t off = (i * p_.w + col) * 4;
        if (p_.sw == 1) {
          load(a, ptr[rXr + off], n);
        } else {
          // 16 floats from col; the needed ones are the even lanes 0 … 2(n − 1).
          const int need = 2 * n - 1;
          load(a, ptr[rXr + off], std::min(need, 8));
          load(b, ptr[rXr + off + 32], need - 8);
          g_.vshufps(a, a, b, 0x88);  // a0 a2 b0 b2 | a4 a6 b4 b6
          g_.vpermpd(a, a, 0xd8);     // a0 a2 a4 a6 b0 b2 b4 b6
        }
        fold();
      }
    if (!max_) g_.vdivps(acc, acc, v_.cst(static_cast<float>(p_.kh * p_.kw)));
    if (n < 8) v_.set_tail(n, mask);
    v_.store(ptr[rY + ox0 * 4], acc, n);
  }

  // acc = fold(acc, a): the reference's `v > m || v != v ? v : m`, or acc + a.
  void fold() {
    if (!max_) {
      g_.vaddps(acc, acc, a);
      return;
    }
    g_.vmaxps(t, a, acc);         // acc where either is NaN (so a NaN acc sticks)
    g_.vcmpunordps(acc, a, a);    // a is NaN: take a
    g_.vblendvps(acc, t, a, acc);
  }

  CodeGenerator& g_;
  const PoolGeom& p_;
  bool max_;
  int64_t p0_, p1_;  // the planes this kernel (part) computes
  VecGen v_;
};

}  // namespace

bool pool_jit_applies(const PoolGeom& p) {
  // Unrolled rows of at most 32 vectors and 16 taps keep the code small; offsets stay far from
  // the 32-bit displacement limit.
  // A ceil_mode partial last window is not covered: the kernel reads and divides by whole
  // windows.
  return p.ph == 0 && p.pw == 0 && p.windows_fit() && (p.sw == 1 || p.sw == 2) && p.wo <= 256 && p.kh * p.kw <= 16 &&
         p.kh * p.w * 4 < (int64_t(1) << 30);
}

int pool_jit_parts(const PoolGeom& p, int threads) {
  constexpr int64_t PART_READS = int64_t(1) << 17;  // input floats per part below which a split does not pay
  const int64_t reads = p.planes() * p.ho * p.wo * p.kh * p.kw;
  if (!pool_jit_applies(p) || threads <= 1) return 1;
  return static_cast<int>(std::clamp<int64_t>(std::min(reads / PART_READS, p.planes()), 1, threads));
}

Result<std::shared_ptr<const JitKernel>> pool_jit_kernel(const PoolGeom& p, bool max, Isa isa, int part, int n_parts,
                                                         KernelCache& cache) {
  if (isa == Isa::REF || !pool_jit_applies(p)) return std::shared_ptr<const JitKernel>();
  const int64_t p0 = p.planes() * part / n_parts, p1 = p.planes() * (part + 1) / n_parts;
  const std::string name = fmt::format("f32_{}pool2d__avx2_{}x{}s{}", max ? "max" : "avg", p.kh, p.kw, p.sw);
  const std::string key = fmt::format("{}|{}x{}x{}|{}x{}|{}-{}", name, p.h, p.w, p.sh, p.ho, p.wo, p0, p1);
  return build_kernel_measured(cache, key, name, size_t(1) << 20,
                               [p, max, p0, p1](CodeGenerator& g) { return Gen(g, p, max, p0, p1).emit(); });
}

}  // namespace nnasm
