// Myelin flow import: one function of a flow file (flow.h) becomes a Program. Its operations
// become instructions in dependency order; the variables they use become tensors:
//   - a variable with data is a `@` constant, or a param when it is learnable (flag of versions
//     5 and 6; FlowImportOptions::weights_as_params makes every float32 one a param);
//   - a learnable variable without data is a param initialized with zeros (Myelin's default; the
//     file does not say how it was to be initialized);
//   - any other variable the function reads but does not compute is an input, its batch
//     dimensions (-1) set to FlowImportOptions::batch;
//   - a computed variable is an output when it has the output flag, belongs to a connector, or no
//     imported operation of the function reads it.
// An operation that cannot be mapped (an unknown type, a type nnasm has no element type for, a
// shape that disagrees with the file's) is left out with one line in the report, and the import
// goes on: the values it would have computed become inputs of the program (and the values it
// would have read are outputs), so what was imported still prepares and runs. Names that are not
// listing names are respelled (serialize/import_names.h), each with a note.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "isa/program.h"
#include "isa/program_size.h"
#include "isa/status.h"
#include "serialize/flow/flow.h"
#include "serialize/import_report.h"

namespace nnasm {

struct FlowImportOptions {
  std::string function;  // the function to import; empty: the only one, or the first
  int64_t batch = 1;     // the size of batch dimensions (-1 in the file)
  // Make every float32 variable with data a param, not only the learnable ones: for files older
  // than version 5, which have no learnable flag.
  bool weights_as_params = false;
  uint64_t max_file_bytes = uint64_t(4) << 30;  // flow_import_file reads no larger file
  // The storage every tensor of the program will need once prepared: a small file must not make
  // prepare allocate gigabytes through its shapes.
  uint64_t max_program_bytes = MAX_PROGRAM_BYTES;
};

// Imports one function of `flow` into `out`, an empty Program bound to a Context, and says in
// `report` which operations it left out and which names it changed. Errors (nothing useful
// imported): no such function, a batch size below 1, tensors over max_program_bytes, `out` not
// empty. An operation left out is not an error: check report->complete(). On error `out` holds a
// partial program and should be discarded. Not thread-safe for one `out`.
Status flow_import(const Flow& flow, Program* out, ImportReport* report, const FlowImportOptions& options = {});

// Reads `bytes` (flow_read; `what` names the file in messages) and imports it.
Status flow_import_bytes(std::string_view bytes, const std::string& what, Program* out, ImportReport* report,
                         const FlowImportOptions& options = {});

// Reads the file at `path` (no larger than options.max_file_bytes) and imports it: the entry point
// for `nnasm import model.flow`.
Status flow_import_file(const std::string& path, Program* out, ImportReport* report,
                        const FlowImportOptions& options = {});

}  // namespace nnasm
