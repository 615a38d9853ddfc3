// Expands isa/opcodes.def into the runtime op table and parses each immediate schema once.
#include "isa/opcode.h"

#include <cmath>
#include <cstdlib>
#include <unordered_map>

#include <fmt/format.h>
#include <xxhash.h>

namespace nnasm {
namespace {

// Schemas are written by us in opcodes.def, so a malformed one is a programming error that the
// table test catches; the parser here stays simple and total.
Imm parse_default(const ImmSpec& s, std::string_view text) {
  Imm v;
  v.type = s.type;
  std::string t(text);
  switch (s.type) {
    // Rounded to float, as the listing and imm_f store every f32 immediate.
    case ImmType::F32: v.f = static_cast<float>(std::strtod(t.c_str(), nullptr)); break;
    case ImmType::I64:
    case ImmType::BOOL: v.i = std::strtoll(t.c_str(), nullptr, 10); break;
    case ImmType::ENUM:
      v.ident = t;
      for (size_t k = 0; k < s.choices.size(); ++k)
        if (s.choices[k] == t) v.i = static_cast<int64_t>(k);
      break;
    case ImmType::INTS:  // "[a,b,...]"
      for (size_t p = 1; p + 1 < t.size();) {
        char* end = nullptr;
        v.ints.push_back(std::strtoll(t.c_str() + p, &end, 10));
        p = static_cast<size_t>(end - t.c_str()) + 1;
      }
      break;
    case ImmType::STR: v.ident = t; break;  // unquoted, without commas
  }
  return v;
}

std::vector<ImmSpec> parse_schema(std::string_view schema) {
  std::vector<ImmSpec> out;
  size_t pos = 0;
  while (pos < schema.size()) {
    // Items are separated by commas outside brackets (a list default, `stride:ints=[1,1]`,
    // has its own); enum(...) choices are separated by '|'.
    const size_t end = schema_item_end(schema, pos);
    std::string_view item = schema.substr(pos, end - pos);
    pos = end + 1;
    ImmSpec s;
    size_t colon = item.find(':');
    s.key = std::string(item.substr(0, colon));
    std::string_view rest = item.substr(colon + 1);
    size_t eq = rest.find('=');
    std::string_view type = rest.substr(0, eq);
    if (type == "f32") s.type = ImmType::F32;
    else if (type == "i64") s.type = ImmType::I64;
    else if (type == "bool") s.type = ImmType::BOOL;
    else if (type == "ints") s.type = ImmType::INTS;
    else if (type == "str") s.type = ImmType::STR;
    else {
      s.type = ImmType::ENUM;
      std::string_view c = type.substr(5, type.size() - 6);  // enum(a|b)
      size_t p = 0;
      while (p <= c.size()) {
        size_t bar = c.find('|', p);
        if (bar == std::string_view::npos) bar = c.size();
        s.choices.emplace_back(c.substr(p, bar - p));
        p = bar + 1;
      }
    }
    if (eq != std::string_view::npos) {
      s.has_default = true;
      s.default_value = parse_default(s, rest.substr(eq + 1));
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<OpInfo> build_table() {
  std::vector<OpInfo> t;
#define OPCODE(id, NAME, MN, NIN, NOUT, SCHEMA, CAT, FLAGS) \
  t.push_back(OpInfo{Opcode::NAME, MN, NIN, NOUT, OpCategory::CAT, FLAGS, parse_schema(SCHEMA)});
#include "isa/opcodes.def"
#undef OPCODE
  return t;
}

struct Tables {
  std::vector<OpInfo> ops = build_table();
  std::unordered_map<std::string_view, size_t> by_mnemonic;
  std::unordered_map<uint32_t, size_t> by_id;
  Tables() {
    for (size_t i = 0; i < ops.size(); ++i) {
      by_mnemonic[ops[i].mnemonic] = i;
      by_id[static_cast<uint32_t>(ops[i].op)] = i;
    }
  }
};

// Immutable after its thread-safe first initialization: not model state.
const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

bool Imm::operator==(const Imm& o) const {
  if (type != o.type) return false;
  switch (type) {
    case ImmType::F32: return f == o.f || (std::isnan(f) && std::isnan(o.f));
    case ImmType::INTS: return ints == o.ints;
    case ImmType::STR: return ident == o.ident;
    default: return i == o.i;
  }
}

Imm imm_f(double v) {
  Imm m;
  m.type = ImmType::F32;
  m.f = static_cast<float>(v);
  return m;
}

Imm imm_i(int64_t v) {
  Imm m;
  m.type = ImmType::I64;
  m.i = v;
  return m;
}

Imm imm_ints(std::vector<int64_t> v) {
  Imm m;
  m.type = ImmType::INTS;
  m.ints = std::move(v);
  return m;
}

Imm imm_str(std::string v) {
  Imm m;
  m.type = ImmType::STR;
  m.ident = std::move(v);
  return m;
}

const std::vector<OpInfo>& all_ops() { return tables().ops; }

const OpInfo& op_info(Opcode op) {
  const Tables& t = tables();
  return t.ops[t.by_id.at(static_cast<uint32_t>(op))];
}

const OpInfo* op_by_mnemonic(std::string_view m) {
  const Tables& t = tables();
  auto it = t.by_mnemonic.find(m);
  return it == t.by_mnemonic.end() ? nullptr : &t.ops[it->second];
}

Opcode opcode_from_id(uint32_t id) {
  const Tables& t = tables();
  auto it = t.by_id.find(id);
  return it == t.by_id.end() ? Opcode::INVALID : t.ops[it->second].op;
}

int imm_index(const OpInfo& info, std::string_view key) {
  for (size_t i = 0; i < info.imms.size(); ++i)
    if (info.imms[i].key == key) return static_cast<int>(i);
  return -1;
}

std::string float_to_string(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{}", static_cast<float>(v));
}

std::string imm_to_string(const Imm& v) {
  switch (v.type) {
    case ImmType::F32: return float_to_string(v.f);
    case ImmType::I64:
    case ImmType::BOOL: return fmt::format("{}", v.i);
    case ImmType::ENUM: return v.ident;
    case ImmType::INTS: return fmt::format("[{}]", fmt::join(v.ints, ","));
    case ImmType::STR: {
      std::string s = "\"";
      for (char c : v.ident) {
        if (c == '"' || c == '\\') s += '\\';
        s += c;
      }
      return s + "\"";
    }
  }
  return "";
}

uint64_t opcode_table_hash() {
  // The rows as the preprocessor sees them, schema macros expanded: any change to a row changes it.
#define OPCODE(id, NAME, MN, NIN, NOUT, SCHEMA, CAT, FLAGS) #id " " MN " " #NIN " " #NOUT " " SCHEMA " " #CAT " " #FLAGS "\n"
  static constexpr char kTable[] =
#include "isa/opcodes.def"
      ;
#undef OPCODE
  static const uint64_t hash = XXH3_64bits(kTable, sizeof kTable - 1);
  return hash;
}

}  // namespace nnasm
