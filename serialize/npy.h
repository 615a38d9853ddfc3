// NumPy `.npy` files: the exchange format for tensors between nnasm and the Python world. Reads
// format versions 1.0, 2.0 and 3.0 and writes 1.0, for little-endian float32 ('<f4') and int32
// ('<i4') arrays in C order of rank 0-6, and int8 ('|i1') and uint8 ('|u1') ones as i8 and u8. Also reads int64 ('<i8', as PyTorch saves token ids),
// narrowed to i32 with every value checked, and bool ('|b1') as f32 0 and 1, the form an imported
// ONNX BOOL tensor has. Anything else is refused with a message naming the file and the problem;
// no input bytes can crash the reader or make it allocate more than the file holds and the shape
// (already checked against MAX_TENSOR_ELEMENTS) says.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "isa/shape.h"
#include "isa/status.h"

namespace nnasm {

// A decoded array. Exactly one of the vectors is filled, by `type.dtype`, with
// `type.shape.numel()` elements in row-major order (`bytes` for I8 and U8).
struct NpyArray {
  TensorType type;
  std::vector<float> f32;
  std::vector<int32_t> i32;
  std::vector<uint8_t> bytes;
  std::string descr;  // the file's dtype: "<f4", "<i4", "<i8" (narrowed to i32), "|i1", "|u1" or "|b1" (as f32 0/1)
};

// Reads a .npy file. Errors name `path`: unreadable file, bad magic, unsupported version or
// dtype, malformed header, shape over the limits, data shorter or longer than the shape, an int64
// value outside i32's range or a bool byte other than 0 and 1 (naming the element's index).
// Allocates the element vector only after the header and the file size have been checked.
// Thread-safe (no shared state).
Status npy_read(const std::string& path, NpyArray* out);

// Same as npy_read on the bytes of a file held in memory; `what` names it in messages.
Status npy_read_bytes(std::string_view bytes, const std::string& what, NpyArray* out);

// Writes `type.shape.numel()` elements of `type.dtype` from `data` (row-major) as a version 1.0
// .npy file; a bf16 tensor, which NumPy has no type for, as '<f4' (its values exactly). Atomic: the bytes go to a temporary file in the same directory, are fsync'ed, and
// the temporary is renamed over `path`, so a reader never sees a half-written file. The file gets
// mode 0644. Errors: bad shape, I/O failures (naming `path` and the system's reason).
// Thread-safe for distinct paths.
Status npy_write(const std::string& path, const TensorType& type, const void* data);

}  // namespace nnasm
