// The generated pooling kernels: the forward kernel of MAXPOOL2D and AVGPOOL2D
// (ops/pool/pool_jit.cpp) for any stride, padding and ceil_mode and windows up to the limits
// below, bitwise equal to the reference kernels of pool2d.cpp; those of the blocked _NCHWC ops;
// MAXPOOL2D_BWD's.
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

// The generated kernels of MAXPOOL2D_NCHWC and AVGPOOL2D_NCHWC (ops/pool/pool_nchwc_jit.cpp)
// over planes of b-channel pixel vectors, bitwise the reference kernels of pool_nchwc.cpp: b = 16
// as AVX-512 code (isa AVX512 only), b = 8 as AVX2 code; windows pool_jit_window_fits unrolls,
// planes under 2^28 floats. How many parts (disjoint ranges of planes: images × channel blocks)
// the kernel for p splits into on `threads` threads; 1 where there is no kernel.
int pool_nchwc_jit_parts(const PoolGeom& p, int64_t b, Isa isa, int threads);
// The kernel for planes [planes·part/n_parts, planes·(part+1)/n_parts) of p, max or average
// (`include_pad`: count_include_pad), from `cache`; null where not covered or isa is REF.
Result<std::shared_ptr<const JitKernel>> pool_nchwc_jit_kernel(const PoolGeom& p, int64_t b, bool max, bool include_pad,
                                                               Isa isa, int part, int n_parts, KernelCache& cache);
// GLOBAL_AVGPOOL_NCHWC's generated kernel over `planes` planes of `pixels` vectors of b floats,
// its parts and the kernel for one of them, as above.
int global_avgpool_nchwc_jit_parts(int64_t planes, int64_t pixels, int64_t b, Isa isa, int threads);
Result<std::shared_ptr<const JitKernel>> global_avgpool_nchwc_jit_kernel(int64_t planes, int64_t pixels, int64_t b,
                                                                         Isa isa, int part, int n_parts,
                                                                         KernelCache& cache);

// MAXPOOL2D_BWD's generated kernel (ops/pool/maxpool_bwd_jit.cpp): 2×2 windows at stride 2,
// unpadded, even image sizes, rows of at most 512 outputs; bitwise the reference.
bool maxpool_bwd_jit_applies(const PoolGeom& p);
// The kernel for p from `cache`; null when p is not covered or isa is REF.
Result<std::shared_ptr<const JitKernel>> maxpool_bwd_jit_kernel(const PoolGeom& p, Isa isa, KernelCache& cache);

}  // namespace nnasm
