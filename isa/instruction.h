// One instruction: an opcode, the ids of its input and output tensors, its immediates (one per
// schema entry, in schema order, defaults filled in) and where it came from (for errors).
#pragma once
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "isa/opcode.h"

namespace nnasm {

// A source position: a listing's file:line:col, or a shell call's file:line (col 0).
struct SrcLoc {
  std::string file;
  int line = 0;
  int col = 0;
  bool known() const { return line > 0; }
  std::string str() const;  // "file:line:col" / "file:line"; empty if unknown
};

enum class Section : uint8_t { FORWARD };
const char* section_name(Section s);  // "forward"

struct Instruction {
  Opcode op = Opcode::INVALID;
  std::vector<TensorId> in;
  std::vector<TensorId> out;
  std::vector<Imm> imm;
  Section section = Section::FORWARD;
  SrcLoc loc;

  const OpInfo& info() const { return op_info(op); }
  // Immediate by schema position; ops name positions with an enum in their file.
  double f(int k) const { return imm[k].f; }
  int64_t i(int k) const { return imm[k].i; }
  const std::vector<int64_t>& ints(int k) const { return imm[k].ints; }
};

// An instruction with every immediate at its default. Requires that all immediates of `op` have
// defaults, or that the caller sets the others before recording.
Instruction make_instruction(Opcode op, std::vector<TensorId> in, std::vector<TensorId> out);

}  // namespace nnasm
