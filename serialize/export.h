// From a trained model to an inference model: the forward computation a chosen set of outputs
// needs, with the trained values of its params and state, and nothing else — no labels, loss,
// backward or update code, no optimizer state (moments, step counters). `nnasm export
// --inference` is this function between model_load and model_save.
#pragma once
#include <string>
#include <vector>

#include "isa/program.h"
#include "isa/status.h"

namespace nnasm {

struct ExportOptions {
  // The outputs the inference model computes, by name (any tensor the forward section defines).
  // Empty: the trained program's forward outputs other than its loss (the output whose gradient
  // the backward section seeds), e.g. the logits or probabilities next to the loss.
  std::vector<std::string> outputs;
};

// The losses of a trained program: the outputs the backward section seeds with a gradient of one
// (autodiff's FILL of the loss). Empty for a program without a backward section.
std::vector<TensorId> trained_losses(const Program& p);

// Writes into `out` (an empty program bound to its own Context) the inference program of
// `trained` (finished; a program with a backward or update section): the derive and forward
// instructions the chosen outputs depend on (and those that carry state from run to run), the
// tensors they use, the values of its params, state and constants copied from `trained`'s
// context (bit for bit; a tensor never initialized stays so, and `out`'s seed is `trained`'s so
// that saving it stores the same initial values), inference mode. Errors: `trained` is already
// an inference program, an output name unknown or not computed by the forward section, no
// forward output besides the loss. On error `out` holds a partial program and should be
// discarded. Allocates the copied values; `trained` is not changed. Not thread-safe on `out`.
Status export_inference(const Program& trained, const ExportOptions& o, Program* out);

}  // namespace nnasm
