// The whole of a file as bytes, for tests that compare files with what the code prints; empty
// when the file cannot be read (the comparison then fails and shows it).
#pragma once
#include <fstream>
#include <sstream>
#include <string>

namespace nnasm {

inline std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace nnasm
