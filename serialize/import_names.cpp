// Listing names for imported tensors (serialize/import_names.h).
#include "serialize/import_names.h"

#include <fmt/format.h>

namespace nnasm {

namespace {

bool word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}

std::string spell(const std::string& foreign) {
  std::string s;
  if (foreign.empty() || (foreign[0] >= '0' && foreign[0] <= '9') || foreign[0] == '.') s += '_';
  for (char c : foreign) s += word_char(c) ? c : '_';
  return s;
}

}  // namespace

std::string ImportNames::unique(std::string name) {
  if (taken_.count(name)) {
    // "x_2" may itself be a foreign name given out earlier: take the first suffix still free.
    for (int k = 2;; ++k) {
      std::string candidate = fmt::format("{}_{}", name, k);
      if (!taken_.count(candidate)) {
        name = std::move(candidate);
        break;
      }
    }
  }
  taken_.insert(name);
  return name;
}

const std::string& ImportNames::map(const std::string& foreign) {
  auto it = mapped_.find(foreign);
  if (it != mapped_.end()) return it->second;
  return mapped_.emplace(foreign, unique(spell(foreign))).first->second;
}

std::string ImportNames::fresh(const std::string& base) { return unique(spell(base)); }

}  // namespace nnasm
