// The pieces of the `nnasm` command-line tool that its source files share: each subcommand's
// options and entry point, and the numpy-like tensor printer. The tool is a thin shell over the
// library; every failure is a Status whose message is already in the form the user sees.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/shape.h"
#include "engine/status.h"

namespace nnasm {

struct CheckOptions {
  std::string file;
  bool print = false;  // write the normalized listing to stdout
};

struct RunOptions {
  std::string file;
  std::vector<std::string> ins;   // NAME=PATH.npy
  std::vector<std::string> outs;  // NAME=PATH.npy
  bool has_seed = false;
  uint64_t seed = 0;
  bool kernels = false;  // print the listing with the kernel each instruction got
  int opt_level = -1;    // -O0 / -O1; -1: the context's default (NNASM_OPT, else 1)
  bool train = false;    // run in training mode; else inference, whatever the listing's `mode` says
};

struct OptOptions {
  std::string file;
  int level = 1;                    // -O0 / -O1
  bool diff = false;                // each changed instruction with the pass's reason
  std::vector<std::string> passes;  // run exactly these (by name) instead of the level's
  bool list = false;                // list the passes and exit
};

struct InfoOptions {
  std::string file;     // optional: a listing to describe
  bool memory = false;  // with file: the executor's memory plan and the annotated listing
};

// `nnasm info [FILE] [--memory]`: the CPU features found, the ISA level in use and the cap
// (NNASM_ISA, NNASM_JIT); with FILE, its inputs, outputs, params, state and instruction counts per
// section; with --memory, the bytes of the planned temporaries with storage of their own each and
// in the executor's arena (engine/memory_plan.h), the bytes of everything else, and the listing
// as prepared (optimized) with each output's arena offset and the tensors sharing its slot.
Status cmd_info(const InfoOptions& o);

// `nnasm check`: parses and verifies the listing. On success writes either the normalized listing
// (--print) or a one-line summary to stdout.
Status cmd_check(const CheckOptions& o);

// `nnasm run`: parses, binds the inputs from .npy files, runs the forward section in inference
// mode (training mode with --train; a listing's `mode training` line does not count), then writes
// the requested tensors to .npy files or, without --out, prints every program output to stdout.
Status cmd_run(const RunOptions& o);

// `nnasm opt`: parses a listing, runs the optimizer's passes and writes the optimized listing;
// --diff adds each changed instruction's reason as its trailing comment and a summary of what
// every pass did; --list names the passes.
Status cmd_opt(const OptOptions& o);

// Formats a tensor's values like numpy's repr of an array body: nested brackets, values aligned
// to a common width, rows wrapped at 75 columns, and arrays over 1000 elements summarized to 3
// items at each end of every axis longer than 6. Rank 0 prints the bare value. `data` holds
// `type.shape.numel()` elements of `type.dtype`.
std::string format_tensor(const TensorType& type, const void* data);

}  // namespace nnasm
