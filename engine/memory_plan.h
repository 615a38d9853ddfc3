// Static memory planning: the temporaries only the instruction stream sees get offsets in one
// arena per executor, and temporaries whose lifetimes do not overlap share bytes (Myelin's cell
// layout, NNVM's memory planner). Planned once, at prepare; run() then uses fixed pointers.
//
// Lifetimes. A tensor lives over [first, last]: the index of the instruction defining it to the
// index of the last one reading it (first, if none does), both inclusive, over the whole program
// in order — forward, backward, update — so a forward result the backward section reads stays
// live until that read. Inclusive ends mean an instruction's outputs never share bytes with its
// inputs or with each other, except by in-place rewriting below. Sections must run in program
// order, as train_step does: running a section again without the ones before it reads bytes
// that later instructions may have reused.
//
// Planned tensors. TEMPORARY role, defined by an instruction, and not observable (engine/passes/
// uses.h: not an output, not a handed-out gradient or NAME.grad, not updated in place), and not
// computed by the derive section, whose results persist across runs. Anything
// a caller reads after a run must therefore be an output (gradcheck and `nnasm run --out` mark
// what they read). Every other tensor keeps storage of its own.
//
// In-place rewriting. Where an elementwise instruction's input k has exactly the output's type
// (not broadcast) and dies there (its last read, and it is planned), the output takes over its
// slot: both are the same bytes, and the kernels allow it (ops/op.h states the rule). A view
// (OPF_VIEW: RESHAPE, FLATTEN) whose input dies there takes over its slot the same way, and then
// copies nothing.
//
// Placement. Greedy by size: tensors (an in-place chain counts as one, its lifetimes joined) are
// placed largest first, ties by first use, each at the lowest 64-byte-aligned offset where it
// overlaps no placed tensor whose lifetime overlaps its own (first fit). Largest first because
// the big activations decide the arena: placed early they stack at the bottom and the many
// small temporaries fill the gaps between them, where placing in program order (a malloc
// simulation) strands big tensors above small ones that die early. Sizes are storage_bytes
// (whole 64-byte lines, engine/tensor.h), so a kernel's last-vector load stays within its slot.
// Cost: O(n²) in the number of planned tensors (for each, a scan of those placed).
#pragma once
#include <cstddef>
#include <unordered_map>
#include <vector>

#include "engine/passes/uses.h"
#include "isa/program.h"
#include "isa/status.h"

namespace nnasm {

struct PlannedTensor {
  TensorId id = NO_TENSOR;
  size_t offset = 0;  // from the arena's start, a multiple of 64
  size_t bytes = 0;   // storage_bytes of its type
  size_t first = 0;   // the instruction defining it
  size_t last = 0;    // the last instruction reading it (first, if none does)
  // The input of instruction `first` whose slot it takes over (that input's last read), or
  // NO_TENSOR.
  TensorId in_place_of = NO_TENSOR;
};

struct MemoryPlan {
  size_t arena_bytes = 0;      // the arena: the end of the highest slot
  size_t unplanned_bytes = 0;  // what the planned tensors take with storage of their own each
  // The most bytes of planned tensors live at one instruction (an in-place pair counted once):
  // no placement of these lifetimes fits in less, so arena_bytes == peak_bytes is optimal.
  size_t peak_bytes = 0;
  std::vector<PlannedTensor> tensors;  // in order of definition

  // The tensor's slot, or nullptr if it is not planned.
  const PlannedTensor* find(TensorId id) const;
  // The other planned tensors whose slots overlap id's (at other times), in order of definition.
  std::vector<TensorId> sharing(TensorId id) const;
  // Adds `t` to tensors and the index; the planner's only way of filling a plan.
  void add(const PlannedTensor& t);

 private:
  std::unordered_map<TensorId, size_t> index_;
};

// Whether plan_memory places `id`: a temporary defined by an instruction that nothing outside the
// instruction stream may read (see above). `u` is p's use analysis.
bool plannable(const Program& p, const Uses& u, TensorId id);

// Whether the op of `ins` allows its output to be written over input k: an elementwise op
// (ELEMENTWISE_UNARY or ELEMENTWISE_BINARY, ACT_BWD included), whose input k has exactly the
// output's type, or a view (OPF_VIEW: the same bytes). Whether input k dies there is the caller's
// question.
bool may_write_in_place(const Program& p, const Instruction& ins, size_t k);

// The plan for `p`'s code as it stands. Requires a finished program. Allocates; thread-safe for
// concurrent readers of `p`.
MemoryPlan plan_memory(const Program& p);

// Checks `plan` against `p` without trusting the planner: every planned tensor is plannable and
// appears once, its slot is 64-byte aligned, of its type's storage_bytes and inside the arena, and
// no two planned tensors whose lifetimes (recomputed here) overlap share a byte — except an
// output and the input it was written over in place, which must be the same slot and meet at
// that instruction only. The error names both tensors and their lifetimes. O(n log n).
Status verify_plan(const Program& p, const MemoryPlan& plan);

}  // namespace nnasm
