// The generated forward kernel of MAXPOOL2D and AVGPOOL2D (ops/pool/pool_jit.cpp) for unpadded
// windows at column stride 1 or 2, bitwise equal to the reference kernels of pool2d.cpp.
#pragma once
#include <memory>

#include "jit/kernel.h"
#include "ops/pool/pool_geom.h"

namespace nnasm {

// Whether the kernel covers geometry p (no padding, no ceil_mode partial window, column stride 1
// or 2, rows of at most 256 outputs, at most 16 taps).
bool pool_jit_applies(const PoolGeom& p);
// How many parts (disjoint ranges of planes) the kernel splits into on `threads` threads.
int pool_jit_parts(const PoolGeom& p, int threads);
// The kernel for planes [planes·part/n_parts, planes·(part+1)/n_parts) of p, max or average,
// from `cache`; null when p is not covered or isa is REF.
Result<std::shared_ptr<const JitKernel>> pool_jit_kernel(const PoolGeom& p, bool max, Isa isa, int part, int n_parts,
                                                         KernelCache& cache);

// MAXPOOL2D_BWD's generated kernel (ops/pool/maxpool_bwd_jit.cpp): 2×2 windows at stride 2,
// unpadded, even image sizes, rows of at most 512 outputs; bitwise the reference.
bool maxpool_bwd_jit_applies(const PoolGeom& p);
// The kernel for p from `cache`; null when p is not covered or isa is REF.
Result<std::shared_ptr<const JitKernel>> maxpool_bwd_jit_kernel(const PoolGeom& p, Isa isa, KernelCache& cache);

}  // namespace nnasm
