// The shared elementwise kernel generator. An op supplies a register snippet (what one vector of
// outputs is, given one vector of each input); the generator emits everything else for the
// exact size known at prepare time: the loop, unrolled to several independent vectors, the
// remainder fully unrolled, the last partial vector under a mask (AVX-512 opmask, AVX2 mask table
// + vmaskmovps, so nothing past the last element is ever written), broadcast operands kept in
// registers, and the constant pool. Kernels go through the context's KernelCache.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <xbyak/xbyak.h>

#include "isa/shape.h"
#include "jit/abi.h"
#include "jit/kernel.h"
#include "jit/vecgen.h"

namespace nnasm {

using KernelRef = std::shared_ptr<const JitKernel>;

// How an input is read in the kernel's [rows, inner] iteration space (outputs are always
// written densely, row after row).
enum class Feed : uint8_t {
  STREAM,  // one element per output element, in the output's order
  ROW,     // `inner` elements, the same for every row (a bias row: [n] with [m, n])
  COL,     // one element per row, broadcast along it (a per-row value: [m, 1] with [m, n])
  SCALAR,  // one element for everything
  NONE,    // not read by the loop (only by the spec's host function, if any)
};

// A snippet computes output vectors from input vectors, all in registers:
//   dst  one register per output. dst[0] may be src[0]'s register: read src[0] before the last
//        write of dst[0].
//   src  one register per input, then one per host scalar (EwSpec::host). STREAM/ROW inputs are
//        loaded per vector; COL/SCALAR inputs and host scalars sit in registers shared by the
//        whole loop: never write those. A NONE input's entry is a placeholder: never read it.
//   tmp  the scratch registers the spec asked for (n_tmp), distinct from dst and src.
// Constants come from the pool (v.cst), immediates included: they are baked in at generation.
// On AVX-512 the snippet may clobber opmasks k2..k7; k1 holds the tail mask.
using Snippet = std::function<void(VecGen& v, const Xbyak::Xmm& dst, const std::vector<Xbyak::Xmm>& src,
                                   const std::vector<Xbyak::Xmm>& tmp)>;
using MultiSnippet = std::function<void(VecGen& v, const std::vector<Xbyak::Xmm>& dst,
                                        const std::vector<Xbyak::Xmm>& src, const std::vector<Xbyak::Xmm>& tmp)>;

// An op's snippet with what its kernels are named and keyed by: the unit the elementwise ops
// hand to the generator, and that CALC composes (ops/elementwise/elementwise_op.h).
struct OpSnippet {
  std::string op;    // the kernel name's semantic part: "relu", "gelu_tanh"
  std::string imms;  // the immediates baked into the code, for the cache key ("slope=0.01")
  int n_tmp = 0;
  Snippet body;
};

// One elementwise kernel: y_k[r, j] = body(x_i[r, j] per feed) for r < rows, j < inner.
struct EwSpec {
  std::string op;    // the semantic part of the kernel name: "relu" gives "f32_relu__avx512"
  std::string imms;  // the immediates baked into the code, for the cache key ("slope=0.01")
  Isa isa = Isa::AVX2;
  int64_t rows = 1, inner = 0;
  std::vector<Feed> in;  // one per input, in KernelArgs order
  int n_out = 1;
  int n_tmp = 0;
  MultiSnippet body;
  // Optional: called once per run, before the loop, with the kernel's arguments; writes n_host
  // (≤ 16) floats that the body sees as shared registers after the inputs (per-run scalars that
  // need more than a snippet, e.g. 1 − β^t in double from a step counter). Must not keep `out`.
  // Part of the cache key through `op` and `imms`: one op, one host function.
  void (*host)(const KernelArgs* args, float* out) = nullptr;
  int n_host = 0;
  // Elements the kernel skips at the start of each input and of the outputs (added to the
  // pointers on entry): a part's slice of a bigger iteration space (elementwise_part). Empty: 0.
  std::vector<int64_t> in_skip;
  int64_t out_skip = 0;
};

// Turns `s` (the whole step) into part `part` of `n_parts`: whole rows each when there are
// several rows, else a run of the row in multiples of 16 elements (whole cache lines). Requires
// n_parts ≤ elementwise_max_parts(s, n_parts).
void elementwise_part(EwSpec* s, int part, int n_parts);
// How many parts the whole-step spec `s` is worth splitting into for `threads` threads: 1 below
// 64K elements, at most one per 32K elements, per row (several rows) or per 16 elements. Those
// counts are for two arrays of that size read or written (a unary op); `arrays` scales them, so
// that the threshold is the memory a step touches (an optimizer step touches five or more).
int elementwise_max_parts(const EwSpec& s, int threads, int arrays = 2);

// The kernel for `s` from `cache` (generated the first time, keyed by op, ISA, rows×inner, feeds
// and imms). Errors: too many registers asked for, a size beyond 2^28 elements per row, xbyak's
// own. Allocates; thread-safe as the cache is.
Result<KernelRef> elementwise_kernel(const EwSpec& s, KernelCache& cache);

// Fills s->rows, s->inner and s->in for y = f(a, b) with numpy broadcasting of a and b to out.
// Covered: equal element counts (same layout); a or b one element (SCALAR); the smaller a suffix
// of out's dimensions after leading 1s (ROW: [n] with [m, n], [h, w] with [c, h, w]); the
// smaller out's leading dimensions followed by 1s (COL: [m, 1] with [m, n]). `*pattern` names the
// case for the kernel name: "", "_bscalar", "_ascalar", "_brow", "_arow", "_bcol", "_acol".
// False for anything else (both operands broadcast, a 1 in the middle, no elements).
bool binary_layout(const Shape& a, const Shape& b, const Shape& out, EwSpec* s, std::string* pattern);
// The same for any number of operands, each broadcast numpy-style to `out`: every operand is
// STREAM (out's element count), SCALAR, ROW or COL as above, the ROW and COL ones agreeing on one
// [rows, inner] split (so [m, 1] and [n] with [m, n] are covered too). False otherwise.
bool broadcast_layout(const std::vector<Shape>& in, const Shape& out, EwSpec* s);

// JIT hooks in one call, for the op files. Unary: y = f(x) over numel elements; the kernel
// depends on the element count only. Binary: broadcasting as binary_layout, a null kernel (the
// reference runs) for the other patterns.
Result<KernelRef> unary_jit(const JitRequest& r, KernelCache& cache, const OpSnippet& snippet);
Result<KernelRef> binary_jit(const JitRequest& r, KernelCache& cache, const OpSnippet& snippet);
// Parts hooks (ops/op.h PartsFn) for ops whose JIT hook is unary_jit / binary_jit: they honour
// r.part and r.n_parts by elementwise_part.
int unary_parts(const JitRequest& r, int threads);
int binary_parts(const JitRequest& r, int threads);

}  // namespace nnasm
