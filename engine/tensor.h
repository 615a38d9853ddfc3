// A tensor as a context holds it: its descriptor (isa/tensor.h) and storage of its own, for what
// persists across runs (params, constants, state) and for what an executor did not plan into its
// arena. Planned temporaries live in the arena of the executor that planned them, never here.
#pragma once
#include <cstdint>

#include "isa/tensor.h"
#include "jit/aligned_buffer.h"

namespace nnasm {

struct Tensor {
  TensorDesc desc;
  AlignedBuffer data;  // storage of its own
  // Set only on an executor's own records of the temporaries it planned (Executor::tensor): the
  // bytes of its arena that stand in for `data`, holding the value only between the instruction
  // defining it and the last one reading it. A context's tensors never have one.
  void* arena_slot = nullptr;

  // Allocates zeroed storage of its own if absent (from `allocator` when given); false if the
  // allocation failed. Requires the shape to be final (its size checked against limits by
  // whoever made it).
  bool allocate(const HostAllocator* allocator = nullptr);
  bool allocated() const { return !data.empty() || arena_slot; }
  // Where the values are: the arena slot if there is one, else the tensor's own storage.
  void* storage() const { return arena_slot ? arena_slot : data.data(); }
  float* f32() const { return static_cast<float*>(storage()); }
  int32_t* i32() const { return static_cast<int32_t*>(storage()); }
  int64_t numel() const { return desc.type.shape.numel(); }
};

}  // namespace nnasm
