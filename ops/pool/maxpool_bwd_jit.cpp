// The generated MAXPOOL2D_BWD kernel for 2×2 windows at stride 2, unpadded, on even image sizes
// (LeNet's and most CNNs' pooling): bitwise the reference's maxpool_bwd_2x2 (ops/pool/
// pool2d_bwd.cpp) — the first maximum of each window in row-major order takes dy, or in a window
// holding NaN its first NaN; every other element gets +0.
//
// Each vector holds W = 8 consecutive x of one row, the two rows of 4 windows side by side:
// lanes 2i and 2i+1 of row 0 are a window's a and b, of row 1 its c and e. A pair swap
// (vpermilps 0xB1) gives every lane its window partner, so the window's max, its NaN flag and
// the "an earlier element already took dy" tests are lane-wise operations on vector masks.
//
// Register map (AVX2 code at both levels): ymm0 / ymm1 the rows x0 / x1, ymm2 the window max,
// ymm3 / ymm4 x0 / x1 is NaN, ymm5 the window holds NaN, ymm6 / ymm7 the row-0 / row-1
// candidates, then selections, ymm8 dy with each value twice, ymm9–ymm11 temporaries, ymm15 the
// tail mask. General registers: rX x at the window row pair, rD dy's row, rDx dx at the row pair,
// rRow the row counter.
#include "ops/pool/pool_jit.h"

#include <fmt/format.h>
#include <xbyak/xbyak.h>

#include "jit/frame.h"
#include "jit/vecgen.h"

namespace nnasm {
namespace {

using namespace Xbyak;
using namespace Xbyak::util;

constexpr int PAIR_SWAP = 0xB1;  // vpermilps: lanes (1, 0, 3, 2) of every 128-bit half
constexpr int ODD_LANES = 0xAA;  // vblendps: take lanes 1, 3, 5, 7 from the second source

class Gen {
 public:
  Gen(CodeGenerator& g, const PoolGeom& p) : g_(g), p_(p), v_(g, Isa::AVX2) {}

  Status emit() {
    {
      Frame f(g_, 0);
      f.load_in(rD, 0);
      f.load_in(rX, 1);
      f.load_out(rDx, 0);
      Label row;
      g_.mov(rRow, p_.planes() * p_.ho);
      g_.L(row);
      const int64_t lanes = 2 * p_.wo, full = lanes / 8;
      for (int64_t j = 0; j < full; ++j) vector(j, 8);
      if (const int tail = static_cast<int>(lanes % 8)) {
        v_.set_tail(tail, Ymm(15));
        vector(full, tail);
      }
      g_.add(rX, 2 * p_.w * 4);
      g_.add(rDx, 2 * p_.w * 4);
      g_.add(rD, p_.wo * 4);
      g_.dec(rRow);
      g_.jnz(row, CodeGenerator::T_NEAR);
    }
    v_.finish();
    return Status::ok();
  }

 private:
  const Reg64 &rD = rsi, &rX = rdx, &rDx = rcx, &rRow = rax;
  const Ymm x0 = Ymm(0), x1 = Ymm(1), m = Ymm(2), n0 = Ymm(3), n1 = Ymm(4), nan = Ymm(5), e0 = Ymm(6),
            e1 = Ymm(7), dy = Ymm(8), t = Ymm(9), u = Ymm(10), w = Ymm(11);

  // The 8 lanes (4 windows) at vector j of the row pair; `lanes` < 8 on the row's tail.
  void vector(int64_t j, int lanes) {
    const int64_t xo = j * 32, wo = p_.w * 4;
    v_.load(x0, ptr[rX + xo], lanes);
    v_.load(x1, ptr[rX + xo + wo], lanes);
    load_dy(j * 16, lanes / 2);
    // m: the window's maximum (meaningful when it holds no NaN); nan: it holds one.
    g_.vmaxps(m, x0, x1);
    g_.vpermilps(t, m, PAIR_SWAP);
    g_.vmaxps(m, m, t);
    g_.vcmpunordps(n0, x0, x0);
    g_.vcmpunordps(n1, x1, x1);
    g_.vorps(nan, n0, n1);
    g_.vpermilps(t, nan, PAIR_SWAP);
    g_.vorps(nan, nan, t);
    // Candidates: equal to the max in a NaN-free window, or NaN themselves.
    g_.vcmpeqps(e0, x0, m);
    g_.vandnps(e0, nan, e0);
    g_.vorps(e0, e0, n0);
    g_.vcmpeqps(e1, x1, m);
    g_.vandnps(e1, nan, e1);
    g_.vorps(e1, e1, n1);
    // Row 0: a if a candidate; b if a candidate and a is not.
    g_.vpermilps(t, e0, PAIR_SWAP);         // each lane's partner in row 0
    g_.vandnps(u, t, e0);                   // b: not after a
    g_.vorps(t, t, e0);                     // the window's row 0 took dy
    g_.vblendps(e0, e0, u, ODD_LANES);      // row-0 selection
    // Row 1: c if no row-0 element took dy; e if also c did not.
    g_.vandnps(e1, t, e1);
    g_.vpermilps(u, e1, PAIR_SWAP);
    g_.vandnps(u, u, e1);
    g_.vblendps(e1, e1, u, ODD_LANES);      // row-1 selection
    g_.vandps(e0, e0, dy);
    g_.vandps(e1, e1, dy);
    v_.store(ptr[rDx + xo], e0, lanes);
    v_.store(ptr[rDx + xo + wo], e1, lanes);
  }

  // dy: `count` (1 … 4) values at rD + off, each twice: (d0, d0, d1, d1, …).
  void load_dy(int64_t off, int count) {
    const Xmm d = Xmm(dy.getIdx()), hi = Xmm(w.getIdx());
    switch (count) {
      case 4: g_.vmovups(d, ptr[rD + off]); break;
      case 3:
        g_.vmovq(d, ptr[rD + off]);
        g_.vinsertps(d, d, ptr[rD + off + 8], 0x20);
        break;
      case 2: g_.vmovq(d, ptr[rD + off]); break;
      default: g_.vmovss(d, ptr[rD + off]); break;
    }
    g_.vunpckhps(hi, d, d);
    g_.vunpcklps(d, d, d);
    g_.vinsertf128(dy, dy, hi, 1);
  }

  CodeGenerator& g_;
  const PoolGeom& p_;
  VecGen v_;
};

}  // namespace

bool maxpool_bwd_jit_applies(const PoolGeom& p) {
  return p.kh == 2 && p.kw == 2 && p.sh == 2 && p.sw == 2 && p.ph == 0 && p.pw == 0 && p.windows_fit() && p.h % 2 == 0 &&
         p.w % 2 == 0 && p.wo <= 512 && p.planes() * p.h * p.w * 4 < (int64_t(1) << 40);
}

Result<std::shared_ptr<const JitKernel>> maxpool_bwd_jit_kernel(const PoolGeom& p, Isa isa, KernelCache& cache) {
  if (isa == Isa::REF || !maxpool_bwd_jit_applies(p)) return std::shared_ptr<const JitKernel>();
  const std::string name = "f32_maxpool2d_bwd__avx2_2x2s2";
  const std::string key = fmt::format("{}|{}x{}x{}", name, p.planes(), p.h, p.w);
  return build_kernel_measured(cache, key, name, size_t(1) << 20, [p](CodeGenerator& g) { return Gen(g, p).emit(); });
}

}  // namespace nnasm
