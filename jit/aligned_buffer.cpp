// Aligned, zeroed blocks from the C heap or a host's allocator.
#include "jit/aligned_buffer.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace nnasm {

AlignedBuffer::AlignedBuffer(size_t bytes, const HostAllocator* allocator) {
  const size_t padded = padded_bytes(bytes);
  if (allocator && allocator->alloc) {
    allocator_ = allocator;
    p_ = allocator->alloc(allocator->user, padded, 64);
    if (p_ && reinterpret_cast<uintptr_t>(p_) % 64 != 0) {  // a host allocator that ignored the alignment
      release();
      return;
    }
  } else {
    p_ = std::aligned_alloc(64, padded);
  }
  if (!p_) return;  // callers check empty()
  std::memset(p_, 0, padded);
  bytes_ = bytes;
}

void AlignedBuffer::release() {
  if (p_ && allocator_ && allocator_->free) allocator_->free(allocator_->user, p_);
  else if (!allocator_) std::free(p_);
  p_ = nullptr;
  bytes_ = 0;
}

AlignedBuffer::~AlignedBuffer() { release(); }

AlignedBuffer::AlignedBuffer(AlignedBuffer&& o) noexcept : p_(o.p_), bytes_(o.bytes_), allocator_(o.allocator_) {
  o.p_ = nullptr;
  o.bytes_ = 0;
}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& o) noexcept {
  if (this != &o) {
    release();
    p_ = o.p_;
    bytes_ = o.bytes_;
    allocator_ = o.allocator_;
    o.p_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

}  // namespace nnasm
