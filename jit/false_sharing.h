// How far apart two fields must be when different cores write them (or one writes what another
// reads at every step): 128 bytes, not the 64 of a cache line, because Intel's spatial prefetcher
// fetches lines in aligned pairs, so a line read by one core must not come along with one another
// core is writing. Used by the thread pool's lines, the run state kernels read, and the profile's
// per-part times.
#pragma once
#include <cstddef>

namespace nnasm {

constexpr size_t FALSE_SHARING_BYTES = 128;

}  // namespace nnasm
