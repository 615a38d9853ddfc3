// Use analysis: one scan over the instruction stream.
#include "engine/passes/uses.h"

#include "ops/op.h"

namespace nnasm {

Uses::Uses(const Program& p) : p_(p) {
  const std::vector<Instruction>& code = p.code();
  for (size_t i = 0; i < code.size(); ++i) {
    for (TensorId id : code[i].in) readers_[id].push_back(i);
    if (code[i].info().flags & OPF_UPDATES_STATE)
      for (size_t k = 0; k < code[i].in.size(); ++k)
        if (state_inputs(code[i].op) >> k & 1) in_place_[code[i].in[k]] = true;
    for (TensorId id : code[i].out) {
      if (code[i].info().flags & OPF_INPLACE) in_place_[id] = true;
      if (producer_.count(id)) results_[id] = true;  // updated in place: its value is state
      else producer_[id] = i;
    }
  }
  // Gradients are results like PyTorch's .grad: a caller may read them after a step (to log a
  // norm, to check them), so they keep storage of their own even when the update reads them.
  // Autodiff hands them out through its cache; a listing's are found by name (NAME.grad).
  for (TensorId id : p.cached_grads()) results_[id] = true;
  for (TensorId id : p.tensors()) {
    const std::string& name = p.desc(id).name;
    const size_t n = name.size();
    if (n > 5 && name.compare(n - 5, 5, ".grad") == 0 && p.find(name.substr(0, n - 5)) != NO_TENSOR)
      results_[id] = true;
  }
}

const std::vector<size_t>& Uses::readers(TensorId id) const {
  auto it = readers_.find(id);
  return it == readers_.end() ? none_ : it->second;
}

size_t Uses::producer(TensorId id) const {
  auto it = producer_.find(id);
  return it == producer_.end() || p_.desc(id).declared_up_front() ? NONE : it->second;
}

bool Uses::observable(TensorId id) const {
  const TensorDesc& d = p_.desc(id);
  return d.is_output || d.role != Role::TEMPORARY || results_.count(id);
}

bool Uses::private_to(TensorId id, size_t reader) const {
  const std::vector<size_t>& r = readers(id);
  return r.size() == 1 && r[0] == reader && !observable(id);
}

}  // namespace nnasm
