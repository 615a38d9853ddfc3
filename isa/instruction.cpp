// Instruction helpers.
#include "isa/instruction.h"

#include <fmt/format.h>

namespace nnasm {

std::string SrcLoc::str() const {
  if (!known()) return "";
  return col > 0 ? fmt::format("{}:{}:{}", file, line, col) : fmt::format("{}:{}", file, line);
}

const char* section_name(Section) { return "forward"; }

Instruction make_instruction(Opcode op, std::vector<TensorId> in, std::vector<TensorId> out) {
  Instruction ins;
  ins.op = op;
  ins.in = std::move(in);
  ins.out = std::move(out);
  for (const ImmSpec& s : op_info(op).imms) {
    Imm v = s.default_value;
    v.type = s.type;
    ins.imm.push_back(std::move(v));
  }
  return ins;
}

}  // namespace nnasm
