// The generated forward kernel of MAXPOOL2D and AVGPOOL2D (ops/pool/pool_jit.cpp) for any
// stride, padding and ceil_mode and windows up to the limits below, bitwise equal to the
// reference kernels of pool2d.cpp.
#pragma once
#include <memory>

#include "jit/kernel.h"
#include "ops/pool/pool_geom.h"

namespace nnasm {

// Whether the kernel covers geometry p: windows of at most 16 rows, 16 columns and 64 taps (the
// taps are unrolled), input planes (with a window's and a stride's rows more) and output planes
// under 2^28 elements (32-bit offsets). Any stride, padding and ceil_mode.
bool pool_jit_applies(const PoolGeom& p);
// How many parts (disjoint ranges of planes) the kernel splits into on `threads` threads.
int pool_jit_parts(const PoolGeom& p, int threads);
// The kernel for planes [planes·part/n_parts, planes·(part+1)/n_parts) of p, max or average
// (`include_pad`: AVGPOOL2D's count_include_pad), AVX2 or AVX-512 code as isa says, from
// `cache`; null when p is not covered or isa is REF.
Result<std::shared_ptr<const JitKernel>> pool_jit_kernel(const PoolGeom& p, bool max, bool include_pad, Isa isa,
                                                         int part, int n_parts, KernelCache& cache);

// MAXPOOL2D_BWD's generated kernel (ops/pool/maxpool_bwd_jit.cpp): 2×2 windows at stride 2,
// unpadded, even image sizes, rows of at most 512 outputs; bitwise the reference.
bool maxpool_bwd_jit_applies(const PoolGeom& p);
// The kernel for p from `cache`; null when p is not covered or isa is REF.
Result<std::shared_ptr<const JitKernel>> maxpool_bwd_jit_kernel(const PoolGeom& p, Isa isa, KernelCache& cache);

}  // namespace nnasm
