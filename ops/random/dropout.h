// What DROPOUT's reference kernel (ops/random/dropout.cpp) and its generated kernel
// (ops/random/dropout_jit.cpp) share: the constants one instruction's mask is drawn with, so the
// two cannot disagree on a rounding of the rate.
#pragma once
#include <cstdint>
#include <memory>

#include "jit/rng.h"
#include "ops/op.h"

namespace nnasm {

struct DropoutMask {
  bool identity = false;   // rate 0: y = x, nothing drawn
  uint32_t threshold = 0;  // element i is kept when the high 32 bits of its draw are ≥ this
  float scale = 1;         // what a kept element is multiplied by: float(1/(1 − rate))
  uint64_t key = 0;        // the instruction's stream
};
// Of a DROPOUT instruction (rate read as the f32 the listing stores).
DropoutMask dropout_mask(const Instruction& ins);

// S of the contract: the stream that element i's counter S + (i + 1)·G starts from.
inline uint64_t dropout_stream(uint64_t seed, uint64_t key, uint64_t run_index) {
  return Rng::mix(Rng::mix(Rng::mix(seed) + key * Rng::GOLDEN) + run_index * Rng::GOLDEN);
}

// The JIT hook: the generated kernel for r (its part of the elements), from `cache`; null for an
// empty tensor or one beyond 2^28 elements (the reference runs). Errors: xbyak's.
Result<std::shared_ptr<const JitKernel>> dropout_jit(const JitRequest& r, KernelCache& cache);

}  // namespace nnasm
