// The opcode enum and the static per-opcode facts (mnemonic, operand counts, immediate schema),
// all expanded from isa/opcodes.def.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace nnasm {

enum OpFlags : uint32_t {
  OPF_COMMUTATIVE = 1u << 0,  // inputs may be swapped
  OPF_ACTIVATION = 1u << 1,   // fusable as an epilogue
  OPF_ANY_DTYPE = 1u << 2,    // takes f32 and i32 alike (moves bytes; CAST converts them)
  OPF_INPLACE = 1u << 3,      // every output is one of the inputs, updated in place
  // The result depends on the run's mode or random stream (RunState), which can change between
  // runs: never folded into a constant at optimization.
  OPF_MODE = 1u << 4,
  // Draws from the run's random stream (DROPOUT): never merged with an equal-looking instruction.
  OPF_RANDOM = 1u << 5,
  // When training, also updates in place the inputs its hooks' state_inputs mask names
  // (BATCHNORM2D's running statistics), which are not outputs: the listing form stays one
  // output. Those inputs must be tensors declared up front (state, param or input; not a const)
  // and no other operand of the instruction; they count as updated in place for the passes, and
  // the instruction is never merged, folded or removed.
  OPF_UPDATES_STATE = 1u << 6,
  // The output is the input's bytes under another shape: the memory planner may give it the
  // input's slot where the input dies there, and the kernel then copies nothing.
  OPF_VIEW = 1u << 7,
  // Takes operands of the reduced-precision storage types (bf16, i8, u8: isa/shape.h), each where
  // its shape inference says. Program::append refuses such an operand for every other op.
  OPF_REDUCED = 1u << 8,
};

enum class OpCategory : uint8_t { ELEMENTWISE_UNARY, ELEMENTWISE_BINARY, LINALG, REDUCE, SHAPE, DATA, LOSS, OPTIMIZER };

enum class Opcode : uint16_t {
  INVALID = 0,
#define OPCODE(id, NAME, MN, NIN, NOUT, SCHEMA, CAT, FLAGS) NAME = id,
#include "isa/opcodes.def"
#undef OPCODE
};

enum class ImmType : uint8_t { F32, I64, BOOL, INTS, ENUM, STR };

// A value of an immediate. Which member is meaningful follows the schema's type; ENUM stores the
// index of the identifier in `choices` in `i` (and its text in `ident` for printing); STR stores
// its text in `ident`.
struct Imm {
  ImmType type = ImmType::F32;
  double f = 0;
  int64_t i = 0;
  std::vector<int64_t> ints;
  std::string ident;
  bool operator==(const Imm& o) const;
};

// Immediate constructors (the ENUM value is set by index; recording fills in its text).
Imm imm_f(double v);  // rounded to float, as the listing stores it
Imm imm_i(int64_t v);
Imm imm_ints(std::vector<int64_t> v);
Imm imm_str(std::string v);

struct ImmSpec {
  std::string key;
  ImmType type;
  std::vector<std::string> choices;  // ENUM only
  bool has_default = false;
  Imm default_value;
};

struct OpInfo {
  Opcode op;
  const char* mnemonic;
  int n_in;  // -1: variadic, at least one
  int n_out;  // -1: as many as inputs
  OpCategory category;
  uint32_t flags;
  std::vector<ImmSpec> imms;  // parsed from the schema string
};

// The immediate schema of `op` as isa/opcodes.def writes it (schema macros expanded); "" for an
// opcode not in the table. Usable at compile time.
constexpr std::string_view op_schema(Opcode op) {
  switch (op) {
#define OPCODE(id, NAME, MN, NIN, NOUT, SCHEMA, CAT, FLAGS) \
  case Opcode::NAME: return SCHEMA;
#include "isa/opcodes.def"
#undef OPCODE
    default: return {};
  }
}

// Where the schema item starting at `pos` ends: at the next comma outside brackets (a list
// default, `stride:ints=[1,1]`, has its own commas), or at the end.
constexpr size_t schema_item_end(std::string_view schema, size_t pos) {
  for (int depth = 0; pos < schema.size() && (schema[pos] != ',' || depth > 0); ++pos)
    depth += schema[pos] == '[' ? 1 : schema[pos] == ']' ? -1 : 0;
  return pos;
}

