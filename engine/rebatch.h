// Another batch size for a recorded program: a copy whose inputs' leading dimension is n, with
// every shape inferred again (so prepare generates kernels for it), sharing the original's
// params, constants and state.
#pragma once
#include <cstdint>
#include <memory>

#include "isa/program.h"
#include "isa/status.h"

namespace nnasm {

// The program's batch: the leading dimension every input shares. Errors (naming the input): no
// inputs, an input of rank 0, inputs whose leading dimensions differ.
Result<int64_t> program_batch(const Program& p);

// A copy of `p` at batch `n`: its inputs' leading dimension is n and every instruction's shapes
// are inferred again. Shape immediates that carry the batch are rewritten: RESHAPE to [B, ...] or
// [-1, ...] of a tensor whose leading dimension is the batch, EXPAND to [B, ...], SLICE of the
// whole batch; a backward-section SCALE by c/size (c = ±1, ±2) of a batch-led tensor (MSE's and
// BCE's gradients) is rescaled. Where the batch cannot change the message names the instruction
// (file:line when the program came from a listing) and why: a RESHAPE that mixes the batch into
// other dimensions, a SLICE of some rows of the batch, a backward SCALE by 1/B (a mean over the
// batch), or any shape mismatch against a param, const or state (a recurrent layer's state
// [D,N,H] keeps its N). Errors also: n < 1, n over MAX_TENSOR_ELEMENTS, or program_batch's.
//
// The copy lives in p's tensor map: params, constants and state are the same tensors (their
// values shared, never copied), inputs, outputs and temporaries are new tensors of that map
// under the same names (they stay in the map after the copy dies, as an optimized copy's do).
// Gradients autodiff handed out map to the copy's. Requires p finished; p is not changed.
// Allocates; not thread-safe with other uses of p's map.
Result<std::unique_ptr<Program>> with_batch(const Program& p, int64_t n);

}  // namespace nnasm
