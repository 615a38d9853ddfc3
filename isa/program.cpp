// Program construction and its structural verifier (operand counts, immediates, def-before-use,
// single definition); types come from the ops' shape inference through the tensor map's OpSemantics.
#include "isa/program.h"
#include "isa/bf16.h"
#include "isa/program_size.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace nnasm {

Status check_shape(const Shape& s, const std::string& what) {
  if (s.rank < 0 || s.rank > MAX_RANK)
    return Status::errorf("{}: rank {} is outside 0..{}", what, s.rank, MAX_RANK);
  int64_t n = 1;
  for (int i = 0; i < s.rank; ++i) {
    if (s.dims[i] <= 0) return Status::errorf("{}: dimension {} is {}, must be positive", what, i, s.dims[i]);
    if (s.dims[i] > MAX_TENSOR_ELEMENTS || n > MAX_TENSOR_ELEMENTS / s.dims[i])
      return Status::errorf("{}: shape {} has more than {} elements", what, s.str(), MAX_TENSOR_ELEMENTS);
    n *= s.dims[i];
  }
  return Status::ok();
}

Status check_program_bytes(const Program& p, uint64_t limit) {
  uint64_t total = 0, largest_bytes = 0;
  TensorId largest = NO_TENSOR;
  for (TensorId id : p.tensors()) {
    const uint64_t b = storage_bytes(p.desc(id).type);
    total += b;
    if (b > largest_bytes) largest_bytes = b, largest = id;
  }
  if (total <= limit) return Status::ok();
  const TensorDesc& d = p.desc(largest);
  return Status::errorf("the program's tensors need {} bytes, over the limit of {} (the largest, {}{} {}, needs {})",
                        total, limit, d.sigil(), d.name, d.type.str(), largest_bytes);
}

bool valid_tensor_name(const std::string& name) {
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (name.empty() || !alpha(name[0])) return false;
  for (char c : name)
    if (!alpha(c) && !(c >= '0' && c <= '9') && c != '.') return false;
  return true;
}

namespace {

// The mnemonics of the instructions that take bf16, i8 and u8 operands, for the messages.
std::string reduced_ops() {
  std::string s;
  for (const OpInfo& o : all_ops())
    if (o.flags & OPF_REDUCED) s += (s.empty() ? "" : ", ") + std::string(o.mnemonic);
  return s.empty() ? "none in this build" : s;
}

Status reduced_operand(const Program& p, const Instruction& ins, const char* which, int k) {
  const TensorDesc& d = p.desc(which[0] == 'i' ? ins.in[k] : ins.out[k]);
  return Status::errorf("{}: {} {} ({}{} : {}) is {}; only instructions that take reduced-precision operands ({}) "
                        "accept bf16, i8 and u8: convert it to f32 first",
                        op_info(ins.op).mnemonic, which, k + 1, d.sigil(), d.name, d.type.str(),
                        dtype_name(d.type.dtype), reduced_ops());
}

// The rules for a tensor of a reduced-precision type (bf16, i8, u8): storage for weights and
// their quantized forms, never a model's interface, never drawn at random as integers, and
// holding only values its type can.
Status check_reduced_decl(TensorDesc& d, bool type_known) {
  if (!type_known || !dtype_reduced(d.type.dtype)) return Status::ok();
  const char* dt = dtype_name(d.type.dtype);
  // i8 and u8 are whole numbers a caller can hand over as they are (a camera's bytes, a
  // quantized result); bf16 has no C or numpy type of its own, so the edges stay f32 there.
  if ((d.role == Role::INPUT || d.is_output) && d.type.dtype == DType::BF16)
    return Status::errorf("{}{} is {}: model inputs and outputs are f32, i32, i8 or u8 (declare it f32 and QUANTIZE "
                          "it inside the program)",
                          d.sigil(), d.name, d.type.str());
  const InitKind k = d.init.kind;
  const bool random = !(k == InitKind::NONE || k == InitKind::ZEROS || k == InitKind::ONES || k == InitKind::CONSTANT);
  if (random && d.type.dtype != DType::BF16)
    return Status::errorf("{}{} is {}: init={} draws real numbers, which {} cannot hold; quantize an f32 param "
                          "instead",
                          d.sigil(), d.name, d.type.str(), init_name(k), dt);
  const double lo = d.type.dtype == DType::I8 ? -128 : 0, hi = d.type.dtype == DType::I8 ? 127 : 255;
  auto check = [&](double v, const char* what) -> Status {
    if (d.type.dtype == DType::BF16) {
      bool overflow;
      bf16_from_double(v, &overflow);
      if (overflow) return Status::errorf("{}{} : {}: {} {} is out of bf16 range", d.sigil(), d.name, d.type.str(), what, v);
    } else if (!(v >= lo && v <= hi && v == std::floor(v))) {
      return Status::errorf("{}{} : {}: {} {} is not an integer in {}..{}", d.sigil(), d.name, d.type.str(), what, v,
                            lo, hi);
    }
    return Status::ok();
  };
  if (k == InitKind::CONSTANT) NNASM_TRY(check(d.init.a, "init value"));
  for (double& v : d.values) {
    NNASM_TRY(check(v, "value"));
    // What the tensor will hold, so that printing and saving show the stored number.
    if (d.type.dtype == DType::BF16) v = bf16_to_f32(bf16_from_double(v));
  }
  return Status::ok();
}

}  // namespace

