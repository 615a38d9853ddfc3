// Winograd's minimal filtering F(2×2, 3×3) for the forward pass of 3×3, stride-1 convolutions
// (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2016). Each 2×2 tile of
// output is Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d B)] A over the tile's 4×4 input patch d: 16 products a tile
// per channel pair instead of 36, so the multiply-adds drop by 2.25×. Summed over the input
// channels, the 16 element-wise products become 16 matrix products, which the generated GEMM
// runs (jit/gemm.h, one batched call):
//   U[ξ] = (G g Gᵀ)[ξ]   [o, c]   the weights, transformed by a product of their own, U = K · wᵀ,
//                                  K the 16 × 9 matrix of G ⊗ G (winograd_weight_matrix): by CONV2D's
//                                  kernel on every run (a training program's params change every
//                                  step), or once by CONV_WEIGHTS_WINOGRAD in the derive section
//                                  (ops/conv/conv2d_winograd.cpp)
//   V[ξ] = (Bᵀ d B)[ξ]   [c, t]   the input patches of every tile t
//   M[ξ] = U[ξ] · V[ξ]   [o, t]
//   y tile = Aᵀ M[·][o, t] A
// The result differs from the direct sum by float rounding (the transforms add and subtract
// partial sums, so the error is a few times that of im2col + GEMM: tests/ops_parity_test.cpp
// bounds it); the reference kernel and NNASM_JIT=0 keep the direct sum.
#pragma once
#include <cstddef>
#include <cstdint>

#include "jit/cpu.h"
#include "ops/conv/conv_geom.h"

namespace nnasm {

// The tiling of one image under geometry g.
struct WinogradTiles {
  int64_t th, tw;  // tile rows and columns: ⌈ho / 2⌉, ⌈wo / 2⌉
  int64_t hp, wp;  // the zero-padded input copy the patches are read from: 2·th + 2, 2·tw + 2
  int64_t t() const { return th * tw; }
};
WinogradTiles winograd_tiles(const ConvGeom& g);

// What one product (the 16 GEMMs) takes: the tiles of `images` whole images side by side, or, on
// a large map, one image's band of `rows` rows of tiles, so that V and M stay a few MiB however
// large the image (the scratch is sized by the widest product). `columns`: the widest product's
// tiles. The last group or band of a part may be narrower.
struct WinogradProducts {
  int64_t images, rows, columns;
};
WinogradProducts winograd_products(const ConvGeom& g);

// Whether F(2×2, 3×3) computes g: 3×3 taps, stride and dilation 1, one group, padding at most 1.
bool winograd_fits(const ConvGeom& g);
// Whether the forward pass of g takes F(2×2, 3×3): it fits, and enough tiles (over the images) that the products saved outweigh
// transforming the weights on every run; fewer than 8 channels either way stay with the direct
// kernel, which has no transforms to pay for.
bool winograd_applies(const ConvGeom& g);

// The scratch layout of one part computing `o` output channels, in floats from the start: U
// ([16][o·C], what the weights' product writes), V ([16][C][columns]) and M ([16][o][columns]),
// each 16 planes `*_plane` floats apart
// (V's and M's rounded up past a whole number of 4 KiB pages, so that the 16 streams a transform
// reads or writes do not all fall into one set of the L1 cache); the padded input (with room
// for the input transform's rows); the output transform's rows; then the GEMMs' own scratch
// (gemm_bytes, the larger of the two). `floats` in all.
struct WinogradScratch {
  int64_t u, v, m, xp, tmp, gemm, floats;
  int64_t u_plane, v_plane, m_plane;
};
// With `u_given` (CONV2D_WINOGRAD, whose weights come transformed) U takes no room.
WinogradScratch winograd_scratch(const ConvGeom& g, int64_t o, size_t gemm_bytes, bool u_given = false);

// The 16 × 9 matrix K[(i, j)][(a, b)] = G[i][a]·G[j][b], so that U[ξ][o·C + c] = Σ K[ξ][k] ·
// w[o, c, k] (k = 3a + b): the weight transform as the product K · wᵀ. 64-byte aligned.
const float* winograd_weight_matrix();

// The input and output transforms, compiled for one instruction-set level (winograd_transforms).
// Tile rows [ty0, ty1) of an image are tiles t = (ty − ty0)·tw + tx of the product.
struct WinogradTransforms {
  // The padded copy xp (hp × wp floats a channel, then room for 4 × wp) of one image x ([C, H, W]).
  void (*pad)(const ConvGeom& g, const float* x, float* xp);
  // V[ξ][c][t] of tile rows [ty0, ty1) of the image padded in xp, at v + ξ·plane + c·ld + t.
  void (*input)(const ConvGeom& g, float* xp, int64_t ty0, int64_t ty1, float* v, int64_t plane, int64_t ld);
  // Output rows of tile rows [ty0, ty1) of y[o0 + o] (one image's [O, Ho, Wo]) from M[ξ][o][t] at
  // m + ξ·plane + o·ld + t, o < o_count; no bias or activation. tmp: scratch for a band of tile
  // rows (WinogradScratch::tmp).
  void (*output)(const ConvGeom& g, const float* m, int64_t plane, int64_t ld, int64_t ty0, int64_t ty1, int64_t o0,
                 int64_t o_count, float* y, float* tmp);
};
// The transforms for `isa`: plain C++ loops compiled for that level's vectors (AVX-512, AVX2 +
// FMA, or the baseline for REF), so that a cap on the level (NNASM_ISA) holds for them too.
WinogradTransforms winograd_transforms(Isa isa);

}  // namespace nnasm
