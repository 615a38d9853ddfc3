// IDX files, the format of the MNIST family of data sets (MNIST, Fashion-MNIST, EMNIST, KMNIST):
// two zero bytes, a type byte, a rank byte, one big-endian uint32 per dimension, then the
// elements in row-major order, big-endian. The reader takes plain files and gzip-compressed ones
// (told apart by the gzip magic 1f 8b, not by the file name) and supports the element types
// 0x08 (unsigned byte), 0x0C (int32) and 0x0D (float32). Malformed input of any kind is refused
// with a message naming the file and the byte offset; no input bytes can crash the reader or
// make it allocate much more than the data it actually holds.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "isa/shape.h"
#include "isa/status.h"

namespace nnasm {

// IDX element type codes, as stored in the third byte of the file.
constexpr uint8_t IDX_U8 = 0x08;
constexpr uint8_t IDX_I32 = 0x0C;
constexpr uint8_t IDX_F32 = 0x0D;

// Decompressed data larger than this is refused in a gzip-compressed file, whose real size is
// only known after inflating it (a plain file's size is checked against its header up front).
constexpr uint64_t IDX_MAX_GZIP_DATA_BYTES = uint64_t(1) << 30;

// A decoded array. Exactly one of the vectors is filled, by `type` (IDX_U8 → u8, IDX_I32 → i32,
// IDX_F32 → f32), with `shape.numel()` elements in row-major order, in host byte order.
struct IdxArray {
  Shape shape;
  uint8_t type = IDX_U8;
  std::vector<uint8_t> u8;
  std::vector<float> f32;
  std::vector<int32_t> i32;
};

// Reads an IDX file, plain or gzip-compressed. Errors name `path` and, for malformed content,
// the byte offset (in the decompressed stream for gzip files): unreadable file, bad magic,
// unknown or unsupported type, rank outside 1..6, a zero dimension, a shape over
// MAX_TENSOR_ELEMENTS, data shorter or longer than the header says, a truncated or corrupt gzip
// stream, trailing bytes after it. A plain file's size is checked before the element vector is
// allocated; a gzip file is inflated into a vector grown as data arrives, never past the size
// the header declares (plus one byte to detect extra data) nor past IDX_MAX_GZIP_DATA_BYTES.
// On error `out` is left in an unspecified but valid state. Thread-safe (no shared state).
Status idx_read(const std::string& path, IdxArray* out);

// Same as idx_read on the bytes of a file held in memory; `what` names it in messages.
Status idx_read_bytes(std::string_view bytes, const std::string& what, IdxArray* out);

// "u8", "i32", "f32", or "0x.." for any other code.
std::string idx_type_name(uint8_t type);

}  // namespace nnasm