Result<TensorId> Program::declare(TensorDesc d, bool type_known) {
  if (!valid_tensor_name(d.name)) return Status::errorf("'{}' is not a valid tensor name", d.name);
  if (by_name_.count(d.name)) return Status::errorf("redefinition of tensor '{}'", d.name);
  if (type_known) NNASM_TRY(check_shape(d.type.shape, fmt::format("tensor '{}'", d.name)));
  if (!d.values.empty() && static_cast<int64_t>(d.values.size()) != d.type.shape.numel())
    return Status::errorf("tensor '{}' has {} values but shape {} holds {}", d.name, d.values.size(),
                          d.type.shape.str(), d.type.shape.numel());
  NNASM_TRY(check_reduced_decl(d, type_known));
  const bool defined = d.declared_up_front();
  if (defined && !type_known) return Status::errorf("{} '{}' needs a type", role_name(d.role), d.name);
  const TensorDesc& t = map_->add_desc(std::move(d));
  TensorId id = t.id;
  order_.push_back(id);
  by_name_[t.name] = id;
  if (!type_known) untyped_.insert(id);
  if (defined) defined_.insert(id);
  return id;
}

void Program::mark_output(TensorId id) { desc(id).is_output = true; }

Status Program::adopt(TensorId id) {
  const TensorDesc* d = map_->find_desc(id);
  if (!d) return Status::error("adopt: no such tensor in this program's map");
  if (d->sigil() != '@') return Status::errorf("adopt: %{} is not a param, const or state", d->name);
  if (by_name_.count(d->name)) return Status::errorf("redefinition of tensor '{}'", d->name);
  order_.push_back(id);
  by_name_[d->name] = id;
  defined_.insert(id);
  return Status::ok();
}

TensorId Program::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? NO_TENSOR : it->second;
}

std::vector<TensorId> Program::outputs() const {
  std::vector<TensorId> v;
  for (TensorId id : order_)
    if (desc(id).is_output) v.push_back(id);
  return v;
}

std::vector<TensorId> Program::inputs() const {
  std::vector<TensorId> v;
  for (TensorId id : order_)
    if (desc(id).role == Role::INPUT) v.push_back(id);
  return v;
}

std::string Program::fresh_name(const std::string& prefix) {
  int& k = name_counter_[prefix];
  for (;; ++k) {
    std::string n = fmt::format("{}{}", prefix, k);
    if (!by_name_.count(n)) {
      ++k;
      return n;
    }
  }
}