// Index of `key` in the immediate schema of `op`, or -1. Usable at compile time: code outside isa/
// names an immediate with NNASM_IMM, never by a written-out position, so a schema that changes
// order or loses a key is a build error instead of a wrong read at run time.
constexpr int imm_index(Opcode op, std::string_view key) {
  const std::string_view s = op_schema(op);
  int k = 0;
  for (size_t pos = 0; pos < s.size(); ++k) {
    const size_t end = schema_item_end(s, pos);
    const std::string_view item = s.substr(pos, end - pos);
    if (item.substr(0, item.find(':')) == key) return k;
    pos = end + 1;
  }
  return -1;
}

// Index of `key` where it is the same for every op of `ops` (code that serves several opcodes
// with one layout, such as the REDUCE_* family), else -1.
constexpr int imm_index_shared(std::initializer_list<Opcode> ops, std::string_view key) {
  int k = -1;
  for (const Opcode op : ops) {
    const int i = imm_index(op, key);
    if (i < 0 || (k >= 0 && i != k)) return -1;
    k = i;
  }
  return k;
}

// The index of `choice` among the choices of enum immediate `key` of `op` (the value an ENUM
// immediate holds), or -1.
constexpr int imm_choice(Opcode op, std::string_view key, std::string_view choice) {
  const int k = imm_index(op, key);
  if (k < 0) return -1;
  std::string_view s = op_schema(op);
  for (int i = 0; i < k; ++i) s = s.substr(schema_item_end(s, 0) + 1);
  s = s.substr(0, schema_item_end(s, 0));
  const size_t open = s.find(":enum(");
  if (open == std::string_view::npos) return -1;
  s = s.substr(open + 6, s.find(')') - open - 6);
  for (int i = 0;; ++i) {
    const size_t bar = s.find('|');
    if (s.substr(0, bar) == choice) return i;
    if (bar == std::string_view::npos) return -1;
    s = s.substr(bar + 1);
  }
}

template <int K>
constexpr int imm_checked() {
  static_assert(K >= 0, "no immediate (or enum choice) of that name in the op's schema (isa/opcodes.def), or not "
                        "at one position in all the ops named");
  return K;
}

// The schema position of immediate `key` of opcode OP, as a compile-time constant; an unknown key
// does not compile. ins.f(NNASM_IMM(LEAKYRELU, slope)).
#define NNASM_IMM(OP, key) (::nnasm::imm_checked<::nnasm::imm_index(::nnasm::Opcode::OP, #key)>())
// The value of enum immediate `key` of OP that means `choice`, as a compile-time constant:
// ins.i(NNASM_IMM(GELU, approx)) == NNASM_CHOICE(GELU, approx, tanh).
#define NNASM_CHOICE(OP, key, choice) \
  (::nnasm::imm_checked<::nnasm::imm_choice(::nnasm::Opcode::OP, #key, #choice)>())
// The same for code that serves several opcodes: the key must sit at one position in all of them.
// NNASM_IMM_SHARED(axis, Opcode::REDUCE_SUM, Opcode::REDUCE_MAX).
#define NNASM_IMM_SHARED(key, ...) (::nnasm::imm_checked<::nnasm::imm_index_shared({__VA_ARGS__}, #key)>())

// All opcodes in table order.
const std::vector<OpInfo>& all_ops();
// Facts for one opcode; `op` must be a valid opcode (see opcode_from_id).
const OpInfo& op_info(Opcode op);
// nullptr when `mnemonic` names no opcode.
const OpInfo* op_by_mnemonic(std::string_view mnemonic);
// Opcode::INVALID when `id` is not in the table (files store ids).
Opcode opcode_from_id(uint32_t id);
// XXH3-64 of the opcode table's text (every row of isa/opcodes.def: id, mnemonic, operand counts,
// schema, category, flags). Model files record it, so a reader can tell a file written by a build
// with a different instruction set.
uint64_t opcode_table_hash();
// Index of `key` in the op's immediate schema, or -1.
int imm_index(const OpInfo& info, std::string_view key);
// Formats an immediate value as the listing writes it ("1", "0.5", "[1,2]", "tanh", "\"a b\"":
// a string in double quotes, with '"' and '\\' escaped by a backslash).
std::string imm_to_string(const Imm& v);
// A value that prints and reads back as the same float: the shortest round-trip form.
std::string float_to_string(double v);

}  // namespace nnasm
