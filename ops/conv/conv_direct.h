// Direct convolution: a generated kernel that reads a zero-padded copy of the input and keeps a
// block of output channels × output columns in vector registers over every input channel and
// tap, so that nothing is unrolled into columns (im2col) or packed. It is what small channel
// counts need (1–16, game and audio models, LeNet, a CNN's 3-channel stem), where im2col + GEMM
// spends more time moving the input than multiplying. The CONV2D forward pass at strides 1 and 2
// and, with the weights flipped, the data gradient of a stride-1 convolution use it
// (ops/conv/conv_jit.cpp). At column stride 2 the padded copy keeps each row's even and odd
// columns in two planes, so that the columns an output vector's tap reads are consecutive.
#pragma once
#include <algorithm>
#include <cstdint>

#include "isa/activation.h"
#include "jit/kernel.h"
#include "ops/conv/conv_geom.h"

namespace nnasm {

// One call of the kernel: one image and group. in[0] the padded input [cg, sw, hp, rs] (sw planes
// of column phases, `rs` floats a row, zero outside the image; readable up to tail_floats() past
// the last row), in[1] the weights [og, cg, kh, kw], in[2] the bias [og] (when `bias`), in[3]
// (flat with junk columns) a buffer of flat_buffer_floats(); out[0] y [og, ho, wo]. Output
// (oy, ox), tap (i, j) reads padded row oy·sh + i·dh of phase (j·dw) mod sw at column
// ox + ⌊j·dw / sw⌋.
//
// Row mode vectorizes along an output row: ho rows of ⌈wo / lanes⌉ vectors. Flat mode (stride 1,
// small maps, where a row fills a fraction of a vector) runs the rows as one: over input rows of
// the padded width rs = wo + (kw − 1)·dw, the output at q = oy·rs + ox is
// Σ w · xp[c][q + i·dh·rs + j·dw], one row of ho·rs outputs whose columns ox ≥ wo are junk, in
// ⌈ho·rs / lanes⌉ vectors. With kw = 1 there is no junk (rs = wo): the kernel stores y directly,
// loads and stores the last vector masked and reads nothing past the input's planes, so an
// unpadded input needs no copy. With junk it stores each block of channels into in[3] and copies
// the rows out.
struct DirectConv {
  int64_t cg, og, ho, wo, kh, kw, dh, dw;
  bool bias = false;
  Activation act = Activation::NONE;
  float act_alpha = 0;
  // Floats per vector of the forward kernel: 16 on AVX-512, 8 on AVX2 (and for the weight
  // gradient's kernel, which is AVX2 code at both levels).
  int lanes = 8;
  // Strides (rows: any; columns: 1 or 2), forward only; the gradients' kernels take 1.
  int64_t sh = 1, sw = 1;
  bool flat = false;  // forward at stride 1 only
  int64_t hp() const { return (ho - 1) * sh + (kh - 1) * dh + 1; }
  // Row mode: whole vectors of output, plus the taps' reach within a phase. Flat: the padded width.
  int64_t rs() const { return flat ? wo + (kw - 1) * dw : (wo + lanes - 1) / lanes * lanes + (kw - 1) * dw / sw; }
  int64_t flat_vectors() const { return (ho * rs() + lanes - 1) / lanes; }
  bool flat_junk() const { return flat && kw > 1; }
  // The last vector's taps read past the last plane by at most this many floats.
  int64_t tail_floats() const { return flat ? lanes + (kw - 1) * dw : rs(); }
  int64_t padded_floats() const { return cg * sw * hp() * rs() + tail_floats(); }
  // A block of channels (at most 31: one vector register each) of flat output.
  int64_t flat_buffer_floats() const { return flat_junk() ? std::min<int64_t>(og, 31) * flat_vectors() * lanes : 0; }
};

// Whether the direct kernel takes geometry g: stride 1, or with `strided` (the forward pass) any
// row stride and a column stride of 1 or 2; sizes its code can address.
bool direct_conv_applies(const ConvGeom& g, bool strided = false);
// Whether its flat mode takes g at `lanes` floats a vector (stride 1; a short flat row: its code
// is unrolled along the row).
bool direct_flat_applies(const ConvGeom& g, int lanes);
// Whether the direct weight-gradient kernel takes it (the same, and rows of at most 16 vectors,
// whose loop it unrolls).
bool direct_weight_applies(const ConvGeom& g);
// The kernel for `isa` (AVX-512 code when d.lanes is 16, else AVX2+FMA) from `cache`. Null when
// isa is REF.
Result<std::shared_ptr<const JitKernel>> direct_conv_kernel(const DirectConv& d, Isa isa, KernelCache& cache);

// The weight gradient of one image and group (AVX2+FMA code at both levels; d.lanes must be 8):
// in[0] the padded input as above, in[1] dy
// [og, ho, wo]; out[0] partial sums [og, cg, kh, kw][8] (one vector per weight), which the kernel
// adds to: dw[o, c, i, j] is the sum of the 8 lanes after the last image. Lanes past wo multiply
// zeros (dy and x are loaded masked), so a non-finite input lands only where it belongs.
Result<std::shared_ptr<const JitKernel>> direct_weight_kernel(const DirectConv& d, Isa isa, KernelCache& cache);

// Copies channels [0, cg) of `x` ([cg, h, w]) into `xp` ([cg, sw, hp, rs], zero-filled first) at
// offset (ph, pw) of each channel's padded image, its columns dealt to the sw phases; rows and
// columns past what the taps read are left out.
void direct_conv_pad(const DirectConv& d, const float* x, int64_t h, int64_t w, int64_t ph, int64_t pw, float* xp);

}  // namespace nnasm
