// One ONNX backend node test (libonnx-testdata's data/node/test_*/: model.onnx and
// test_data_set_*/input_*.pb, output_*.pb) run through the importer and the executor, outputs
// compared with ONNX's tolerances. Shared by the conformance program (tests/onnx/conformance.cpp,
// `make onnx-conformance`) and the regression test (tests/onnx_node_test.cpp).
//
// How a test runs: every data set in turn; integer graph inputs (shapes, axes, pads, indices)
// are given to the importer as constants with the data set's values
// (OnnxImportOptions::constant_inputs), since in an exported model they are initializers; FLOAT
// inputs are bound at run time, and so are BOOL ones, as the f32 0 and 1 the program holds them
// in. The program runs in inference mode. Outputs match when |got − want| ≤ atol + rtol·|want|
// (rtol 1e-3, atol 1e-7, NaN equal to NaN) and the shapes are the same; integer outputs (i32, and
// the i8 and u8 of the quantization operators) must be equal, and a BOOL output's 0 and 1 must be its false and true.
#pragma once
#include <string>
#include <vector>

namespace nnasm {

struct NodeCaseResult {
  enum Outcome { PASSED, FAILED, UNSUPPORTED };
  Outcome outcome = FAILED;
  std::string reason;                 // the first problem or mismatch; empty when passed
  std::vector<std::string> op_types;  // of the model's nodes, sorted, each once
};

const char* outcome_name(NodeCaseResult::Outcome o);  // "passed", "failed", "unsupported"

// Where Debian's libonnx-testdata puts the node tests.
constexpr const char* ONNX_NODE_TEST_DIR = "/usr/share/libonnx-testdata/data/node";

// Runs the node test in directory `dir`. Unsupported: the importer reported a problem (the
// reason is its first line), or the expected output depends on a random draw (training-mode
// Dropout). Failed: anything else that is not a match.
NodeCaseResult run_node_case(const std::string& dir);

}  // namespace nnasm
