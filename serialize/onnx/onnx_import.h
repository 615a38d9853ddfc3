// ONNX import: an ONNX model (opsets 7 to 17, and below 7 one made only of ops defined then as now;
// from torch.onnx.export or any other producer)
// becomes a Program — graph inputs as inputs, float initializers as params (trainable),
// BatchNormalization's running statistics as state, Constant values as consts, every node one or
// more instructions — that runs, saves as a model file and fine-tunes like any other.
//
// What is decided here, for every model:
//   - Names: graph inputs and outputs and every tensor keep their ONNX names where those are
//     listing names; others are renamed (serialize/import_names.h), each renaming a note.
//   - Shapes are static: a graph input's symbolic dimensions come from `shapes` (`--shape`), and
//     an input left symbolic is a problem naming it. Shape computations (Shape, Gather, Concat,
//     Unsqueeze, Cast, Reshape, Slice, arithmetic on integers, ...) whose values are all known at
//     import time are folded, as PyTorch's exports need.
//   - Types: nnasm has f32 and i32. FLOAT stays f32; integer graph inputs (INT32, INT64) become i32
//     inputs (a runner narrows int64 data with a range check); integer constants are folded in
//     int64 and narrowed to i32, checked, only where one reaches the program; BOOL is an f32
//     tensor of 0 and 1 (graph inputs, initializers, outputs and values between: the masks the
//     comparisons give and WHERE takes); DOUBLE, FLOAT16, STRING and the rest are problems.
//   - A node that cannot be mapped is one problem line, "node 'Conv_12' (op ConvTranspose, opset
//     13): not supported"; every node is still looked at, so a model's problems come in one list.
//     Nodes that only read the results of such a node are counted as not imported, without a line
//     of their own.
#pragma once
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "isa/program.h"
#include "isa/status.h"
#include "serialize/import_report.h"
#include "serialize/onnx/onnx_model.h"

namespace nnasm {

struct OnnxImportOptions {
  // Graph input (by ONNX name) → its full shape, for inputs with symbolic dimensions.
  std::map<std::string, std::vector<int64_t>> shapes;
  // Graph inputs (by ONNX name) taken as constants with these values instead of inputs: how a
  // test runner gives integer inputs (shapes, axes, pads) the values they have in an exported
  // model, where they are initializers.
  std::map<std::string, HostTensor> constant_inputs;
};

// What became of the graph's inputs and outputs.
struct OnnxGraphInfo {
  // Where they are in the program: (ONNX name, listing name) pairs in the graph's order (inputs
  // taken as constants are left out). The names differ only where the ONNX name is not a
  // listing name.
  std::vector<std::pair<std::string, std::string>> inputs, outputs;
  // Graph inputs a node needed known at import time (a Reshape's shape, a Resize's scales): in an
  // exported model they are initializers; OnnxImportOptions::constant_inputs can give them.
  std::vector<std::string> needed_constant;
};

// Imports the ONNX model in `bytes` into `out`, an empty Program bound to a Context, and finishes
// it. `what` names the file in messages. On success the report says how many nodes were seen
// and imported (all of them) and holds the notes (renamings, narrowed types). Fails when the
// bytes are not a model ("what: error: ..."), or when any node or graph input/output could not be
// mapped: then `report->problems` lists every one and the message says how many; `out` holds a
// partial program and should be discarded. Never crashes on any bytes; allocates in proportion
// to `bytes` and to the shapes of the program's tensors (checked against MAX_TENSOR_ELEMENTS).
// `info` (may be null) receives what became of the graph's inputs and outputs.
Status onnx_import(std::string_view bytes, const std::string& what, const OnnxImportOptions& options, Program* out,
                   ImportReport* report, OnnxGraphInfo* info = nullptr);

// The ONNX op types the importer maps (some with conditions on attributes, which a node that
// does not meet them reports), sorted.
std::vector<std::string> onnx_supported_ops();

}  // namespace nnasm
