// How one GEMM is generated (internal to jit/gemm*.cpp): the kernel shape (tiled, gemv,
// dot), the tile and the cache blocking, the batch loops, and the scratch it needs, decided from
// the exact shapes at prepare time. Plain data, so that the decision can be tested and printed
// apart from the code it leads to.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "jit/gemm.h"

namespace Xbyak {
class CodeGenerator;
}

namespace nnasm {
namespace gemm {

enum class Mode { TILED, GEMV, DOT };

// One batch loop of the generated kernel (outermost first): `count` iterations, each advancing
// the A, B and C base pointers by these many bytes (0 along a broadcast dimension).
struct BatchLoop {
  int64_t count, a_step, b_step, c_step;
};

struct Plan {
  Isa isa = Isa::AVX512;
  int vlen = 16;   // floats per vector register
  int nregs = 32;  // vector registers
  Mode mode = Mode::TILED;
  // The product after folding batch dimensions into M where that is possible.
  int64_t m = 0, n = 0, k = 0;
  bool ta = false, tb = false, bias = false;
  Activation act = Activation::NONE;  // applied in the last K block's epilogue
  float act_alpha = 0;
  bool accumulate = false;  // every K block adds into C (GemmJitDesc::accumulate)
  // Row strides of B (not transposed) and C in floats: the whole N, which n is less than for a
  // part's slice; and the slice's first column (or row), in bytes into C (and A, B, bias) at
  // entry.
  int64_t ldb = 0, ldc = 0;
  int64_t a_skip = 0, b_skip = 0, c_skip = 0, bias_skip = 0;
  std::vector<BatchLoop> loops;
  // A(i, p) lies at A + i·a_rs + p·a_ks bytes (row-major or transposed storage alike).
  int64_t a_rs = 0, a_ks = 0;
  // A is packed per row panel into k-major rows of ap_ks bytes (mr floats, padded) at
  // scratch + ap_offset, so that the panel is contiguous and stays in L1 while the column panels
  // pass: unpacked, its rows (or with transA its k rows) may all fall into one L1 set (a stride
  // of 4 KiB).
  bool pack_a = false;
  int64_t ap_ks = 0;
  size_t ap_offset = 0;
  // B is packed per K×N block into NR-wide panels in the scratch. Unpacked, the micro-kernel
  // reads row-major B in place, ldb floats per k (GEMV always; TILED when its rows are short:
  // make_plan says when).
  bool pack_b = false;
  // TILED, B read in place: each k step also prefetches B's row this many bytes ahead into L1
  // (0: none). Set where B is larger than half an L2, so that the first row panel to pass over
  // a block of B (which brings it from L3, its row stride defeating the hardware prefetchers'
  // page-bound streams) does not wait for each line.
  int64_t b_prefetch = 0;
  // GEMV with a large B: K is summed in kseg segments of kc rows (the last may be shorter), and
  // each segment's sum is added to C in order: C = act((…((seg 0 + bias) + seg 1) + …) + seg
  // kseg−1), one thread or several alike, and a slice of the columns (a part of a column split)
  // as the whole.
  int kseg = 1;
  // A parallel part of that sum (GemmJitDesc::k_parts > 1) takes segments [seg_begin(k_part),
  // seg_begin(k_part + 1)). Part 0 chains its segments into C; the others store each segment's
  // sum in its slot of the shared scratch (slot s at s·slot_bytes, rows N floats apart), and the
  // last part to finish adds slots [seg_begin(1), kseg) into C in order and applies the
  // activation.
  int k_part = 0, k_parts = 1;
  int seg_begin(int part) const { return kseg * part / k_parts; }
  int64_t slot_bytes = 0;
  // TILED and GEMV: a tile is up to mr_max rows × nvec vectors; NR = nvec·vlen columns.
  int nvec = 0, mr_max = 0;
  // GEMV: sets of accumulators, k step s adding into set s mod kacc, the sets summed pairwise
  // (0+1, 2+3, then the two) at the end of each K block. A narrow GEMV has too few accumulators
  // to hide the FMA's latency (a 1×128·128×10 product is one chain of 128 dependent FMAs); the
  // count follows the whole product's shape, so that a part sums as the whole does.
  int kacc = 1;
  int64_t kc = 0, nc = 0;  // K block and N block (nc a multiple of NR)
  // DOT: rows of A per pass over Bᵀ (passes balanced, at most DOT_ROWS rows each).
  static constexpr int DOT_ROWS = 4;
  size_t scratch = 0;  // bytes
  std::string impl;    // the implementation part of the kernel name, e.g. "14x32"

  int64_t nr() const { return int64_t(nvec) * vlen; }
};

// The plan for `d` on `isa` (AVX2 or AVX512). False when the case is not covered: an operand of
// 2 GiB or more (the generated code addresses with 32-bit displacements), or an activation on
// the dot kernel.
bool make_plan(const GemmJitDesc& d, Isa isa, Plan* out);

// Writes the kernel for `p` into `g` (jit/gemm_kernel.cpp). Throws what xbyak throws.
void emit_gemm(Xbyak::CodeGenerator& g, const Plan& p);

}  // namespace gemm
}  // namespace nnasm
