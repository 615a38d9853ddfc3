// Tensor descriptors: id, name, type, role and initialization, as a program declares them. A
// gradient is a tensor of its own (named NAME.grad by autodiff), so that backward instructions
// name it like any other operand. Values live elsewhere: in a runtime's storage (engine/tensor.h)
// or, for a constant written inline, in the descriptor's `values`.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "isa/shape.h"

namespace nnasm {

using TensorId = uint64_t;  // unique within a Context
constexpr TensorId NO_TENSOR = 0;

// STATE: persistent, not trained (optimizer moments, step counters, running statistics).
enum class Role : uint8_t { INPUT, OUTPUT, PARAM, CONST, TEMPORARY, STATE };
const char* role_name(Role r);  // "input", "output", ...

enum class InitKind : uint8_t {
  NONE, ZEROS, ONES, CONSTANT, UNIFORM, NORMAL, XAVIER_UNIFORM, XAVIER_NORMAL, HE_UNIFORM, HE_NORMAL
};
const char* init_name(InitKind k);                 // "he_normal"
bool init_from_name(const std::string& s, InitKind* out);

// How a param is initialized. `a`, `b` are the kind's arguments: CONSTANT value; UNIFORM low, high;
// NORMAL mean, std. The fan-based kinds take no arguments.
struct InitSpec {
  InitKind kind = InitKind::NONE;
  double a = 0, b = 0;
  bool operator==(const InitSpec& o) const { return kind == o.kind && a == o.a && b == o.b; }
};

struct TensorDesc {
  TensorId id = NO_TENSOR;
  std::string name;  // unique in its program; the listing shows it as %name or @name
  TensorType type;
  Role role = Role::TEMPORARY;
  bool is_output = false;  // listed by `output %name`; a temporary may also be an output
  InitSpec init;
  std::vector<double> values;  // inline values of a const (or param), row-major; empty if none

  // `@` for what persists across runs (params, constants, state), `%` for everything else.
  char sigil() const { return role == Role::PARAM || role == Role::CONST || role == Role::STATE ? '@' : '%'; }
  // Declared in a listing's header (rather than by the instruction that defines it).
  bool declared_up_front() const { return role == Role::INPUT || sigil() == '@'; }
};

// The bytes storage of `bytes` bytes occupies: whole 64-byte lines, at least one (so that every
// tensor, an empty one included, has a line of its own to load from).
inline size_t padded_bytes(size_t bytes) { return bytes == 0 ? 64 : (bytes + 63) / 64 * 64; }
// The bytes a tensor of type `t` occupies, in storage of its own or in an arena slot.
inline size_t storage_bytes(const TensorType& t) {
  return padded_bytes(static_cast<size_t>(t.shape.numel()) * dtype_size(t.dtype));
}

}  // namespace nnasm
