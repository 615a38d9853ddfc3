// LINEAR_BF16's generated kernel with the use of vdpbf16ps chosen by the caller. The op's JIT hook
// uses it where the CPU has AVX512_BF16; the choice is open here so that tests can run the
// widening AVX-512 kernel, which CPUs without AVX512_BF16 get, on a CPU that has it.
#pragma once
#include <memory>

#include "isa/instruction.h"
#include "isa/status.h"
#include "jit/cpu.h"
#include "jit/kernel.h"

namespace nnasm {

// The kernel for LINEAR_BF16 `ins` at input types `in` (x, W, b as shape inference accepted them)
// on `isa` (AVX2 or AVX512), with vdpbf16ps when `dpbf16` (AVX512 on a CPU with AVX512_BF16;
// otherwise a null kernel). A null kernel also where the op has no JIT case (an empty operand,
// offsets past 2 GiB). Its scratch is the op's scratch hook's size. `part` of `n_parts`: that
// parallel part's rows and columns of y only (the op's parts hook says how many there are; a count
// it would not choose gets a null kernel). Allocates; thread-safe.
Result<std::shared_ptr<const JitKernel>> linear_bf16_kernel(const Instruction& ins, const TensorType* in, Isa isa,
                                                            bool dpbf16, KernelCache& cache, int part = 0,
                                                            int n_parts = 1);

}  // namespace nnasm
