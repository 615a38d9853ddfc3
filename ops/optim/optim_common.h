// Shape checks shared by the optimizer steps: in-place operands must be the very inputs they
// update, and companions (gradient, moments) must match the weight.
#pragma once
#include <utility>
#include <vector>

#include "ops/op.h"

namespace nnasm {

// Output k must be input inplace[k]; types follow those inputs.
inline Status inplace_outputs(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out,
                              const std::vector<int>& inplace) {
  for (size_t k = 0; k < inplace.size(); ++k) {
    if (ins.out[k] != ins.in[static_cast<size_t>(inplace[k])])
      return Status::errorf("{}: output {} must be input {} (updated in place)", ins.info().mnemonic, k + 1,
                            inplace[k] + 1);
    (*out)[k] = in[static_cast<size_t>(inplace[k])];
  }
  return Status::ok();
}

// Inputs `same` must have input 0's type; `scalars` must be f32[].
inline Status check_operands(const Instruction& ins, const std::vector<TensorType>& in, const std::vector<int>& same,
                             const std::vector<int>& scalars) {
  NNASM_TRY(require_f32(ins, in));
  for (int k : same)
    if (!(in[static_cast<size_t>(k)] == in[0]))
      return Status::errorf("{}: {} must match {}", ins.info().mnemonic, operand_str(ins, k, in[static_cast<size_t>(k)]),
                            operand_str(ins, 0, in[0]));
  for (int k : scalars)
    if (in[static_cast<size_t>(k)].shape.rank != 0)
      return Status::errorf("{}: {} must be f32[]", ins.info().mnemonic, operand_str(ins, k, in[static_cast<size_t>(k)]));
  return Status::ok();
}

}  // namespace nnasm
