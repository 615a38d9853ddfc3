// Dead instruction elimination: from the end, an instruction is kept when one of its outputs is
// observable (Uses) or read by a kept instruction. In-place instructions (optimizer steps) and
// those updating state when training (BATCHNORM2D's running statistics) are always kept.
#include <unordered_set>

#include "engine/passes/pass.h"
#include "engine/passes/uses.h"

namespace nnasm {

Result<int> pass_dce(Program& p) {
  const Uses uses(p);
  const std::vector<Instruction>& code = p.code();
  std::vector<bool> keep(code.size(), false);
  std::unordered_set<TensorId> needed;
  int removed = 0;
  for (size_t i = code.size(); i-- > 0;) {
    const Instruction& ins = code[i];
    bool live = ins.info().flags & (OPF_INPLACE | OPF_UPDATES_STATE);
    for (TensorId id : ins.out) live = live || uses.observable(id) || needed.count(id);
    keep[i] = live;
    if (live) needed.insert(ins.in.begin(), ins.in.end());
    else ++removed;
  }
  if (!removed) return 0;
  std::vector<Instruction> out;
  for (size_t i = 0; i < code.size(); ++i)
    if (keep[i]) out.push_back(code[i]);
  NNASM_TRY(p.set_code(std::move(out)));
  return removed;
}

}  // namespace nnasm
