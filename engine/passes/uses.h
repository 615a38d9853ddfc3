// Who defines and who reads each tensor of a program: the facts every peephole rule asks before
// it rewrites (is this intermediate read only here? is it a result someone may look at?).
#pragma once
#include <unordered_map>
#include <vector>

#include "isa/program.h"

namespace nnasm {

class Uses {
 public:
  static constexpr size_t NONE = static_cast<size_t>(-1);

  explicit Uses(const Program& p);

  // Instruction indices reading `id`, in program order (an instruction reading it twice is
  // listed twice). Backward and update instructions count like any other: a tensor the
  // backward section reads has that reader too, so no rule treats it as private.
  const std::vector<size_t>& readers(TensorId id) const;
  // The instruction defining `id` (the first, for in-place updated ones); NONE for tensors
  // declared up front.
  size_t producer(TensorId id) const;
  // A value someone outside the instruction stream may look at: an output, anything that
  // persists (input, param, const, state), a gradient autodiff handed out (or named NAME.grad
  // for a tensor NAME of the program), or a tensor updated in place.
  bool observable(TensorId id) const;
  // A temporary read by exactly one instruction (once) and not observable: the rewrite may
  // consume it.
  bool private_to(TensorId id, size_t reader) const;
  // Written by an in-place instruction (an optimizer step, CLIP_GRAD_NORM, BATCHNORM2D's running
  // statistics when training): its value changes
  // during the run, so a read of it cannot stand in for a read of a copy made earlier.
  bool updated_in_place(TensorId id) const { return in_place_.count(id) > 0; }

 private:
  const Program& p_;
  std::unordered_map<TensorId, std::vector<size_t>> readers_;
  std::unordered_map<TensorId, size_t> producer_;
  std::unordered_map<TensorId, bool> results_;
  std::unordered_map<TensorId, bool> in_place_;
  std::vector<size_t> none_;
};

}  // namespace nnasm
