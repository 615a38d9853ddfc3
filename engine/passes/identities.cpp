// Algebraic identities. An instruction that computes its input unchanged disappears (its readers
// read the input instead): SCALE by 1, RESHAPE to the same shape, TRANSPOSE by the identity
// permutation, ADD of a zero FILL with alpha = 1, MUL by a FILL of 1. A RESHAPE of a private
// RESHAPE reads the first one's input; a TRANSPOSE of a private TRANSPOSE composes the two.
// Never when the result is observable (an output keeps its instruction).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/passes/pass.h"
#include "engine/passes/uses.h"

namespace nnasm {

namespace {

// TRANSPOSE's perm with negative entries (counted from the end) made positive.
std::vector<int64_t> perm_of(const Instruction& ins) {
  std::vector<int64_t> perm = ins.ints(NNASM_IMM(TRANSPOSE, perm));
  for (int64_t& d : perm)
    if (d < 0) d += static_cast<int64_t>(perm.size());
  return perm;
}

// The value a FILL writes, if `id` is made by a FILL.
bool filled_with(const Program& p, const Uses& u, TensorId id, double* value) {
  const size_t k = u.producer(id);
  if (k == Uses::NONE || p.code()[k].op != Opcode::FILL) return false;
  *value = p.code()[k].f(NNASM_IMM(FILL, value));
  return true;
}

// The input an instruction passes through unchanged, or NO_TENSOR.
TensorId pass_through(const Program& p, const Uses& u, const Instruction& ins) {
  const auto same_type = [&](TensorId a) { return p.desc(a).type == p.desc(ins.out[0]).type; };
  double v = 0;
  switch (ins.op) {
    case Opcode::SCALE: return ins.f(NNASM_IMM(SCALE, alpha)) == 1.0 ? ins.in[0] : NO_TENSOR;
    case Opcode::RESHAPE: return same_type(ins.in[0]) ? ins.in[0] : NO_TENSOR;
    case Opcode::TRANSPOSE:
      for (size_t k = 0; k < ins.ints(NNASM_IMM(TRANSPOSE, perm)).size(); ++k)
        if (perm_of(ins)[k] != static_cast<int64_t>(k)) return NO_TENSOR;
      return ins.in[0];
    case Opcode::ADD:
      for (int k = 0; k < 2; ++k) {
        const double keep = ins.f(k == 0 ? NNASM_IMM(ADD, alpha) : NNASM_IMM(ADD, beta));
        if (keep == 1.0 && filled_with(p, u, ins.in[1 - k], &v) && v == 0.0 && same_type(ins.in[k])) return ins.in[k];
      }
      return NO_TENSOR;
    case Opcode::MUL:
      for (int k = 0; k < 2; ++k)
        if (filled_with(p, u, ins.in[1 - k], &v) && v == 1.0 && same_type(ins.in[k])) return ins.in[k];
      return NO_TENSOR;
    default: return NO_TENSOR;
  }
}

}  // namespace

Result<int> pass_identities(Program& p) {
  const Uses u(p);
  std::vector<Instruction> code = p.code();
  std::vector<bool> drop(code.size(), false);
  int n = 0;
  for (size_t i = 0; i < code.size(); ++i) {
    Instruction& ins = code[i];
    if (ins.out.size() != 1) continue;
    const TensorId src = pass_through(p, u, ins);
    if (src != NO_TENSOR && !u.observable(ins.out[0]) && !u.updated_in_place(src)) {
      replace_reads(code, i + 1, ins.out[0], src,
                    fmt::format("reads {}{}: {} was the identity", p.desc(src).sigil(), p.desc(src).name, describe(p, ins)));
      drop[i] = true;
      ++n;
      continue;
    }
    // Pairs: the first instruction's result must be private to this one.
    const size_t k = u.producer(ins.in[0]);
    if (k == Uses::NONE || drop[k] || !u.private_to(ins.in[0], i)) continue;
    const Instruction& first = code[k];
    if (ins.op == Opcode::RESHAPE && first.op == Opcode::RESHAPE) {
      add_note(ins, fmt::format("reshape of {}", describe(p, first)));
      ins.in[0] = first.in[0];
      drop[k] = true;
      ++n;
    } else if (ins.op == Opcode::TRANSPOSE && first.op == Opcode::TRANSPOSE) {
      // y[i] = t[perm2] with t = x[perm1]: the composed permutation is perm1[perm2[j]].
      const std::vector<int64_t> perm1 = perm_of(first);
      std::vector<int64_t> perm;
      for (int64_t j : perm_of(ins)) perm.push_back(perm1[j]);
      add_note(ins, fmt::format("transpose of {} (perm {} then {})", describe(p, first),
                                first.ints(NNASM_IMM(TRANSPOSE, perm)), ins.ints(NNASM_IMM(TRANSPOSE, perm))));
      ins.imm[NNASM_IMM(TRANSPOSE, perm)] = imm_ints(perm);
      ins.in[0] = first.in[0];
      drop[k] = true;
      ++n;
    }
  }
  return commit(p, std::move(code), drop, n);
}

}  // namespace nnasm
