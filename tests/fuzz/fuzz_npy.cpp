// libFuzzer target: the .npy reader (serialize/npy.h) on arbitrary bytes. A file it accepts must
// come with exactly shape.numel() elements in the vector its dtype names and none in the other.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "serialize/npy.h"

using namespace nnasm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  NpyArray a;
  if (!npy_read_bytes(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.npy", &a)) return 0;
  const size_t n = static_cast<size_t>(a.type.shape.numel());
  const bool f32 = a.type.dtype == DType::F32;
  if ((f32 ? a.f32.size() : a.i32.size()) != n || (f32 ? a.i32.size() : a.f32.size()) != 0) __builtin_trap();
  return 0;
}
