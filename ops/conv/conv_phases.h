// Stride-2 convolutions of few input channels (a CNN's stem: 3 channels, 7×7 or 3×3 at stride 2)
// as stride-1 ones, so that the direct kernel (conv_direct.h) runs them instead of im2col + GEMM,
// whose column matrix (k × p floats: 7 MB for ResNet's stem) does not stay in cache. Splitting the
// zero-padded input into its four phases — rows and columns even or odd — gives 4·C channels of
// half the size; tap (i, j) of the stride-2 kernel reads phase (i mod 2, j mod 2) at offset
// (⌊i/2⌋, ⌊j/2⌋) of the stride-1 one, so the weights become [O, 4·C, ⌈kh/2⌉, ⌈kw/2⌉] with zeros
// where 2·i' + py ≥ kh. The zeros cost multiply-adds (7×7: 64 taps for 49), which the direct
// kernel's speed on few channels pays back.
#pragma once
#include <cstdint>

#include "ops/conv/conv_direct.h"
#include "ops/conv/conv_geom.h"

namespace nnasm {

// Whether g's forward pass goes through phases: stride 2 both ways, no dilation, one group, at most
// 4 input channels, and a stride-1 geometry the direct kernel takes.
bool phases_apply(const ConvGeom& g);
// The stride-1, unpadded geometry over the phases (ho, wo as g's).
ConvGeom phase_geometry(const ConvGeom& g);
// The direct kernel's padded input (DirectConv d of phase_geometry(g): [4·C, hp, rs], zero
// outside the image) from one image x ([C, H, W]) of g. Does not allocate.
void phase_split_input(const ConvGeom& g, const DirectConv& d, const float* x, float* xp);
// The weights of output channels [o0, o0 + count) of w ([O, C, kh, kw]) over the phases:
// [count, 4·C, ⌈kh/2⌉, ⌈kw/2⌉]. Does not allocate.
void phase_split_weights(const ConvGeom& g, const float* w, int64_t o0, int64_t count, float* wp);

}  // namespace nnasm
