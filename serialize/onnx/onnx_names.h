// ONNX value names as listing names. ONNX allows any text ("input.1", "onnx::Gemm_5",
// "/layer1/Conv_output_0"); a listing name is [A-Za-z_][A-Za-z0-9_.]*. A legal name is kept; any
// other has each illegal character replaced by '_' and a '_' put in front when it would start
// with a digit or '.', then the first of NAME, NAME_1, NAME_2, ... that no earlier name took.
// Names are given in the order they are first asked for, so a model always maps the same way.
#pragma once
#include <map>
#include <set>
#include <string>

namespace nnasm {

class OnnxNames {
 public:
  // The listing name of `onnx_name`, given on first use and the same ever after.
  const std::string& map(const std::string& onnx_name);
  // Whether a listing name was given to some ONNX name (so the importer's own temporaries avoid it).
  bool taken(const std::string& listing_name) const { return taken_.count(listing_name) > 0; }

 private:
  std::map<std::string, std::string> by_onnx_;
  std::set<std::string> taken_;
};

// The legal form of `name` before uniquing: the rules above without the suffix.
std::string listing_name_of(const std::string& name);

}  // namespace nnasm
