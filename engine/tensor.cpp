// Tensor storage of a context's own.
#include "engine/tensor.h"

namespace nnasm {

bool Tensor::allocate(const HostAllocator* allocator) {
  if (data.empty()) data = AlignedBuffer(static_cast<size_t>(numel()) * dtype_size(desc.type.dtype), allocator);
  return !data.empty();
}

}  // namespace nnasm
