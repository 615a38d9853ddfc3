// The JIT levels a test can exercise on this machine (every level up to the CPU's best; the
// reference is the oracle, not a level), and each level's vector width in floats.
#pragma once
#include <vector>

#include "jit/cpu.h"

namespace nnasm {

inline std::vector<Isa> jit_levels() {
  std::vector<Isa> v;
  for (Isa i : {Isa::AVX2, Isa::AVX512})
    if (i <= cpu_info().best) v.push_back(i);
  return v;
}

inline int vector_floats(Isa isa) { return isa == Isa::AVX512 ? 16 : 8; }

}  // namespace nnasm
