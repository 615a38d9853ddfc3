// The listing printer: one normalized text per program. Everything the parser reads back is
// printed (every immediate, even at its default), and what the engine inferred goes into a
// trailing comment the parser skips. Header lines follow declaration order so that parsing the
// text declares tensors in the same order and Program::outputs() keeps its order across a round
// trip.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include <fmt/format.h>

#include "serialize/listing.h"

namespace nnasm {
namespace {

constexpr int MNEMONIC_WIDTH = 12;  // the longest mnemonic, CLIPPED_RELU
constexpr size_t COMMENT_COLUMN = 52;
constexpr size_t MAX_ALIGN = 16;  // names and types longer than this are not waited for
constexpr size_t VALUES_PER_LINE = 8;

// i32, i8 and u8 tensors print whole numbers, as init_tensor stores them (toward zero, saturated here so a
// value outside the range cannot be undefined behaviour).
std::string int_value(double v) {
  if (std::isnan(v)) return "0";
  if (v <= -2147483648.0) return "-2147483648";
  if (v >= 2147483647.0) return "2147483647";
  return fmt::format("{}", static_cast<int32_t>(v));
}

std::string init_text(const TensorDesc& d) {
  const InitSpec& in = d.init;
  switch (in.kind) {
    // A const with neither values nor a kind is zero-filled, which the parser spells init=zeros.
    case InitKind::NONE: return d.role == Role::CONST && d.values.empty() ? "init=zeros" : "";
    case InitKind::CONSTANT: return fmt::format("init=constant value={}", float_to_string(in.a));
    case InitKind::UNIFORM:
      return fmt::format("init=uniform low={} high={}", float_to_string(in.a), float_to_string(in.b));
    case InitKind::NORMAL:
      return fmt::format("init=normal mean={} std={}", float_to_string(in.a), float_to_string(in.b));
    default: return fmt::format("init={}", init_name(in.kind));
  }
}

std::string values_text(const TensorDesc& d) {
  if (d.values.empty()) return "";
  std::vector<std::string> v;
  v.reserve(d.values.size());
  // bf16 values are what the tensor holds (Program::declare rounded them), so the shortest f32
  // form reads back to the same bits; i8 and u8 print as integers, like i32.
  const bool real = d.type.dtype == DType::F32 || d.type.dtype == DType::BF16;
  for (double x : d.values) v.push_back(real ? float_to_string(x) : int_value(x));
  if (v.size() <= VALUES_PER_LINE) return fmt::format(" = [{}]", fmt::join(v, ", "));
  // A matrix with short rows prints one row per line; anything else eight values a line.
  const Shape& sh = d.type.shape;
  const int64_t last = sh.rank >= 2 ? sh[sh.rank - 1] : 0;
  const size_t per_line =
      last >= 2 && last <= static_cast<int64_t>(VALUES_PER_LINE) ? static_cast<size_t>(last) : VALUES_PER_LINE;
  std::string s = " = [\n";
  for (size_t i = 0; i < v.size(); i += per_line) {
    const size_t n = std::min(per_line, v.size() - i);
    s += fmt::format("    {}{}\n", fmt::join(v.begin() + i, v.begin() + i + n, ", "), i + n < v.size() ? "," : "");
  }
  return s + "]";
}

// "input  %x  : f32[1,784]" / "param  @w1 : f32[784,256]  init=he_normal = [...]", names and
// (before an init) types padded to the header's widest so the columns line up.
std::string declaration_text(const TensorDesc& d, size_t name_w, size_t type_w) {
  const std::string name = fmt::format("{}{}", d.sigil(), d.name), type = d.type.str(), init = init_text(d);
  std::string s = fmt::format("{:<6} {:<{}} : ", role_name(d.role), name, name_w);
  s += init.empty() ? type : fmt::format("{:<{}}  {}", type, type_w, init);
  return s + values_text(d) + "\n";
}

std::string operand(const Program& p, TensorId id) {
  const TensorDesc& d = p.desc(id);
  return fmt::format("{}{}", d.sigil(), d.name);
}

std::string instruction_text(const Program& p, const Instruction& ins, const std::string& note) {
  const OpInfo& info = ins.info();
  std::vector<std::string> in, out, imm, types;
  for (TensorId id : ins.in) in.push_back(operand(p, id));
  for (TensorId id : ins.out) {
    out.push_back(operand(p, id));
    types.push_back(p.desc(id).type.str());
  }
  for (size_t k = 0; k < info.imms.size() && k < ins.imm.size(); ++k)
    imm.push_back(fmt::format("{}={}", info.imms[k].key, imm_to_string(ins.imm[k])));
  std::string body = fmt::format("  {:<{}} {} -> {}", info.mnemonic, MNEMONIC_WIDTH, fmt::join(in, ", "),
                                 fmt::join(out, ", "));
  if (!imm.empty()) body += fmt::format("  {}", fmt::join(imm, " "));
  if (body.size() < COMMENT_COLUMN) body.resize(COMMENT_COLUMN, ' ');
  return fmt::format("{}  ; {}{}{}\n", body, fmt::join(types, ", "), note.empty() ? "" : "  ", note);
}

}  // namespace

std::string program_print(const Program& p) { return program_print(p, nullptr); }

std::string program_print(const Program& p, const std::function<std::string(size_t)>& note) {
  size_t name_w = 0, type_w = 0;
  for (TensorId id : p.tensors()) {
    const TensorDesc& d = p.desc(id);
    if (!d.declared_up_front()) continue;
    name_w = std::max(name_w, std::min(MAX_ALIGN, d.name.size() + 1));
    if (!init_text(d).empty()) type_w = std::max(type_w, std::min(MAX_ALIGN, d.type.str().size()));
  }
  std::string s = p.training() ? "mode training\n" : "";
  // Temporaries are declared by the instruction that defines them, so only an output line shows
  // one in the header.
  for (TensorId id : p.tensors()) {
    const TensorDesc& d = p.desc(id);
    if (d.declared_up_front()) s += declaration_text(d, name_w, type_w);
    if (d.is_output) s += fmt::format("output {}{}\n", d.sigil(), d.name);
  }
  if (!s.empty()) s += "\n";
  // Code is kept in section order (the parser accepts sections only in that order), so a label
  // is printed where the section changes.
  Section section = p.code().empty() ? Section::FORWARD : p.code().front().section;
  s += fmt::format("{}:\n", section_name(section));
  for (size_t i = 0; i < p.code().size(); ++i) {
    const Instruction& ins = p.code()[i];
    if (ins.section != section) {
      section = ins.section;
      s += fmt::format("\n{}:\n", section_name(section));
    }
    s += instruction_text(p, ins, note ? note(i) : std::string());
  }
  return s;
}

}  // namespace nnasm
