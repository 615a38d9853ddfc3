// Scale folding. A SCALE whose result only one instruction reads folds into it:
//   ADD a, SCALE(b, s)  alpha=α beta=β  →  ADD a, b  alpha=α beta=β·s   (either side)
//   SUB a, SCALE(b, s)                  →  ADD a, b  alpha=1 beta=−s     (SUB a, b = ADD 1, −1)
//   SUB SCALE(a, s), b                  →  ADD a, b  alpha=s beta=−1
//   SCALE(SCALE(x, s), t)               →  SCALE x   alpha=s·t
// SCALE keeps its input's shape, so broadcasting is unchanged. The factors multiply in double and
// are stored rounded to float, as every f32 immediate is.
#include <fmt/format.h>

#include "engine/passes/pass.h"
#include "engine/passes/uses.h"

namespace nnasm {

Result<int> pass_scale_fold(Program& p) {
  const Uses u(p);
  std::vector<Instruction> code = p.code();
  std::vector<bool> drop(code.size(), false);
  int n = 0;
  // The SCALE making input k of instruction i, when private to it and not already folded.
  auto scale_in = [&](size_t i, int k) -> const Instruction* {
    const TensorId id = code[i].in[k];
    const size_t s = u.producer(id);
    if (s == Uses::NONE || drop[s] || code[s].op != Opcode::SCALE || !u.private_to(id, i)) return nullptr;
    return &code[s];
  };
  for (size_t i = 0; i < code.size(); ++i) {
    Instruction& ins = code[i];
    const Opcode op = ins.op;
    if (op != Opcode::ADD && op != Opcode::SUB && op != Opcode::SCALE) continue;
    if (ins.in.size() == 2 && ins.in[0] == ins.in[1]) continue;  // ADD x, x: one SCALE, two reads
    double coef[2] = {1, 1};
    if (op == Opcode::ADD) coef[0] = ins.f(NNASM_IMM(ADD, alpha)), coef[1] = ins.f(NNASM_IMM(ADD, beta));
    if (op == Opcode::SUB) coef[1] = -1;
    if (op == Opcode::SCALE) coef[0] = ins.f(NNASM_IMM(SCALE, alpha));
    bool folded = false;
    std::string from;
    for (int k = 0; k < static_cast<int>(ins.in.size()); ++k) {
      const Instruction* s = scale_in(i, k);
      if (!s) continue;
      coef[k] *= s->f(NNASM_IMM(SCALE, alpha));
      from += fmt::format("{}{} (alpha={})", from.empty() ? "" : ", ", describe(p, *s), static_cast<float>(s->f(NNASM_IMM(SCALE, alpha))));
      ins.in[k] = s->in[0];
      drop[s - code.data()] = true;
      folded = true;
      ++n;
    }
    if (!folded) continue;
    if (op == Opcode::SCALE) {
      ins.imm[NNASM_IMM(SCALE, alpha)] = imm_f(coef[0]);
    } else {
      Instruction add = make_instruction(Opcode::ADD, ins.in, ins.out);
      add.imm[NNASM_IMM(ADD, alpha)] = imm_f(coef[0]);
      add.imm[NNASM_IMM(ADD, beta)] = imm_f(coef[1]);
      add.section = ins.section;
      add.loc = ins.loc;
      add.note = ins.note;
      ins = std::move(add);
    }
    add_note(ins, "folded " + from);
  }
  return commit(p, std::move(code), drop, n);
}

}  // namespace nnasm
