// The run configurations an op test sweeps: every JIT level of this machine, then the JIT off
// (NNASM_JIT=0's configuration, the reference kernels), and the check of which kernel ran at
// each, so that a silent fallback to the reference cannot pass as JIT.
#pragma once
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/jit_levels.h"
#include "tests/op_harness.h"

namespace nnasm::test {

struct Level {
  RunConfig cfg;
  std::string isa;  // in the kernel's name; "" for the reference
};

inline std::vector<Level> levels() {
  std::vector<Level> v;
  for (Isa isa : jit_levels()) v.push_back({RunConfig{true, JitConfig{true, isa}, 1}, isa_name(isa)});
  v.push_back({RunConfig{true, JitConfig{false, Isa::AVX512}, 1}, ""});
  return v;
}

// The kernel that ran: the reference with the JIT off, else `prefix`'s kernel at the level.
inline void expect_kernel(const OpOutput& y, const Level& lv, const std::string& prefix) {
  if (lv.isa.empty()) {
    EXPECT_EQ(y.kernel, "ref");
    return;
  }
  EXPECT_EQ(y.kernel.rfind(prefix, 0), 0u) << y.kernel;
  EXPECT_NE(y.kernel.find(lv.isa), std::string::npos) << y.kernel;
}

}  // namespace nnasm::test
