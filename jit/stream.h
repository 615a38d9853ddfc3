// The generated dispatch stream: one function that calls a section's kernels in order, each call
// with its own argument baked in as an immediate. The interpreter loop pays a load of the step,
// a branch on its part count and an indirect call from ONE site, whose target changes at every
// instruction, so the predictor often misses. Here every call site has one target, so each call
// is predicted and the loop disappears.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "jit/kernel.h"

namespace nnasm {

// One call of the stream: fn(arg), fn with the System V signature void(const void*).
struct StreamCall {
  const void* fn;
  const void* arg;
};

// Generates `void stream(const KernelArgs*)` (its argument unused) calling `calls` in order.
// Requires: the functions and arguments outlive the stream. Errors: as build_kernel. Allocates.
Result<std::shared_ptr<const JitKernel>> build_stream(const std::string& name, const std::vector<StreamCall>& calls);

}  // namespace nnasm
