// Direct convolution: a generated kernel that reads a zero-padded copy of the input and keeps a
// block of output channels × output columns in vector registers over every input channel and
// tap, so that nothing is unrolled into columns (im2col) or packed. It is what small channel
// counts need (1–16, game and audio models, LeNet, a CNN's 3-channel stem), where im2col + GEMM
// spends more time moving the input than multiplying. The CONV2D forward pass at strides 1 and 2
// and, with the weights flipped, the data gradient of a stride-1 convolution use it
// (ops/conv/conv_jit.cpp). At column stride 2 the padded copy keeps each row's even and odd
// columns in two planes, so that the columns an output vector's tap reads are consecutive.
#pragma once
#include <cstdint>

#include "isa/activation.h"
#include "jit/kernel.h"
#include "ops/conv/conv_geom.h"

namespace nnasm {

// One call of the kernel: one image and group. in[0] the padded input [cg, sw, hp, rs] (sw planes
// of column phases, `rs` floats a row, zero outside the image; readable up to rs floats past the
// last row), in[1] the weights [og, cg, kh, kw], in[2] the bias [og] (when `bias`); out[0] y
// [og, ho, wo]. Output (oy, ox), tap (i, j) reads padded row oy·sh + i·dh of phase (j·dw) mod sw
// at column ox + ⌊j·dw / sw⌋.
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
  int64_t hp() const { return (ho - 1) * sh + (kh - 1) * dh + 1; }
  // Whole vectors of output, plus the taps' reach within a phase.
  int64_t rs() const { return (wo + lanes - 1) / lanes * lanes + (kw - 1) * dw / sw; }
  int64_t padded_floats() const { return cg * sw * hp() * rs() + rs(); }
};

// Whether the direct kernel takes geometry g: stride 1, or with `strided` (the forward pass) any
// row stride and a column stride of 1 or 2; sizes its code can address.
bool direct_conv_applies(const ConvGeom& g, bool strided = false);
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
