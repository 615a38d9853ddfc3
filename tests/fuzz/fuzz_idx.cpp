// libFuzzer target: the IDX reader (serialize/idx.h) on arbitrary bytes, plain or gzip-compressed.
// A file it accepts must come with exactly shape.numel() elements in the vector its type names
// and none in the others.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "serialize/idx.h"

using namespace nnasm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  IdxArray a;
  if (!idx_read_bytes(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.idx", &a)) return 0;
  const size_t n = static_cast<size_t>(a.shape.numel());
  const size_t u8 = a.type == IDX_U8 ? n : 0, i32 = a.type == IDX_I32 ? n : 0, f32 = a.type == IDX_F32 ? n : 0;
  if (a.u8.size() != u8 || a.i32.size() != i32 || a.f32.size() != f32) __builtin_trap();
  return 0;
}
