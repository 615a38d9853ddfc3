// What the chain-fusion pass (engine/passes/chain_fusion.cpp) asks CALC before it writes one.
#pragma once
#include <vector>

#include "ops/elementwise/expr.h"

namespace nnasm {

// Inputs a fused CALC takes at most: each one a pointer register of the generated loop.
constexpr int CALC_MAX_INPUTS = 8;

// Whether CALC's JIT kernel for `nodes` (root last) with `n_inputs` inputs fits the vector
// registers of every JIT level (AVX2's 16), so that the pass never writes a CALC that falls back
// to the reference kernel for want of registers.
bool calc_jit_fits(const std::vector<ExprNode>& nodes, int n_inputs);

}  // namespace nnasm
