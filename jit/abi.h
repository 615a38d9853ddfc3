// The kernel calling convention, below every kernel: what a kernel is handed (KernelArgs), what a
// run shares with all kernels (RunState), and the hooks through which an op's JIT generator, its
// parallel split and its scratch are asked for. Reference kernels and generated ones take the
// same `const KernelArgs*`; generated code reads the fields at their offsetof.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <vector>

#include "isa/instruction.h"
#include "isa/status.h"
#include "jit/false_sharing.h"
#include "jit/kernel.h"

namespace nnasm {

// What a run shares with every kernel: the mode, and a counter that makes each run's random
// draws (dropout) differ while the whole sequence stays reproducible from the seed. run_index is
// the forward run the running section belongs to: Executor::run(FORWARD) sets it before its
// instructions run, and the backward and update sections after it see the same value, so a
// backward instruction can redraw the forward's random numbers (DROPOUT's mask).
struct RunState {
  // Set at prepare (training also by Executor::set_training, between runs). A worker thread reads
  // flush_denormals at the start of every part it runs; run_index, which each run writes, and
  // parts_done, which parts write, sit on lines of their own, so that the worker finds this one
  // in its own cache instead of fetching it from the caller's core first (the 2-thread
  // 1×784·784×256 GEMV measured faster with tests/bench/paired.sh: docs/benchmarks.md, The thread
  // pool).
  static constexpr size_t LINE = FALSE_SHARING_BYTES;
  bool training = false;
  // Denormal floats flushed to zero while the run's kernels run, on every thread (the context's
  // setting at prepare; engine/denormals.h).
  bool flush_denormals = true;
  uint64_t seed = 0;
  alignas(LINE) uint64_t run_index = 0;
  // How many parts of the running step have finished, for kernels whose last part to finish
  // completes the step (a GEMV split along K adds the parts' sums): each part adds 1 atomically
  // when done, and the last one, having done the step's remaining work, sets it back to 0.
  // 0 between steps.
  alignas(LINE) uint32_t parts_done = 0;
};

struct KernelArgs {
  const void* const* in;     // n_in data pointers, 64-byte aligned
  void* const* out;          // n_out data pointers
  const TensorType* in_type;  // n_in types
  const TensorType* out_type;
  const Instruction* ins;    // immediates
  int n_in;
  int n_out;
  void* scratch;             // the bytes the op's scratch hook asked for, 64-byte aligned
  RunState* state;           // the run's; kernels write only parts_done
  // Where the parallel parts of one step can leave results for the part that finishes last (a
  // region of its own, apart from every part's scratch); the step's own scratch when it runs as
  // one part.
  void* shared;
};

// Calls a generated kernel that a bound kernel's driver holds (jit/kernel.h): inputs in
// order, one output, no types or instruction (generated code reads neither). Does not allocate.
inline void call_kernel(KernelFn fn, std::initializer_list<const void*> in, void* out, void* scratch = nullptr) {
  void* outs[] = {out};
  const KernelArgs args{in.begin(), outs, nullptr, nullptr, nullptr, static_cast<int>(in.size()), 1, scratch, nullptr, scratch};
  fn(&args);
}

using ShapeFn = Status (*)(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out);
// Requires: operands match the types shape inference produced. Outputs do not overlap inputs or
// each other, with one exception, which the memory planner uses (engine/memory_plan.h): the
// output of an ELEMENTWISE_UNARY or ELEMENTWISE_BINARY op may be exactly the bytes of an input of
// the same type (never a broadcast input, never a partial overlap), and a view's (OPF_VIEW)
// output exactly its input's bytes. Those kernels must read
// element i of every input before writing element i of the output, and write nothing else an
// element still to come needs: the reference loops go index by index (no __restrict), the JIT
// elementwise generator loads each vector before storing it. Must not allocate (it runs on the
// hot path).
using KernelFn = void (*)(const KernelArgs* args);

// Bytes of scratch memory a kernel needs for these operand types (packing buffers and the like);
// the executor allocates them once at prepare. nullptr: none.
using ScratchFn = size_t (*)(const Instruction& ins, const TensorType* in, const TensorType* out);

// What an op's JIT hook is asked for: one instruction at its exact types, on one ISA level.
struct JitRequest {
  const Instruction& ins;
  const TensorType* in;
  const TensorType* out;
  Isa isa;  // the level to generate for (never REF)
  // Part `part` of `n_parts` (n_parts > 1 only after the op's parts hook asked for that many):
  // the kernel computes its own disjoint slice of the output, each element with the same
  // arithmetic as the whole-step kernel (so results do not depend on the thread count).
  int part = 0;
  int n_parts = 1;
  // With n_parts > 1: split the reduction instead (a GEMV's K), the last part to finish
  // completing the output, so that part p reads only its slice of the input. The executor asks
  // for this to join a step to the parallel job of the step before it, whose part p wrote that
  // slice (see SpanFn), and in training for the steps that read a trained param. An op with a
  // span hook that cannot split so returns no kernel; ops without one split their own way.
  bool split_reduction = false;
  // The instruction reads a param that the program's update section changes (a layer's weight in
  // training). A GEMM then blocks K in at least two blocks where it can, at any thread count, so
  // that it can be split along K (see above) and one thread sums in the same order.
  bool reads_trained_param = false;
};
// Returns the kernel for the request (from `cache`, generating it the first time), a null
// pointer when the op has no JIT kernel for this case (the reference runs, silently), or an
// error when generation failed (logged, and the reference runs).
using JitFn = Result<std::shared_ptr<const JitKernel>> (*)(const JitRequest& r, KernelCache& cache);
// How many parts (1 … threads) the op's JIT kernel for `r` (part 0 of 1) is split into when
// `threads` threads can run them; 1 where the work is too small to pay for the hand-off or the
// case cannot be split. Each part runs with its own scratch of the scratch hook's size.
using PartsFn = int (*)(const JitRequest& r, int threads);

// The elements [*begin, *end) of input k (output k with `output`) that the kernel for `r` (a
// part, or the whole step) reads, or writes the final values of by itself; false where the op
// cannot say (it may read all of the input; no output element is final before every part is
// done). The executor uses it to run part p of one step right after part p of the step before,
// in one parallel job, when the first reads only what the second finished.
using SpanFn = bool (*)(const JitRequest& r, bool output, int k, int64_t* begin, int64_t* end);

}  // namespace nnasm
