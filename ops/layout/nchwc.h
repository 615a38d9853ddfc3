// The blocked channel layout (NCHWc, as ONNX Runtime's MLAS and oneDNN's nChw16c) that the
// layout pass (engine/passes/nchwc_layout.cpp) gives runs of convolutions, and the packed weight
// layouts its convolutions read.
//
// Activations. A plain f32[N, C, H, W] in blocks of b channels is f32[N, ⌈C/b⌉, H, W, b]:
// element (n, c, h, w) sits at [n, c / b, h, w, c mod b]. One vector holds one pixel's b
// channels, so a kernel fills its vectors on any map size (a 7×7 map fills a third of a 16-float
// row vector in NCHW). b is the vector width of the level the program runs at: 16 on AVX-512,
// 8 on AVX2. The lanes past C in the last block ("padding lanes") are zero where TO_NCHWC made
// them; an op over blocked tensors may write any finite value there (a fused sigmoid gives 0.5),
// since every consumer either ignores them (TO_NCHW) or multiplies them by zero weights.
//
// Dense weights. w f32[O, C, kh, kw] packed for blocks of b: f32[⌈O/b⌉, ⌈C/b⌉, kh, kw, b, b],
// element [ob, cb, i, j, ci, co] = w[ob·b + co, cb·b + ci, i, j], zero past O or C: for each input
// channel of a tap, one vector of b output channels, the operand an output block's FMA needs.
//
// Depthwise weights. w f32[C, 1, kh, kw] packed: f32[⌈C/b⌉, kh, kw, b], element [cb, i, j, c] =
// w[cb·b + c, 0, i, j], zero past C.
#pragma once
#include <cstdint>

namespace nnasm {

// The block sizes a blocked tensor may have (a vector of floats at each JIT level).
constexpr bool nchwc_block_valid(int64_t b) { return b == 8 || b == 16; }
// Blocks of b channels that hold c channels.
constexpr int64_t nchwc_blocks(int64_t c, int64_t b) { return (c + b - 1) / b; }

}  // namespace nnasm
