// A Program: the tensor declarations and the ordered instruction list. Its tensors live in a
// tensor map (isa/tensor_map.h: a runtime's Context, or descriptors alone); the program keeps their declaration order and a name index. Appending an
// instruction validates it against the opcode table and runs the op's shape inference, so a
// program is always well-typed. Not thread-safe.
#pragma once
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "isa/instruction.h"
#include "isa/status.h"
#include "isa/tensor_map.h"

namespace nnasm {

// Size limits checked whenever a shape enters a program, so that nothing is ever allocated from
// an unchecked number (listing files, later model files).
constexpr int64_t MAX_TENSOR_ELEMENTS = int64_t(1) << 32;

class Program {
 public:
  explicit Program(TensorMap& tensors) : map_(&tensors) {}

  // Where the program's descriptors live (and, for a runtime's Context, their values).
  TensorMap& tensor_map() const { return *map_; }

  // Declares a tensor. Inputs, params and consts need a type; a temporary (or an output declared
  // before the instruction that defines it) may leave `type_known` false until an instruction
  // defines it. Errors: empty or duplicate name, bad shape, value count not matching the shape.
  Result<TensorId> declare(TensorDesc desc, bool type_known = true);
  // Marks a tensor as a program output.
  void mark_output(TensorId id);
  // Lists `id`, a param, const or state already in this program's map (another program's), among
  // this program's declarations under its name: two programs of one context then share its
  // values (a rebatched copy's weights, engine/rebatch.h). Errors: no such tensor, not a param,
  // const or state, or its name taken here.
  Status adopt(TensorId id);

  // Validates `ins` (operand counts, immediates, operands defined, outputs defined once — or, for
  // an in-place op, outputs among its inputs —, section order, shape inference), sets the types
  // of its outputs, and appends it. On error nothing changes.
  Status append(Instruction ins);
  // Appends `ins` with `n_out` new temporaries as its outputs, named `prefix`N (ins.out is
  // replaced). Returns their ids; on error nothing changes (the temporaries are not kept).
  Result<std::vector<TensorId>> append_new(Instruction ins, const std::string& prefix = "t");
  // Replaces the whole instruction list by `code` (an optimizer pass's rewrite), validating it as
  // append does, instruction by instruction; the declarations stay. On error nothing changes.
  Status set_code(std::vector<Instruction> code);
  // Forgets the temporaries and constants no instruction reads or writes any more (they stay in
  // the context, where another program may use them). Outputs, inputs, params and state are kept.
  void drop_unused_tensors();
  // Renames a tensor; errors if the name is taken or empty.
  Status rename(TensorId id, const std::string& name);

  // How far the program has grown, for rollback(): an importer takes back what it declared and
  // appended for a node it then could not map, so that a node left out leaves no trace.
  struct Checkpoint {
    size_t tensors = 0, code = 0;
  };
  Checkpoint checkpoint() const { return {order_.size(), code_.size()}; }
  // Forgets every tensor declared and every instruction appended since `c` (their tensors leave
  // the context too). Requires: since `c`, only declare, append, append_new, mark_output and
  // rename of the new tensors were called.
  void rollback(const Checkpoint& c);

  // Requires: id is a tensor of the map.
  const TensorDesc& desc(TensorId id) const { return *map_->find_desc(id); }
  TensorDesc& desc(TensorId id) { return *map_->find_desc(id); }
  // NO_TENSOR if no tensor has that name.
  TensorId find(const std::string& name) const;
  bool type_known(TensorId id) const { return !untyped_.count(id); }
  bool defined(TensorId id) const { return defined_.count(id) > 0; }

  const std::vector<TensorId>& tensors() const { return order_; }  // declaration order
  std::vector<TensorId> outputs() const;
  std::vector<TensorId> inputs() const;
  const std::vector<Instruction>& code() const { return code_; }
  // Instructions [begin, end) of a section.
  std::pair<size_t, size_t> section_range(Section s) const;
  bool has_section(Section s) const {
    auto r = section_range(s);
    return r.first < r.second;
  }

  // The mode a run starts in: training (dropout active, batch statistics) or inference. Shown in
  // the listing as `mode training`.
  bool training() const { return training_; }
  void set_training(bool t) { training_ = t; }

  // Autodiff's memo: the gradient of y with respect to x, once generated (NO_TENSOR if not).
  TensorId cached_grad(TensorId y, TensorId x) const;
  void cache_grad(TensorId y, TensorId x, TensorId g) { grads_[{y, x}] = g; }
  // Every gradient autodiff has handed out: results a caller may read after a run.
  std::vector<TensorId> cached_grads() const;
  // The whole memo: (y, x) → the gradient of y with respect to x.
  const std::map<std::pair<TensorId, TensorId>, TensorId>& grad_cache() const { return grads_; }

  // A name not used yet: prefix followed by the smallest free number ("t0", "t1", ...).
  std::string fresh_name(const std::string& prefix);
  // Checks that every output and every declared tensor is defined; call when done recording. A
  // program that trains (training() or an update section) must also pass check_state_writable.
  Status finish() const;
  // Checks that every input an OPF_UPDATES_STATE op updates in place when training (BATCHNORM2D's
  // running statistics) may be written: a tensor declared up front, not a constant, not another
  // operand of that instruction, and updated by no other instruction. Inference reads them only,
  // so any tensor will do there (an importer's merged initializers, a listing's consts); this
  // is what training, and Executor::set_training(true), require. The message names the fix.
  Status check_state_writable() const;
  // The tensors a forward run leaves for the next one: params and state that an in-place
  // instruction of the forward section writes (ASSIGN's destinations, e.g. a recurrent layer's h
  // stepped per frame), in declaration order. Not the running statistics BATCHNORM2D updates
  // when training, nor what the update section writes: those are trained, not carried.
  std::vector<TensorId> carried_state() const;

 private:
  Status check_derived(const Instruction& ins) const;  // append's rules for the derive section

  TensorMap* map_;
  std::vector<TensorId> order_;
  std::unordered_map<std::string, TensorId> by_name_;
  std::unordered_set<TensorId> untyped_;
  std::unordered_set<TensorId> defined_;
  std::vector<Instruction> code_;
  std::unordered_map<std::string, int> name_counter_;
  bool training_ = false;
  std::map<std::pair<TensorId, TensorId>, TensorId> grads_;
};

// A name the listing can spell: [A-Za-z_][A-Za-z0-9_.]*.
bool valid_tensor_name(const std::string& name);

// Checks a shape against the rank and size limits; `what` names it in the message.
Status check_shape(const Shape& s, const std::string& what);

}  // namespace nnasm