Status Program::append(Instruction ins) {
  if (opcode_from_id(static_cast<uint32_t>(ins.op)) == Opcode::INVALID)
    return Status::errorf("invalid opcode {}", static_cast<int>(ins.op));
  const OpInfo& info = op_info(ins.op);
  const int n_in = static_cast<int>(ins.in.size()), n_out = static_cast<int>(ins.out.size());
  const bool inplace = info.flags & OPF_INPLACE;
  if (!code_.empty() && ins.section < code_.back().section)
    return Status::errorf("{}: a {} instruction cannot follow the {} section", info.mnemonic, section_name(ins.section),
                          section_name(code_.back().section));
  if (info.n_in >= 0 && n_in != info.n_in)
    return Status::errorf("{} takes {} input{}, got {}", info.mnemonic, info.n_in, info.n_in == 1 ? "" : "s", n_in);
  if (info.n_in < 0 && n_in < 1) return Status::errorf("{} takes at least 1 input, got 0", info.mnemonic);
  const int want_out = info.n_out < 0 ? n_in : info.n_out;
  if (n_out != want_out)
    return Status::errorf("{} takes {} output{}, got {}", info.mnemonic, want_out, want_out == 1 ? "" : "s", n_out);
  if (ins.imm.size() != info.imms.size())
    return Status::errorf("{} has {} immediates, got {}", info.mnemonic, info.imms.size(), ins.imm.size());
  for (size_t k = 0; k < info.imms.size(); ++k) {
    const ImmSpec& spec = info.imms[k];
    const Imm& v = ins.imm[k];
    if (v.type != spec.type)
      return Status::errorf("{}: immediate '{}' has the wrong type", info.mnemonic, spec.key);
    if ((v.type == ImmType::BOOL && v.i != 0 && v.i != 1) ||
        (v.type == ImmType::ENUM && (v.i < 0 || v.i >= static_cast<int64_t>(spec.choices.size()))))
      return Status::errorf("{}: immediate '{}' has an invalid value {}", info.mnemonic, spec.key, v.i);
  }

  if (ins.section == Section::DERIVE) NNASM_TRY(check_derived(ins));

  std::vector<TensorType> in_types;
  for (int k = 0; k < n_in; ++k) {
    const TensorDesc* t = map_->find_desc(ins.in[k]);
    if (!t || !by_name_.count(t->name) || by_name_.at(t->name) != ins.in[k])
      return Status::errorf("{}: input {} is not a tensor of this program", info.mnemonic, k + 1);
    if (!defined_.count(ins.in[k]))
      return Status::errorf("{}: input {} ({}{}) is used before it is defined", info.mnemonic, k + 1,
                            t->sigil(), t->name);
    in_types.push_back(t->type);
  }
  for (int k = 0; k < n_out; ++k) {
    const TensorDesc* t = map_->find_desc(ins.out[k]);
    if (!t || !by_name_.count(t->name) || by_name_.at(t->name) != ins.out[k])
      return Status::errorf("{}: output {} is not a tensor of this program", info.mnemonic, k + 1);
    if (inplace) {
      if (std::find(ins.in.begin(), ins.in.end(), ins.out[k]) == ins.in.end())
        return Status::errorf("{} updates its operands in place: output {}{} must also be an input", info.mnemonic,
                              t->sigil(), t->name);
      // Constants are folded into their readers at optimization and shared between programs.
      if (t->role == Role::CONST)
        return Status::errorf("{} updates {}{} in place, but it is a const: declare it as state", info.mnemonic,
                              t->sigil(), t->name);
    } else if (defined_.count(ins.out[k])) {
      return Status::errorf("{}: redefinition of {}{}", info.mnemonic, t->sigil(), t->name);
    }
    for (int j = 0; j < k; ++j)
      if (ins.out[j] == ins.out[k])
        return Status::errorf("{}: output {}{} is named twice", info.mnemonic, t->sigil(), t->name);
  }

  if (!(info.flags & OPF_REDUCED)) {
    for (int k = 0; k < n_in; ++k)
      if (dtype_reduced(in_types[k].dtype)) return reduced_operand(*this, ins, "input", k);
    for (int k = 0; k < n_out; ++k)
      if (!untyped_.count(ins.out[k]) && dtype_reduced(desc(ins.out[k]).type.dtype))
        return reduced_operand(*this, ins, "output", k);
  }
  std::vector<TensorType> out_types(n_out);
  NNASM_TRY(map_->ops().infer_types(ins, in_types, &out_types));
  if (!(info.flags & OPF_REDUCED))
    for (int k = 0; k < n_out; ++k)
      if (dtype_reduced(out_types[k].dtype))
        return Status::errorf("{}: its shape inference makes output {} {}, a reduced-precision type, without the "
                              "reduced-precision flag (an error in the op's definition)",
                              info.mnemonic, k + 1, out_types[k].str());
  for (int k = 0; k < n_out; ++k) {
    const TensorDesc& d = desc(ins.out[k]);
    NNASM_TRY(check_shape(out_types[k].shape, fmt::format("{}: output %{}", info.mnemonic, d.name)));
    if (!untyped_.count(ins.out[k]) && !(d.type == out_types[k]))
      return Status::errorf("{}: output %{} is declared {} but the instruction makes {}", info.mnemonic,
                            d.name, d.type.str(), out_types[k].str());
  }
  for (int k = 0; k < n_out; ++k) {
    desc(ins.out[k]).type = out_types[k];
    untyped_.erase(ins.out[k]);
    defined_.insert(ins.out[k]);
  }
  code_.push_back(std::move(ins));
  return Status::ok();
}

