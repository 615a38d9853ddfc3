// Common subexpression elimination: an instruction with the same opcode, inputs and immediates
// as an earlier one reads that one's results instead of computing them again, and disappears
// (unless a result of its own is observable). Inputs of the commutative ops without immediates
// (MUL, MAXIMUM, MINIMUM) are compared as a set. Never for in-place instructions, nor across an
// in-place update of an input (the earlier result was computed from the value before it), nor
// for instructions that update state (BATCHNORM2D: each update counts) or draw random numbers
// (DROPOUT: two dropouts are two masks).
#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/passes/pass.h"
#include "engine/passes/uses.h"

namespace nnasm {

namespace {

std::string key_of(const Instruction& ins) {
  std::vector<TensorId> in = ins.in;
  if ((ins.info().flags & OPF_COMMUTATIVE) && ins.imm.empty()) std::sort(in.begin(), in.end());
  std::string key = fmt::format("{}|{}|", static_cast<int>(ins.op), fmt::join(in, ","));
  for (const Imm& v : ins.imm) key += imm_to_string(v) + "|";
  return key;
}

}  // namespace

Result<int> pass_cse(Program& p) {
  const Uses u(p);
  std::vector<Instruction> code = p.code();
  std::vector<bool> drop(code.size(), false);
  std::unordered_map<std::string, size_t> seen;
  int n = 0;
  for (size_t i = 0; i < code.size(); ++i) {
    Instruction& ins = code[i];
    if (ins.info().flags & (OPF_INPLACE | OPF_UPDATES_STATE | OPF_RANDOM)) continue;
    bool stable = true;
    for (TensorId id : ins.in) stable = stable && !u.updated_in_place(id);
    if (!stable) continue;
    const std::string key = key_of(ins);
    auto it = seen.find(key);
    if (it == seen.end()) {
      seen.emplace(key, i);
      continue;
    }
    const Instruction& first = code[it->second];
    bool observable = false;
    for (TensorId id : ins.out) observable = observable || u.observable(id) || u.updated_in_place(id);
    if (observable) continue;
    for (size_t k = 0; k < ins.out.size(); ++k)
      replace_reads(code, i + 1, ins.out[k], first.out[k],
                    fmt::format("reads %{}: {} computed it again", p.desc(first.out[k]).name, describe(p, ins)));
    drop[i] = true;
    ++n;
  }
  return commit(p, std::move(code), drop, n);
}

}  // namespace nnasm
