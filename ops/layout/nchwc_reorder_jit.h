// The generated kernels of TO_NCHWC and TO_NCHW (ops/layout/nchwc_reorder_jit.cpp): whole
// vectors moved between the plain layout f32[N, C, H, W] and the blocked one
// f32[N, ⌈C/b⌉, H, W, b] (ops/layout/nchwc.h), bitwise what the reference kernels write.
#pragma once
#include <cstdint>
#include <memory>

#include "jit/kernel.h"
#include "ops/layout/nchwc.h"

namespace nnasm {

// One reorder's sizes: n images of c channels of `pixels` (H·W) floats, blocks of b channels.
struct NchwcGeom {
  int64_t n, c, pixels, b;
  int64_t blocks() const { return nchwc_blocks(c, b); }  // per image
  int64_t total_blocks() const { return n * blocks(); }  // the (n, channel block) pairs
};

// Whether the kernel covers g: a block of 8 or 16 and planes under 2^25 floats (a block's
// planes are addressed by 32-bit displacements).
bool nchwc_reorder_jit_applies(const NchwcGeom& g);
// How many parts (disjoint ranges of (n, channel block) pairs) the kernel splits into on
// `threads` threads: 1 for a tensor under 64 Ki floats, where the hand-off costs more than the
// copy.
int nchwc_reorder_jit_parts(const NchwcGeom& g, int threads);
// The kernel for the pairs [total·part/n_parts, total·(part+1)/n_parts) of g, from plain to
// blocked (`to_blocked`, TO_NCHWC) or back (TO_NCHW), from `cache`. b = 16 at AVX-512 is zmm
// code; b = 8 at either level, and b = 16 at AVX2, are AVX2 code in ymm (8 channels at a time).
// Null when g is not covered or isa is REF.
Result<std::shared_ptr<const JitKernel>> nchwc_reorder_jit_kernel(const NchwcGeom& g, bool to_blocked, Isa isa,
                                                                  int part, int n_parts, KernelCache& cache);

}  // namespace nnasm
