// libFuzzer target: the .npy reader (serialize/npy.h) on arbitrary bytes. A file it accepts must
// come with exactly shape.numel() elements in the vector its dtype names (f32, i32, or bytes for
// i8 and u8) and none in the others.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "serialize/npy.h"

using namespace nnasm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  NpyArray a;
  if (!npy_read_bytes(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.npy", &a)) return 0;
  const size_t n = static_cast<size_t>(a.type.shape.numel());
  const DType t = a.type.dtype;
  const size_t want_f32 = t == DType::F32 ? n : 0, want_i32 = t == DType::I32 ? n : 0;
  const size_t want_bytes = t == DType::I8 || t == DType::U8 ? n : 0;
  if (t == DType::BF16 || a.f32.size() != want_f32 || a.i32.size() != want_i32 || a.bytes.size() != want_bytes)
    __builtin_trap();
  return 0;
}
