// Tensor storage and the names of roles and init kinds as the listing spells them.
#include "engine/tensor.h"

#include <cstdlib>
#include <cstring>

namespace nnasm {

const char* role_name(Role r) {
  switch (r) {
    case Role::INPUT: return "input";
    case Role::OUTPUT: return "output";
    case Role::PARAM: return "param";
    case Role::CONST: return "const";
    case Role::TEMPORARY: return "temporary";
    case Role::STATE: return "state";
  }
  return "?";
}

namespace {
const char* const INIT_NAMES[] = {"none",   "zeros",          "ones",          "constant",   "uniform",
                                  "normal", "xavier_uniform", "xavier_normal", "he_uniform", "he_normal"};
}

const char* init_name(InitKind k) { return INIT_NAMES[static_cast<int>(k)]; }

bool init_from_name(const std::string& s, InitKind* out) {
  for (int i = 0; i < static_cast<int>(sizeof INIT_NAMES / sizeof *INIT_NAMES); ++i)
    if (s == INIT_NAMES[i]) {
      *out = static_cast<InitKind>(i);
      return true;
    }
  return false;
}

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

bool Tensor::allocate(const HostAllocator* allocator) {
  if (data.empty()) data = AlignedBuffer(static_cast<size_t>(numel()) * dtype_size(desc.type.dtype), allocator);
  return !data.empty();
}

}  // namespace nnasm
