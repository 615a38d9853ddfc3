// The pieces of the `nnasm` command-line tool that its source files share: each subcommand's
// options and entry point, and the numpy-like tensor printer. The tool is a thin shell over the
// library; every failure is a Status whose message is already in the form the user sees.
#pragma once
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/context.h"
#include "isa/program.h"
#include "isa/shape.h"
#include "isa/status.h"
#include "serialize/model_file.h"
#include "serialize/npy.h"

namespace nnasm {

// Exit statuses of the tool.
enum ExitCode { EXIT_OK = 0, EXIT_USER_ERROR = 1, EXIT_INTERNAL_ERROR = 2 };

// --quiet (0), default (1), --verbose (2). Notes go to standard error.
void set_verbosity(int v);
int verbosity();
// A remark on what the tool decided (e.g. params left to their initializer); hidden by --quiet.
template <typename... A>
void note(fmt::format_string<A...> f, A&&... a) {
  if (verbosity() >= 1) fmt::print(stderr, "nnasm: note: {}\n", fmt::format(f, std::forward<A>(a)...));
}
// Details only --verbose shows (what a model file holds, timings).
template <typename... A>
void note_verbose(fmt::format_string<A...> f, A&&... a) {
  if (verbosity() >= 2) fmt::print(stderr, "nnasm: {}\n", fmt::format(f, std::forward<A>(a)...));
}

// Reads FILE as a model file (.nnm, recognized by its magic) or as a listing, finished and
// checked. `meta` (may be null) describes a model file; `is_model` (may be null) says which it was.
// With --quiet the context's log is silenced.
Status load_program(const std::string& path, Program* p, ModelMeta* meta = nullptr, bool* is_model = nullptr);
// --batch N: with N > 0, *out becomes a copy of `p` at batch N (engine/rebatch.h), else null. The
// message says why the batch cannot change, naming FILE.
Status at_batch(const Program& p, int64_t batch, const std::string& file, std::unique_ptr<Program>* out);

// What run and bench start from: FILE loaded into `ctx`, at --batch N when N > 0, with the
// context's kernels capped at --isa LEVEL when given (apply_isa).
struct RunProgram {
  explicit RunProgram(Context& ctx) : loaded(ctx) {}
  Program loaded;
  std::unique_ptr<Program> rebatched;  // loaded at another batch, when one was asked for
  Program& program() { return rebatched ? *rebatched : loaded; }
};
Status load_run_program(const std::string& file, int64_t batch, const std::string& isa, Context& ctx, RunProgram* out);

// "NAME=PATH": a command-line binding of a tensor to a file. `sigils` may prefix NAME.
struct Binding {
  std::string name;  // without its sigil
  std::string path;
};
Status parse_binding(const std::string& arg, const char* flag, const char* sigils, Binding* b);
// Reads each `--in NAME=PATH.npy` of `args` for an input of `prog` (named `file` in messages),
// checking names, roles, dtypes and shapes; with `all`, every input must be given.
Status read_inputs(const Program& prog, const std::string& file, const std::vector<std::string>& args, bool all,
                   std::map<TensorId, NpyArray>* data);
// Copies what read_inputs read into the inputs' storage (after prepare).
void copy_inputs(Context& ctx, const std::map<TensorId, NpyArray>& data);
// "%a, @b" or "none".
std::string tensor_names(const Program& p, const std::vector<TensorId>& ids);

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
  int64_t batch = 0;     // > 0: run at this batch (every input's leading dimension); 0: the file's
  std::vector<std::string> expects;  // NAME=REF.npy: compare output NAME with the file's values
  double atol = 1e-5, rtol = 1e-4;   // --expect passes where |a - b| <= atol + rtol * |b|
  std::string isa;                   // --isa: avx512|avx2|ref, like NNASM_ISA; empty: the context's
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

// `nnasm info [FILE] [--memory]`: the CPU features and L2 size found, the ISA level in use and the cap
// (NNASM_ISA, NNASM_JIT), the thread count (NNASM_THREADS); with FILE, its inputs, outputs, params, state and instruction counts per
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

struct DumpOptions {
  std::string file;
  std::string out;  // empty: standard output
};
// `nnasm dump FILE [-o OUT.nnasm]`: the normalized listing of a model file (or listing). Weights
// stay in the model file, referenced by their tensors' names.
Status cmd_dump(const DumpOptions& o);

struct BuildOptions {
  std::string file;     // a listing
  std::string weights;  // optional: a model file whose values the listing's tensors take by name
  std::string out;      // the model file to write
  bool has_seed = false;
  uint64_t seed = 0;
};
// `nnasm build LISTING [--weights MODEL.nnm] -o OUT.nnm [--seed N]`: a model file from a listing.
// With --weights, every param, state tensor and valueless const takes the values of the tensor of
// the same name and type in MODEL (a different type is an error), the seed and run index come from
// MODEL too, and the tool notes which tensors were left to their initializer and which of MODEL's
// went unused. The write is atomic.
Status cmd_build(const BuildOptions& o);

struct BenchOptions {
  std::string file;
  std::vector<std::string> ins;  // NAME=PATH.npy; inputs not given hold a fixed pattern
  double seconds = 2;            // measuring time after the warm-up
  int64_t runs = 0;              // > 0: measure exactly this many runs instead of for `seconds`
  int threads = 0;               // 0: the context's default (NNASM_THREADS, else the cores)
  bool train = false;            // time whole training steps instead of forward runs
  bool profile = false;          // then time each instruction and print the listing with the times
  int64_t batch = 0;             // > 0: run at this batch (every input's leading dimension)
  bool json = false;             // print the results as one JSON object instead of the table
  std::string isa;               // --isa: avx512|avx2|ref, like NNASM_ISA; empty: the context's
};
// `nnasm bench FILE`: the forward run's latency (p50, p99, mean, min over single runs) at the
// program's own batch size and the throughput in samples per second (batch = the first input's
// leading dimension), on the kernels prepare picked; --train times training steps. --profile then
// runs as long again timing each instruction on its own, and prints the prepared listing with
// each instruction's kernel, parts, time per run and share in its trailing comment.
Status cmd_bench(const BenchOptions& o);

struct ImportOptions {
  std::string file;                 // the model to import (ONNX)
  std::string out;                  // a model file to write (.nnm); may be empty
  std::string listing;              // a listing to write (.nnasm); may be empty
  std::vector<std::string> shapes;  // NAME=D0,D1,...: a graph input's shape (symbolic dimensions)
  // Myelin .flow files only:
  std::string function;              // the function to import; empty: the first
  // The batch the model is written at: an ONNX graph imported as it is, then rebatched
  // (engine/rebatch.h); a .flow file's batch dimensions (-1 in the file). 0: as the file says
  // (a .flow file's: 1).
  int64_t batch = 0;
  bool weights_as_params = false;    // every float32 variable with data a param (files before v5)
};
// `nnasm import FILE [-o OUT.nnm] [--listing OUT.nnasm] [--shape NAME=D0,D1,...]...`: imports a
// model of another framework (ONNX or a Myelin .flow file; told by content) as a program. Prints what was imported (and
// the notes: renamed or narrowed graph inputs and outputs; every renaming with --verbose), or
// every problem, one line each, then fails. -o writes a model file with the weights; --listing
// a listing — naming the weights in OUT.nnm when -o is given too, holding them inline otherwise.
Status cmd_import(const ImportOptions& o);

struct ExportCmdOptions {
  std::string file;                  // the trained model (or a training listing)
  std::string out;                   // the inference model file to write
  bool inference = false;            // --inference: the only kind of export so far
  std::vector<std::string> outputs;  // --output NAME: the outputs to keep; empty: all but the loss
  int64_t batch = 0;                 // --batch N: the batch size of the export; 0: the trained one's
};
// `nnasm export --inference [--output NAME]... [--batch N] FILE -o OUT.nnm`: writes the inference
// model of a trained one (serialize/export.h: export_inference), and notes its inputs and outputs.
Status cmd_export(const ExportCmdOptions& o);

struct QuantizeCmdOptions {
  std::string file;                    // the inference model (or listing)
  std::string out;                     // the quantized model file to write
  std::string to;                      // --to bf16|int8
  std::vector<std::string> calibrate;  // NAME=PATH.npy: calibration rows for input NAME
  double max_error = -1;               // --max-error E; < 0: the type's default
  std::vector<std::string> keep;       // --keep TENSOR: layers that stay f32
};
// `nnasm quantize MODEL --to bf16|int8 [--calibrate NAME=data.npy]... [--max-error E] [--keep
// TENSOR]... -o OUT.nnm`: the model with its dense layers in reduced precision where each
// layer's measured error allows (engine/quantize.h); prints the per-layer report and the sizes.
Status cmd_quantize(const QuantizeCmdOptions& o);

// --isa LEVEL of run and bench: lowers the context's JIT cap to LEVEL (avx512, avx2 or ref), as
// NNASM_ISA does. A level above what this CPU has is an error naming the CPU's best level.
Status apply_isa(Context& ctx, const std::string& level);

// Formats a tensor's values like numpy's repr of an array body: nested brackets, values aligned
// to a common width, rows wrapped at 75 columns, and arrays over 1000 elements summarized to 3
// items at each end of every axis longer than 6. Rank 0 prints the bare value. `data` holds
// `type.shape.numel()` elements of `type.dtype`.
std::string format_tensor(const TensorType& type, const void* data);

}  // namespace nnasm
