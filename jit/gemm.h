// Generated GEMM and GEMV for MATMUL and LINEAR: C = op(A)·op(B) [+ bias row], row-major, fp32,
// generated for the exact M, N, K, transposes, batch shapes and epilogue of one instruction.
//
// Three kernel shapes, chosen per instruction (jit/gemm_plan.h says how):
//   tiled   a register-tiled MR×NR micro-kernel (AVX-512 up to 14×32, AVX2 up to 6×16)
//           broadcasts A against B and writes C with a fused epilogue, K blocked so a block of
//           B stays in L2. The operands are read in place where their rows are under a page
//           apart; otherwise B (and always Bᵀ) is packed into NR-wide column panels in the
//           scratch buffer, and each MR-row panel of A (or Aᵀ) k-major so it stays in L1.
//   gemv    up to 14 rows (AVX2: 5) and B not transposed: the same micro-kernel with MR = M and
//           a wide NR, streaming B (row-major K×N) once, unpacked.
//   dot     up to 8 rows and B transposed: rows of Bᵀ are dotted with up to 4 rows of A at a
//           time, several rows of Bᵀ at once, and reduced horizontally.
// Every kernel has the one calling convention: in[0] = A, in[1] = B, in[2] = bias (LINEAR),
// out[0] = C, scratch = the buffer jit_gemm_scratch_bytes asked for. Results are bitwise
// reproducible for a given ISA (the summation order is fixed by the generated code); they are not
// bitwise equal to the reference.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "isa/shape.h"
#include "isa/status.h"
#include "jit/act_snippet.h"
#include "jit/cpu.h"
#include "jit/kernel.h"

namespace nnasm {

struct GemmJitDesc {
  std::string op;  // "matmul" or "linear": the kernel's name says which
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;  // A stored [K,M] / B stored [N,K]
  bool bias = false;                      // add in[2] (f32[N]) to every row of C
  // Applied to every element of C after the whole sum (bias included), with its immediate:
  // C = act(op(A)·op(B) + bias). (Few rows with transposed B then take the tiled kernel,
  // not the dot kernel.)
  Activation act = Activation::NONE;
  float act_alpha = 0;
  // beta = 1: C += op(A)·op(B), adding into what C holds (gradient accumulation). Not with a
  // bias or an activation (a null kernel); never the dot kernel (the tiled one serves Bᵀ).
  bool accumulate = false;
  // Batch dimensions of C and of the operands (numpy broadcasting, as MATMUL); rank 0 for none.
  Shape batch, a_batch, b_batch;
  // Only these columns of C, [n_begin, n_end) (a parallel part's slice); n_end 0: all of them.
  int64_t n_begin = 0, n_end = 0;
  // Only these rows of C, [m_begin, m_end), counted after batch dimensions fold into M (a
  // parallel part's slice of a tiled product); m_end 0: all of them.
  int64_t m_begin = 0, m_end = 0;
  // Part k_part of k_parts of a GEMV split along K (a parallel part's share of the K segments;
  // see jit_gemm_parts); k_parts 1: the whole.
  int k_part = 0, k_parts = 1;
  // A tiled product blocks K in at least two blocks where a K split could run (JitRequest::
  // reads_trained_param), so that two threads can split it along K and one sums alike.
  bool two_k_blocks = false;
};

// Scratch bytes the generated kernel for `d` needs on any ISA level (so that a scratch hook,
// which does not know the level, can ask for enough). Thread-safe; does not allocate much.
size_t jit_gemm_scratch_bytes(const GemmJitDesc& d);

// The kernel for `d` on `isa` (AVX2 or AVX512), from `cache` or generated into it. A null kernel
// when the case is not covered (an operand over 2 GiB, isa REF); an error when generation
// failed. Allocates; thread-safe (the cache locks).
Result<std::shared_ptr<const JitKernel>> jit_gemm(const GemmJitDesc& d, Isa isa, KernelCache& cache);

// Parallel parts: how many the product `d` is worth splitting into for `threads` threads on
// `isa`. A GEMV whose B is large is summed in K segments (fixed by the shape, so that one
// thread, and each column, sums in the same order). It splits N into slices of whole vectors,
// each part summing its columns' segments in order, so that each part writes the final values
// of its own columns (and the next layer's parts can start on them: SpanFn); one vector wide,
// too small to split its columns, or with B too large for one core's L2 (CpuInfo::l2_bytes) but
// not for two, its parts take consecutive segments instead, each streaming its own rows of B,
// and the last part to finish adds the others' sums into C. A tiled product with at least as
// many rows as columns splits M, so that each part writes its own contiguous rows of C (the
// weight gradient an optimizer step then updates in the same halves); from 4 parts, one that
// packs B splits into a grid of row blocks and column slices instead, so that B is not packed
// once per part. Other products split N into slices, each a multiple of the micro-kernel width.
// 1 for small products (B under 256 KiB for a K split, under 256 KFLOP for a GEMV split in N,
// 1 MFLOP tiled) and for the dot kernel. Each element of C is computed exactly as by the whole
// kernel.
int jit_gemm_parts(const GemmJitDesc& d, Isa isa, int threads);
// `d` restricted to part `part` of `n_parts` (as jit_gemm_parts chose n_parts; with `along_k`, a
// GEMV's K segments split among the parts whatever its width: jit_gemm then has no kernel unless
// there are as many segments as parts). Its kernel's scratch is at most
// jit_gemm_scratch_bytes(d); a K split's parts meet in KernelArgs::shared and count themselves
// in KernelArgs::state->parts_done.
GemmJitDesc jit_gemm_part(const GemmJitDesc& d, Isa isa, int part, int n_parts, bool along_k = false);
// For a single-row product (C is [1, N], A a row of K): the elements of A (k 0, not output) that
// the kernel for `d` (a part or the whole) reads, or of C (output) whose final values it writes
// by itself, as SpanFn says. False for other operands and shapes, and for a K split's output.
bool jit_gemm_span(const GemmJitDesc& d, Isa isa, bool output, int k, int64_t* begin, int64_t* end);

}  // namespace nnasm
