// Derive hoisting: a forward instruction that reads only params, constants, state and what the
// derive section computes — none of them updated in place, so never in a training program —
// moves to the derive section (isa/instruction.h), which the executor runs
// before the first forward run and again only after the params change. Weights that a pass
// folds or packs (bn-fold's scaled weights, the blocked layout's packed weights) so cost
// nothing per run, while a param written between runs still counts: an update section marks
// the change itself, and whoever else writes a param says so (Context::params_changed).
// A training program's params change every step: hoisting there would save nothing.
// Instructions that depend on the run (its mode, random draws) or update operands stay.
#include <unordered_set>

#include "engine/passes/pass.h"
#include "engine/passes/uses.h"
#include "isa/opcode.h"

namespace nnasm {

namespace {

bool hoistable(const Program& p, const Uses& u, const Instruction& ins, const std::unordered_set<TensorId>& derived) {
  if (ins.section != Section::FORWARD) return false;
  if (ins.info().flags & (OPF_MODE | OPF_RANDOM | OPF_INPLACE | OPF_UPDATES_STATE)) return false;
  for (TensorId id : ins.in) {
    if (derived.count(id)) continue;
    const Role r = p.desc(id).role;
    if ((r != Role::PARAM && r != Role::CONST && r != Role::STATE) || u.updated_in_place(id)) return false;
  }
  for (TensorId id : ins.out)
    if (p.desc(id).role != Role::TEMPORARY || p.desc(id).is_output) return false;
  return true;
}

}  // namespace

Result<int> pass_derive(Program& p) {
  const Uses u(p);
  std::unordered_set<TensorId> derived;
  std::vector<Instruction> first, rest;
  int n = 0;
  for (const Instruction& ins : p.code()) {
    const bool hoist = hoistable(p, u, ins, derived);
    if (ins.section != Section::DERIVE && !hoist) {
      rest.push_back(ins);
      continue;
    }
    first.push_back(ins);
    if (hoist) {
      first.back().section = Section::DERIVE;
      add_note(first.back(), "derived: recomputed only when params change");
      ++n;
    }
    derived.insert(ins.out.begin(), ins.out.end());
  }
  if (!n) return 0;
  first.insert(first.end(), rest.begin(), rest.end());
  NNASM_TRY(p.set_code(std::move(first)));
  return n;
}

}  // namespace nnasm
