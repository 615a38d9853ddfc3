// The memory kernels touch: 64-byte-aligned blocks padded to whole 64-byte lines (isa/tensor.h's
// padded_bytes), so that vector kernels may load the last partial vector without faulting; from
// a host's allocator when it has one.
#pragma once
#include <cstddef>

#include "isa/tensor.h"

namespace nnasm {

// A host's allocator (a game engine's, say): alloc(user, bytes, alignment) returns memory or null;
// free(user, p) releases it. Used for the big blocks — tensor storage, arenas, kernel scratch —
// of a context that has one (Context::set_allocator); bookkeeping uses the C++ heap.
struct HostAllocator {
  void* (*alloc)(void* user, size_t bytes, size_t alignment) = nullptr;
  void (*free)(void* user, void* p) = nullptr;
  void* user = nullptr;
};

// Owns one 64-byte-aligned, zero-initialized block of padded_bytes(bytes), or nothing if
// allocation failed; from `allocator` when given (which must outlive the buffer), else the C
// heap. Move-only.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes, const HostAllocator* allocator = nullptr);
  ~AlignedBuffer();
  AlignedBuffer(AlignedBuffer&& o) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  void* data() const { return p_; }
  size_t bytes() const { return bytes_; }
  bool empty() const { return p_ == nullptr; }

 private:
  void release();
  void* p_ = nullptr;
  size_t bytes_ = 0;
  const HostAllocator* allocator_ = nullptr;
};

}  // namespace nnasm
