// Depthwise convolution (groups = channels, one output channel each), column stride 1 or 2, any
// row stride: a generated kernel that reads the image in place — the padding is never copied:
// each tap's vector is loaded with a lane mask that drops the columns outside the row, and the
// rows outside the image are left out of the code — and keeps a block of output rows × output
// vectors of one channel in registers over the taps. At column stride 2 a shuffle picks the even
// (or odd) lanes of two input vectors for each tap. The general direct kernel (conv_direct.h)
// would run once per channel on a padded copy with one input channel's worth of work per call,
// which is what made depthwise slow; im2col + a one-row GEMV per channel (what wider column
// strides take) first copies kh·kw values for every output.
#pragma once
#include <cstdint>

#include "isa/activation.h"
#include "jit/kernel.h"
#include "ops/conv/conv_geom.h"

namespace nnasm {

// One call: `c` consecutive channels of one image. in[0] x [c, h, w], in[1] the weights
// [c, kh, kw], in[2] the bias [c] (when `bias`); out[0] y [c, ho, wo]. Each output element is
// (bias +) the taps in (i, j) order, so a split into channel ranges gives the same bits.
struct DepthwiseConv {
  int64_t c, h, w, ho, wo, kh, kw, sh, sw, dh, dw, ph, pw;
  bool bias = false;
  Activation act = Activation::NONE;
  float act_alpha = 0;
};

// Whether the depthwise kernel takes geometry g: groups = channels = outputs, column stride 1 or
// 2, and padding and sizes the generated code can address.
bool depthwise_applies(const ConvGeom& g);
// The geometry of g's forward pass over `channels` channels (bias and activation left unset).
DepthwiseConv depthwise_geometry(const ConvGeom& g, int64_t channels);
// The kernel for `isa` from `cache`; null when isa is REF.
Result<std::shared_ptr<const JitKernel>> depthwise_kernel(const DepthwiseConv& d, Isa isa, KernelCache& cache);

}  // namespace nnasm
