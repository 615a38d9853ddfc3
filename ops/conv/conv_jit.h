// The JIT side of the CONV2D family: one bound kernel per instruction (jit/kernel.h) whose
// C++ driver walks the images and groups, runs im2col / col2im, and calls generated kernels — the
// GEMM of each pass (jit/gemm.h) and, forward, an elementwise epilogue for the bias and
// the activation. The scratch layout, shared with the reference kernels: cols (k × p floats,
// rounded up to whole cache lines), then the GEMM's own scratch.
#pragma once
#include <memory>

#include "jit/kernel.h"
#include "ops/conv/conv_geom.h"
#include "ops/linalg/gemm.h"
#include "ops/op.h"

namespace nnasm {

// FORWARD: y = act(W·cols + b). BACKWARD_DATA: cols = Wᵀ·dY, scattered into dx (col2im).
// BACKWARD_WEIGHT: dW += dY·colsᵀ over the images (the GEMM accumulates).
enum class ConvPass { FORWARD, BACKWARD_DATA, BACKWARD_WEIGHT };

// Floats of the cols buffer at the start of the scratch (a multiple of 16).
int64_t conv_cols_floats(const ConvGeom& g);
// Scratch bytes for a reference kernel whose GEMM is `s`.
size_t conv_ref_scratch(const ConvGeom& g, const GemmShape& s);
// Scratch bytes for the JIT kernel of `pass` (any ISA level).
size_t conv_jit_scratch(const ConvGeom& g, ConvPass pass);
// Parallel parts: the forward and data-gradient passes split the images (each image computed
// exactly as by one part); a single image's forward pass, ungrouped or depthwise, splits its
// output channels instead (at least 8 a part); the weight gradient, a sum over the images, runs
// as one part.
int conv_jit_parts(const ConvGeom& g, ConvPass pass, int threads);
// The kernel for `r` (its part of the images), from `cache`. Errors: a GEMM or epilogue kernel
// that could not be generated; a null kernel when the GEMM case is not covered.
// With `u_given` (CONV2D_WINOGRAD's forward pass): in[1] holds the weights transformed for
// F(2×2, 3×3), [16, O, C], and g must fit it (winograd_fits); null when the case is not covered.
Result<std::shared_ptr<const JitKernel>> conv_jit(const JitRequest& r, KernelCache& cache, ConvPass pass,
                                                  const ConvGeom& g, bool u_given = false);
// Scratch bytes for CONV2D_WINOGRAD's JIT kernel.
size_t conv_winograd_scratch(const ConvGeom& g);

}  // namespace nnasm
