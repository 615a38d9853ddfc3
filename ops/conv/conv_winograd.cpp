// The transforms of conv_winograd.h. F(2×2, 3×3)'s matrices:
//   Bᵀ = | 1  0 −1  0 |    G = | 1    0    0  |    Aᵀ = | 1  1  1  0 |
//        | 0  1  1  0 |        | ½    ½    ½  |         | 0  1 −1 −1 |
//        | 0 −1  1  0 |        | ½   −½    ½  |
//        | 0  1  0 −1 |        | 0    0    1  |
// Each transform applies its matrix to the rows of a tile, then to the columns. The loops run
// along a row of tiles (or, for the weights, along the input channels), so the compiler can
// vectorize them over tiles.
#include "ops/conv/conv_winograd.h"

#include <algorithm>
#include <cstring>

#include "ops/conv/conv_columns.h"

namespace nnasm {
namespace {

constexpr int64_t MIN_CHANNELS = 8;
// Tiles (over the images) below which the weights' transform on every run, about 16·O·C floats
// written and read back, costs more than the 20 multiply-adds a tile and channel pair it saves.
constexpr int64_t MIN_TILES = 32;
// Columns (tiles) a product should have: each transformed weight it loads then serves a 64-wide
// row of M, as the GEMM's micro-kernel is wide.
constexpr int64_t PRODUCT_TILES = 64;
// Bytes of V and M a product may take (64·(C + O) a tile) before a large image's tiles go in
// bands: without them a 512×512 map of 64 channels would ask for half a GiB of scratch.
constexpr int64_t PRODUCT_BYTES = int64_t(4) << 20;

int64_t lines(int64_t floats) { return (floats + 15) / 16 * 16; }

// Rows of tiles the output transform takes at once: about 128 tiles, at least one row.
int64_t output_band_rows(const WinogradTiles& t) { return std::max<int64_t>(1, 128 / t.tw); }
// A plane of n floats, whole cache lines, and one line more when that makes a whole number of
// 4 KiB pages.
int64_t plane(int64_t n) { return lines(n) % 1024 ? lines(n) : lines(n) + 16; }

}  // namespace

WinogradTiles winograd_tiles(const ConvGeom& g) {
  WinogradTiles t;
  t.th = (g.ho + 1) / 2;
  t.tw = (g.wo + 1) / 2;
  t.hp = 2 * t.th + 2;
  t.wp = 2 * t.tw + 2;
  return t;
}

WinogradProducts winograd_products(const ConvGeom& g) {
  const WinogradTiles t = winograd_tiles(g);
  WinogradProducts p;
  p.images = std::clamp<int64_t>((PRODUCT_TILES + t.t() - 1) / t.t(), 1, g.n);
  const int64_t row_bytes = 64 * (g.c + g.o) * t.tw;  // V and M of one row of tiles
  const int64_t bands = (t.th + std::max<int64_t>(1, PRODUCT_BYTES / row_bytes) - 1) / std::max<int64_t>(1, PRODUCT_BYTES / row_bytes);
  p.rows = p.images > 1 ? t.th : (t.th + bands - 1) / bands;  // bands of equal rows, but the last
  p.columns = p.images * p.rows * t.tw;
  return p;
}

bool winograd_fits(const ConvGeom& g) {
  return g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 && g.groups == 1 && g.ph <= 1 &&
         g.pw <= 1 && g.ho >= 1 && g.wo >= 1;
}

bool winograd_applies(const ConvGeom& g) {
  if (!winograd_fits(g) || g.ho < 2 || g.wo < 2 || g.c < MIN_CHANNELS || g.o < MIN_CHANNELS) return false;
  return g.n * winograd_tiles(g).t() >= MIN_TILES;
}

WinogradScratch winograd_scratch(const ConvGeom& g, int64_t o, size_t gemm_bytes, bool u_given) {
  const WinogradTiles t = winograd_tiles(g);
  WinogradScratch s;
  s.u_plane = u_given ? 0 : o * g.c;
  s.v_plane = plane(g.c * winograd_products(g).columns);
  s.m_plane = plane(o * winograd_products(g).columns);
  s.u = 0;
  s.v = s.u + lines(16 * s.u_plane);
  s.m = s.v + 16 * s.v_plane;
  s.xp = s.m + 16 * s.m_plane;
  s.tmp = s.xp + lines((g.c + 4) * t.hp * t.wp);  // the padded input, then 4 transformed rows
  s.gemm = s.tmp + lines(12 * output_band_rows(t) * t.tw);  // a band of the output transform
  s.floats = s.gemm + lines(static_cast<int64_t>((gemm_bytes + 3) / 4));
  return s;
}

const float* winograd_weight_matrix() {
  static const struct alignas(64) Matrix {
    float k[16 * 9];
    Matrix() : k() {
      static const float G[4][3] = {{1, 0, 0}, {0.5f, 0.5f, 0.5f}, {0.5f, -0.5f, 0.5f}, {0, 0, 1}};
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j)
          for (int a = 0; a < 3; ++a)
            for (int b = 0; b < 3; ++b) k[(i * 4 + j) * 9 + a * 3 + b] = G[i][a] * G[j][b];
    }
  } m;
  return m.k;
}

// The transforms at each level: the same loops, vectorized for the level's registers.
namespace generic {
#include "ops/conv/conv_winograd_transforms.inc"
}  // namespace generic

#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2 {
#include "ops/conv/conv_winograd_transforms.inc"
}  // namespace avx2
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,prefer-vector-width=512")
namespace avx512 {
#include "ops/conv/conv_winograd_transforms.inc"
}  // namespace avx512
#pragma GCC pop_options

WinogradTransforms winograd_transforms(Isa isa) {
  switch (isa) {
    case Isa::AVX512: return {avx512::pad, avx512::input, avx512::output};
    case Isa::AVX2: return {avx2::pad, avx2::input, avx2::output};
    default: return {generic::pad, generic::input, generic::output};
  }
}

}  // namespace nnasm
