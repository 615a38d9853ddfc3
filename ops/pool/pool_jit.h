// The generated pooling kernels: the forward kernel of MAXPOOL2D and AVGPOOL2D
// (ops/pool/pool_jit.cpp) for any stride, padding and ceil_mode and windows up to the limits
// below, bitwise equal to the reference kernels of pool2d.cpp; MAXPOOL2D_BWD's.
#pragma once
#include <memory>

#include "jit/kernel.h"
#include "jit/vecgen.h"
#include "ops/pool/pool_geom.h"

namespace nnasm {

// Emits acc = fold(acc, x), the reference kernels' fold of a tap into an accumulator: the max's
// pool_max_fold (x > acc or x NaN: x), or acc + x. Clobbers t (AVX2 max) or k2 (AVX-512 max).
void pool_fold(VecGen& v, bool max, const Xbyak::Xmm& acc, const Xbyak::Xmm& x, const Xbyak::Xmm& t);
// Whether p's window is one a generated pooling kernel unrolls: at most 16 rows, 16 columns and
// 64 taps.
bool pool_jit_window_fits(const PoolGeom& p);
// How many parts (disjoint ranges of `planes` planes, each part at least one) a pooling kernel
// that reads `reads` floats in all splits into on `threads` threads: 1 where a part would read
// too little to pay for the hand-off.
int pool_plane_parts(int64_t planes, int64_t reads, int threads);

// Whether the kernel covers geometry p: windows pool_jit_window_fits unrolls, input planes (with
// a window's and a stride's rows more) and output planes under 2^28 elements (32-bit offsets).
// Any stride, padding and ceil_mode.
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
