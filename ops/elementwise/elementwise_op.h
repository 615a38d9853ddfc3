// The elementwise ops as building blocks. Each unary, binary and ACT_BWD op file describes its op
// once, as an ElementwiseOp: the reference arithmetic over a dense block and the JIT register
// snippet, both for given immediates. The op's own reference kernel and JIT hook are made from
// that description, and CALC (calc.cpp) composes the same descriptions, so a CALC computes what
// the chain of ops computes, with the same code.
#pragma once
#include <cstdint>
#include <vector>

#include "jit/elementwise.h"
#include "ops/op.h"

namespace nnasm {

// The immediates of an elementwise op by schema position, in a form with no allocation (CALC's
// reference kernel reads them at run time): f32 values in f, enum indices in i. No elementwise op
// has more than two immediates.
struct EwImms {
  static constexpr int MAX = 2;
  float f[MAX] = {0, 0};
  int64_t i[MAX] = {0, 0};
};
EwImms ew_imms(const std::vector<Imm>& imm);
// The immediates of `op` as GradBuilder::emit takes them (by schema key).
std::vector<std::pair<const char*, Imm>> ew_imm_args(Opcode op, const EwImms& imm);

struct ElementwiseOp {
  int arity;  // 1 or 2
  // y[j] = f(x[0][j], x[1][j]) for j < n, with exactly the arithmetic of the op's reference
  // kernel. y does not overlap the x. No allocation.
  void (*block)(const float* const* x, float* y, int64_t n, const EwImms& imm);
  // The op's JIT snippet for these immediates (jit/elementwise.h: src[k] is argument k).
  OpSnippet (*snippet)(const EwImms& imm);
};

// The description of `op`; nullptr for ops that are not elementwise building blocks.
inline const ElementwiseOp* elementwise_op(Opcode op) { return op_hooks(op).elementwise; }

// JIT hooks made from a snippet function: the op's kernel for the instruction's immediates.
template <OpSnippet (*S)(const EwImms&)>
Result<KernelRef> unary_op_jit(const JitRequest& r, KernelCache& cache) {
  return unary_jit(r, cache, S(ew_imms(r.ins.imm)));
}
template <OpSnippet (*S)(const EwImms&)>
Result<KernelRef> binary_op_jit(const JitRequest& r, KernelCache& cache) {
  return binary_jit(r, cache, S(ew_imms(r.ins.imm)));
}

// The hooks of an elementwise op of a family (unary, binary) whose file defines FAMILY_shape,
// FAMILY_block<FN>, FAMILY_ref<FN> and uses FAMILY_op_jit / FAMILY_parts: one line per op.
#define ELEMENTWISE_OP(FAMILY, ARITY, NAME, FN, GRAD, SNIPPET)                                        \
  OpHooks op_hooks_##NAME() {                                                                        \
    static const ElementwiseOp e{ARITY, FAMILY##_block<FN>, SNIPPET};                                \
    return {FAMILY##_shape, FAMILY##_ref<FN>, nullptr, GRAD, FAMILY##_op_jit<SNIPPET>, FAMILY##_parts, &e}; \
  }

}  // namespace nnasm
