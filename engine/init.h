// Parameter initialization from a seed: each tensor draws from its own stream, derived from the
// context's seed and the tensor's name, so one seed reproduces a whole model regardless of the
// order in which tensors are created.
#pragma once
#include <cstdint>

#include "engine/tensor.h"

namespace nnasm {

// Fan-in and fan-out of a weight shape: rank 2 is [in, out] (LINEAR's layout); rank > 2 is
// [out, in, k...] (PyTorch's convolution layout, the receptive field multiplying both); rank ≤ 1
// uses its length for both.
void fan_in_out(const Shape& s, double* fan_in, double* fan_out);

// Fills `t` (allocated) from its InitSpec, or its inline values when it has them. i32 tensors
// take values rounded toward zero.
void init_tensor(Tensor& t, uint64_t seed);

}  // namespace nnasm
