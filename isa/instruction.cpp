// Instruction helpers.
#include "isa/instruction.h"

#include <fmt/format.h>

namespace nnasm {

std::string SrcLoc::str() const {
  if (!known()) return "";
  return col > 0 ? fmt::format("{}:{}:{}", file, line, col) : fmt::format("{}:{}", file, line);
}

const char* section_name(Section s) {
  switch (s) {
    case Section::DERIVE: return "derive";
    case Section::FORWARD: return "forward";
    case Section::BACKWARD: return "backward";
    case Section::UPDATE: return "update";
  }
  return "?";
}

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

Status set_imm(Instruction& ins, std::string_view key, Imm v) {
  const OpInfo& info = ins.info();
  const int k = imm_index(info, key);
  if (k < 0) return Status::errorf("{}: no immediate '{}'", info.mnemonic, key);
  const ImmSpec& spec = info.imms[k];
  v.type = spec.type;
  if (v.type == ImmType::ENUM) {
    if (v.i < 0 || v.i >= static_cast<int64_t>(spec.choices.size()))
      return Status::errorf("{}: '{}' has no choice {}", info.mnemonic, key, v.i);
    v.ident = spec.choices[static_cast<size_t>(v.i)];
  }
  ins.imm[k] = std::move(v);
  return Status::ok();
}

}  // namespace nnasm
