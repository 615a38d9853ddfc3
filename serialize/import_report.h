// What an importer (ONNX, Myelin .flow) says about a file it brought in: one readable line per
// node it could not map, so that a user sees every unsupported node of a model in one pass rather
// than the first one only. Shared by serialize/onnx/ and serialize/flow/.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace nnasm {

struct ImportReport {
  size_t nodes = 0;     // nodes (ONNX) or operations (flow) seen
  size_t imported = 0;  // of those, mapped onto instructions
  // One line per node left out, e.g. "node 'Conv_12' (op ConvTranspose, opset 13): not supported".
  std::vector<std::string> problems;
  // Renamings and other decisions a user should know of, e.g. "tensor 'input.1' is %input_1".
  std::vector<std::string> notes;

  bool complete() const { return problems.empty(); }
};

}  // namespace nnasm