// The derive section runs only when the params change (isa/instruction.h), so what it computes
// must follow from params, constants and state alone: no inputs, no mode or random draws, and
// nothing a caller reads.
Status Program::check_derived(const Instruction& ins) const {
  const OpInfo& info = op_info(ins.op);
  if (info.flags & (OPF_MODE | OPF_RANDOM | OPF_INPLACE | OPF_UPDATES_STATE))
    return Status::errorf("{} cannot be in the derive section: it depends on the run or updates its operands", info.mnemonic);
  for (size_t k = 0; k < ins.in.size(); ++k) {
    const TensorDesc* t = map_->find_desc(ins.in[k]);
    if (t && t->role == Role::INPUT)
      return Status::errorf("{}: input {} ({}{}) is {}: the derive section reads only params, constants, state and what it derived",
                            info.mnemonic, k + 1, t->sigil(), t->name, role_name(t->role));
  }
  for (size_t k = 0; k < ins.out.size(); ++k) {
    const TensorDesc* t = map_->find_desc(ins.out[k]);
    if (t && (t->role != Role::TEMPORARY || t->is_output))
      return Status::errorf("{}: output {}{} of the derive section must be a temporary, not {}", info.mnemonic, t->sigil(),
                            t->name, t->is_output ? "an output" : role_name(t->role));
  }
  return Status::ok();
}

Result<std::vector<TensorId>> Program::append_new(Instruction ins, const std::string& prefix) {
  const int n_out_info = ins.op == Opcode::INVALID ? 0 : op_info(ins.op).n_out;
  const int n_out = n_out_info < 0 ? static_cast<int>(ins.in.size()) : n_out_info;
  ins.out.clear();
  for (int k = 0; k < n_out; ++k) {
    TensorDesc d;
    d.name = fresh_name(prefix);
    ins.out.push_back(declare(std::move(d), false).value());  // a fresh name cannot collide
  }
  std::vector<TensorId> outs = ins.out;
  Status s = append(std::move(ins));
  if (!s) {
    for (TensorId id : outs) {
      by_name_.erase(desc(id).name);
      untyped_.erase(id);
      order_.pop_back();
      map_->remove(id);
    }
    return s;
  }
  return outs;
}

Status Program::rename(TensorId id, const std::string& name) {
  if (!valid_tensor_name(name)) return Status::errorf("'{}' is not a valid tensor name", name);
  const std::string old = desc(id).name;
  if (name == old) return Status::ok();
  if (by_name_.count(name)) return Status::errorf("cannot rename '{}' to '{}': the name is taken", old, name);
  by_name_.erase(old);
  by_name_[name] = id;
  desc(id).name = name;
  return Status::ok();
}

std::pair<size_t, size_t> Program::section_range(Section s) const {
  size_t b = 0;
  while (b < code_.size() && code_[b].section < s) ++b;
  size_t e = b;
  while (e < code_.size() && code_[e].section == s) ++e;
  return {b, e};
}

TensorId Program::cached_grad(TensorId y, TensorId x) const {
  auto it = grads_.find({y, x});
  return it == grads_.end() ? NO_TENSOR : it->second;
}

std::vector<TensorId> Program::cached_grads() const {
  std::vector<TensorId> v;
  for (const auto& kv : grads_) v.push_back(kv.second);
  return v;
}

Status Program::set_code(std::vector<Instruction> code) {
  Program fresh(*map_);
  fresh.order_ = order_;
  fresh.by_name_ = by_name_;
  for (TensorId id : order_)
    if (desc(id).declared_up_front()) fresh.defined_.insert(id);
  // Temporaries keep their types: an instruction that would now make another type is an error.
  for (size_t k = 0; k < code.size(); ++k) {
    Status st = fresh.append(std::move(code[k]));
    if (!st) return st.with_prefix(fmt::format("instruction {}: ", k));
  }
  code_ = std::move(fresh.code_);
  defined_ = std::move(fresh.defined_);
  untyped_ = std::move(fresh.untyped_);
  return Status::ok();
}

