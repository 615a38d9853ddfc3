// Tensors: a descriptor (id, name, type, role, initialization) and 64-byte-aligned storage. A
// gradient is a tensor of its own (named NAME.grad by autodiff), so that backward instructions
// name it like any other operand. Storage is padded to a whole number of 64-byte lines so vector
// kernels may load the last partial vector without faulting. A temporary the memory planner
// placed (engine/memory_plan.h) has no storage of its own but a slot in an executor's arena.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/shape.h"

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

// A host's allocator (a game engine's, say): alloc(user, bytes, alignment) returns memory or null;
// free(user, p) releases it. Used for the big blocks — tensor storage, arenas, kernel scratch —
// of a context that has one (Context::set_allocator); bookkeeping uses the C++ heap.
struct HostAllocator {
  void* (*alloc)(void* user, size_t bytes, size_t alignment) = nullptr;
  void (*free)(void* user, void* p) = nullptr;
  void* user = nullptr;
};

// Owns one 64-byte-aligned, zero-initialized block of padded_bytes(bytes), or nothing if
// allocation failed; from `allocator` when given (which must outlive the buffer), else the C
// heap. Move-only.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes, const HostAllocator* allocator = nullptr);
  ~AlignedBuffer();
  AlignedBuffer(AlignedBuffer&& o) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  void* data() const { return p_; }
  size_t bytes() const { return bytes_; }
  bool empty() const { return p_ == nullptr; }

 private:
  void release();
  void* p_ = nullptr;
  size_t bytes_ = 0;
  const HostAllocator* allocator_ = nullptr;
};

struct Tensor {
  TensorDesc desc;
  AlignedBuffer data;  // storage of its own
  // Set by Executor::prepare when it planned this temporary into its arena: the bytes the
  // kernels use, standing in for `data`. It belongs to the executor prepared last over this
  // tensor (a prepare that does not plan the tensor clears it; the planning executor clears it
  // when destroyed), and holds the value only between the instruction defining it and the last
  // one reading it: after a run it may hold a later temporary's bytes.
  void* arena_slot = nullptr;

  // Allocates zeroed storage of its own if absent (from `allocator` when given); false if the
  // allocation failed. Requires the shape to be final (its size checked against limits by
  // whoever made it).
  bool allocate(const HostAllocator* allocator = nullptr);
  bool allocated() const { return !data.empty() || arena_slot; }
  // Where the values are: the arena slot if there is one, else the tensor's own storage.
  void* storage() const { return arena_slot ? arena_slot : data.data(); }
  float* f32() const { return static_cast<float*>(storage()); }
  int32_t* i32() const { return static_cast<int32_t*>(storage()); }
  int64_t numel() const { return desc.type.shape.numel(); }
};

}  // namespace nnasm
