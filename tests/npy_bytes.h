// .npy files built byte by byte in tests, as NumPy writes them: the magic, the version, the
// header's length, the header dictionary padded to 64 bytes, then the elements' little-endian
// bytes.
#pragma once
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>

namespace nnasm {

// A file of format version `major` (1: a 2-byte header length, 2 and 3: 4 bytes) with header
// dictionary `dict` and element bytes `data`.
inline std::string make_npy(int major, const std::string& dict, const std::string& data) {
  const size_t len_bytes = major == 1 ? 2 : 4;
  std::string h = dict;
  const size_t unpadded = 8 + len_bytes + h.size() + 1;
  h.append((64 - unpadded % 64) % 64, ' ');
  h += '\n';
  std::string f("\x93NUMPY", 6);
  f += static_cast<char>(major);
  f += '\0';
  for (size_t i = 0; i < len_bytes; ++i) f += static_cast<char>((h.size() >> (8 * i)) & 0xff);
  return f + h + data;
}

inline std::string f32_bytes(std::initializer_list<float> v) {
  std::string s;
  for (float x : v) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    for (int i = 0; i < 4; ++i) s += static_cast<char>((u >> (8 * i)) & 0xff);
  }
  return s;
}

inline std::string i64_bytes(std::initializer_list<int64_t> v) {
  std::string s;
  for (int64_t x : v)
    for (int i = 0; i < 8; ++i) s += static_cast<char>((static_cast<uint64_t>(x) >> (8 * i)) & 0xff);
  return s;
}

}  // namespace nnasm
