// The direct convolution kernel of CONV2D_NCHWC (ops/conv/conv2d_nchwc.cpp) over the blocked
// channel layout (ops/layout/nchwc.h): a vector holds one pixel's b output channels, so an
// output pixel never wastes lanes, whatever the map's width. A register block of OB output
// blocks × R output pixels accumulates over the input blocks, their b lanes and the taps: per
// input lane and tap, OB weight vectors are loaded once and each pixel's input lane is broadcast
// into OB FMAs (on AVX-512 as the FMA's {1to16} memory operand). The input is read in place: the
// generator knows where each pixel of a tile lies, so a tap that falls in the padding is left out
// of that pixel's code (no padded copy, no masks), and tiles whose code is the same but for a
// shift of the pointers (the middle rows, a row's middle segments, a flat row's chunks) share it
// in a loop.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "isa/activation.h"
#include "jit/kernel.h"
#include "ops/conv/conv_geom.h"

namespace nnasm {

// One call computes images [n0, n1) × output blocks [ob0, ob1) × output pixels [p0, p1) (flat,
// oy·wo + ox) of the whole operands: in[0] x [N, cb, h, w, b], in[1] the packed weights
// [ob, cb, kh, kw, b, b], in[2] the bias (bias_channels > 0), the last input the residual r
// shaped as y (residual), out[0] y [N, ob, ho, wo, b]. Each output element is the bias (0 past
// `bias_channels`), then the FMAs in (input block, lane, tap row, tap column) order, then r's
// element added, then the activation: the same bits whatever the part.
struct NchwcConv {
  int lanes = 16;  // b: 16 (AVX-512 code) or 8 (AVX2 code)
  int64_t cb = 1, h = 1, w = 1;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  int64_t ho = 1, wo = 1;
  int64_t y_blocks = 1;  // output blocks of y (its image stride)
  int64_t n0 = 0, n1 = 1, ob0 = 0, ob1 = 1, p0 = 0, p1 = 1;
  int64_t bias_channels = 0;  // the bias's length O (0: no bias)
  bool residual = false;      // the last input r, shaped as y, added before the activation
  Activation act = Activation::NONE;
  float act_alpha = 0;
};

// The geometry of g (sizes in channels: c = cb·b, o = y_blocks·b) at `lanes`, for the whole
// output; the caller narrows it to a part.
NchwcConv nchwc_conv_geometry(const ConvGeom& g, int lanes);
// Whether the generated code can address d (offsets below 2³⁰ bytes).
bool nchwc_conv_applies(const NchwcConv& d);
// The kernel for `isa`: AVX-512 code for b = 16 at AVX512, AVX2 code for b = 8 at AVX2 and above;
// null otherwise (b = 16 under an AVX2 cap, REF), where the reference runs.
Result<std::shared_ptr<const JitKernel>> nchwc_conv_kernel(const NchwcConv& d, Isa isa, KernelCache& cache);

}  // namespace nnasm
