// DWCONV2D_NCHWC's geometry and its generated kernel (ops/conv/dwconv_nchwc_jit.cpp): a depthwise
// convolution over the blocked channel layout of ops/layout/nchwc.h, where one vector is one
// pixel's b channels, so every tap is one whole-vector FMA whatever the map size, and a tap that
// falls in the padding is left out of the code instead of being masked.
#pragma once
#include <cstdint>
#include <memory>

#include "isa/activation.h"
#include "isa/instruction.h"
#include "isa/shape.h"
#include "jit/kernel.h"

namespace nnasm {

struct DwNchwc {
  int64_t n, cb, c, b;   // images, channel blocks, channels (≤ cb·b), block size
  int64_t h, w, ho, wo;  // input and output maps
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  bool bias = false;
  Activation act = Activation::NONE;
  float act_alpha = 0;
  int64_t taps() const { return kh * kw; }
  int64_t in_plane() const { return h * w * b; }    // floats of one image's channel block
  int64_t out_plane() const { return ho * wo * b; }
};

// The geometry of a DWCONV2D_NCHWC instruction on operand types `in` (already checked by its
// shape inference).
DwNchwc dwconv_nchwc_geometry(const Instruction& ins, const TensorType* in);

// Whether the generated kernel covers d: byte offsets within 32 bits and a bounded amount of
// unrolled code (the rows and column blocks that touch the padding are unrolled).
bool dwconv_nchwc_jit_applies(const DwNchwc& d);

// The kernel for output rows [r0, r1) of `blocks` consecutive channel blocks of one image, on
// b = 16 with AVX-512 code or b = 8 with AVX2 code (`isa` says which the machine allows; null when
// it allows none for d.b). One call: in[0] x at the first block's plane [H, W, b], in[1] its
// packed weights [kh, kw, b], in[2] its bias block (b floats, every lane readable; unused without
// bias), in[3] an int64_t holding `blocks` (≥ 1); out[0] y at the first block's plane
// [Ho, Wo, b], of which only rows [r0, r1) are written. Each output is the bias, then the taps
// in (i, j) order, then the activation: the same bits whatever rows or blocks a call covers.
Result<std::shared_ptr<const JitKernel>> dwconv_nchwc_kernel(const DwNchwc& d, int64_t r0, int64_t r1, Isa isa,
                                                             KernelCache& cache);

}  // namespace nnasm
