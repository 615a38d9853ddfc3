// ONNX names to listing names (see onnx_names.h).
#include <fmt/format.h>

#include "isa/program.h"
#include "serialize/onnx/onnx_names.h"

namespace nnasm {

std::string listing_name_of(const std::string& name) {
  std::string s = name;
  for (char& c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
    if (!ok) c = '_';
  }
  if (s.empty() || (s[0] >= '0' && s[0] <= '9') || s[0] == '.') s.insert(0, "_");
  return s;
}

const std::string& OnnxNames::map(const std::string& onnx_name) {
  auto it = by_onnx_.find(onnx_name);
  if (it != by_onnx_.end()) return it->second;
  const std::string base = listing_name_of(onnx_name);
  std::string name = base;
  for (int k = 1; taken_.count(name); ++k) name = fmt::format("{}_{}", base, k);
  taken_.insert(name);
  return by_onnx_.emplace(onnx_name, name).first->second;
}

}  // namespace nnasm
