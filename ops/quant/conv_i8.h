// CONV2D_I8's JIT (ops/quant/conv_i8_jit.cpp) as its op file and the tests reach it: the scratch,
// the kernel with the use of vpdpbusd chosen by the caller (so that tests can run the widening
// kernel, which CPUs without VNNI get, on a CPU that has it), and the geometry of an instruction.
#pragma once
#include <memory>

#include "isa/instruction.h"
#include "isa/status.h"
#include "jit/cpu.h"
#include "jit/kernel.h"
#include "ops/conv/conv_geom.h"
#include "ops/op.h"

namespace nnasm {

// The geometry of CONV2D_I8 `ins` at input types `in` (as shape inference accepted them).
ConvGeom conv2d_i8_geom(const Instruction& ins, const TensorType* in);
// Whether `ins` has x_scale=given (sx and zp its last two inputs), and whether its inputs
// (n_in of them) hold a bias (the fifth).
bool conv2d_i8_given(const Instruction& ins);
bool conv2d_i8_has_bias(const Instruction& ins, size_t n_in);
// The reference kernel's scratch.
size_t conv2d_i8_ref_scratch(const Instruction& ins, const TensorType* in);
// The op's scratch: the larger of the reference's and the JIT kernel's.
size_t conv2d_i8_scratch(const Instruction& ins, const TensorType* in, const TensorType* out);

// The kernel for CONV2D_I8 `ins` at input types `in` on `isa` (AVX2 or AVX512), with vpdpbusd
// when `vnni` (where linear_i8_has_vnni(isa); otherwise a null kernel). A null kernel also where
// the op has no JIT case (offsets past 1 GiB). Part `part` of `n_parts` computes its slice of the
// output pixels (whole vectors), each value as the whole kernel does. Its scratch is
// conv2d_i8_scratch's. Allocates; thread-safe.
Result<std::shared_ptr<const JitKernel>> conv2d_i8_kernel(const Instruction& ins, const TensorType* in, Isa isa,
                                                          bool vnni, KernelCache& cache, int part = 0,
                                                          int n_parts = 1);
// The JIT hook: conv2d_i8_kernel with vpdpbusd where the CPU has it.
Result<std::shared_ptr<const JitKernel>> conv2d_i8_jit(const JitRequest& r, KernelCache& cache);
// The parts hook: the pixels split for a large convolution.
int conv2d_i8_parts(const JitRequest& r, int threads);

}  // namespace nnasm