void Program::drop_unused_tensors() {
  std::unordered_set<TensorId> used;
  for (const Instruction& ins : code_) {
    used.insert(ins.in.begin(), ins.in.end());
    used.insert(ins.out.begin(), ins.out.end());
  }
  std::vector<TensorId> kept;
  for (TensorId id : order_) {
    const TensorDesc& d = desc(id);
    const bool kept_unused = d.is_output || (d.declared_up_front() && d.role != Role::CONST);
    if (used.count(id) || kept_unused) {
      kept.push_back(id);
      continue;
    }
    by_name_.erase(d.name);
    untyped_.erase(id);
    defined_.erase(id);
  }
  order_ = std::move(kept);
  for (auto it = grads_.begin(); it != grads_.end();) {
    if (by_name_.count(desc(it->second).name) && by_name_.at(desc(it->second).name) == it->second) ++it;
    else it = grads_.erase(it);
  }
}

void Program::rollback(const Checkpoint& c) {
  code_.resize(std::min(code_.size(), c.code));
  while (order_.size() > c.tensors) {
    const TensorId id = order_.back();
    order_.pop_back();
    by_name_.erase(desc(id).name);
    untyped_.erase(id);
    defined_.erase(id);
    map_->remove(id);
  }
}

Status Program::finish() const {
  for (TensorId id : order_) {
    const TensorDesc& d = desc(id);
    if (!defined_.count(id))
      return Status::errorf("{}{} is {} but no instruction defines it", d.sigil(), d.name,
                            d.is_output ? "an output" : "declared");
    if (d.is_output && d.type.dtype == DType::BF16)
      return Status::errorf("output {}{} is {}: model inputs and outputs are f32, i32, i8 or u8 (convert it to f32 "
                            "first)",
                            d.sigil(), d.name, d.type.str());
  }
  if (training_ || has_section(Section::UPDATE)) return check_state_writable();
  return Status::ok();
}

std::vector<TensorId> Program::carried_state() const {
  std::unordered_set<TensorId> written;
  const auto [b, e] = section_range(Section::FORWARD);
  for (size_t i = b; i < e; ++i)
    if (code_[i].info().flags & OPF_INPLACE) written.insert(code_[i].out.begin(), code_[i].out.end());
  std::vector<TensorId> v;
  for (TensorId id : order_) {
    const Role r = desc(id).role;
    if (written.count(id) && (r == Role::PARAM || r == Role::STATE)) v.push_back(id);
  }
  return v;
}

Status Program::check_state_writable() const {
  // Who updates each tensor in place, to refuse two instructions sharing one statistic (an
  // importer's merged initializers can make two fresh BatchNorms share their zeros).
  std::unordered_map<TensorId, size_t> updater;
  for (size_t i = 0; i < code_.size(); ++i) {
    const Instruction& ins = code_[i];
    const OpInfo& info = ins.info();
    if (!(info.flags & OPF_UPDATES_STATE)) continue;
    const uint32_t mask = map_->ops().state_inputs(ins.op);
    const int n_in = static_cast<int>(ins.in.size());
    for (int k = 0; k < n_in; ++k) {
      if (!(mask >> k & 1)) continue;
      const TensorDesc& d = desc(ins.in[k]);
      const std::string head = fmt::format("instruction {}: {} updates input {} ({}{}) in place when training", i + 1,
                                           info.mnemonic, k + 1, d.sigil(), d.name);
      if (d.role == Role::CONST)
        return Status::errorf("{}: declare {}{} as state to train; consts are read-only", head, d.sigil(), d.name);
      if (!d.declared_up_front())
        return Status::errorf("{}: it must be a state tensor declared up front to train, not a computed value", head);
      for (int j = 0; j < n_in; ++j)
        if (j != k && ins.in[j] == ins.in[k])
          return Status::errorf("{}, but it is also input {}: give it a state tensor of its own to train", head, j + 1);
      auto [it, fresh] = updater.emplace(ins.in[k], i);
      if (!fresh)
        return Status::errorf("{}, as instruction {} does: give each its own state tensor to train", head,
                              it->second + 1);
    }
  }
  return Status::ok();
}

}  // namespace nnasm
