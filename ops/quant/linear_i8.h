// LINEAR_I8's generated kernel with the use of vpdpbusd chosen by the caller, and the reference
// arithmetic its tests share. The op's JIT hook uses vpdpbusd where the CPU has it (AVX512_VNNI at
// the AVX-512 level, AVX-VNNI at the AVX2 level); the choice is open here so that tests can run
// the widening kernel, which CPUs without VNNI get, on a CPU that has it.
#pragma once
#include <memory>

#include "isa/instruction.h"
#include "isa/status.h"
#include "jit/cpu.h"
#include "jit/kernel.h"
#include "jit/vecgen.h"

namespace nnasm {

// Whether `isa` has a vpdpbusd on this CPU: AVX512_VNNI for AVX512, AVX-VNNI for AVX2.
bool linear_i8_has_vnni(Isa isa);

// The kernel for LINEAR_I8 `ins` at input types `in` (x, wp, colsum, scale, b as shape inference
// accepted them) on `isa` (AVX2 or AVX512), with vpdpbusd when `vnni` (where
// linear_i8_has_vnni(isa); otherwise a null kernel). A null kernel also where the op has no JIT
// case (an empty operand, offsets past 1 GiB). Part `part` of `n_parts` computes its slice of the
// output columns (whole vectors), each value as the whole kernel does. Its scratch is the op's
// scratch hook's size. Allocates; thread-safe.
Result<std::shared_ptr<const JitKernel>> linear_i8_kernel(const Instruction& ins, const TensorType* in, Isa isa,
                                                          bool vnni, KernelCache& cache, int part = 0,
                                                          int n_parts = 1);

// The widening kernels' pairs of k (vpmaddwd's two sums per column or pixel) in accumulators a
// (the vector's first half of columns) and b (its second) added, the columns in order, into a.
// LINEAR_I8's and CONV2D_I8's; clobbers vector registers 0 and 1 at AVX-512.
void i8_combine_pairs(VecGen& v, const Xbyak::Xmm& a, const Xbyak::Xmm& b);

}  // namespace nnasm
