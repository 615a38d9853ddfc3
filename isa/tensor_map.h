// The tensor map a program names its tensors in (id → descriptor), and what the IR needs to know
// of the ops beyond the opcode table. A program holds neither values nor kernels: the runtime's
// Context (engine/context.h) is a tensor map that also stores values, and DescriptorMap below is
// one that holds descriptors alone, for building, printing, parsing and verifying programs with
// no runtime at all.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "isa/instruction.h"
#include "isa/status.h"
#include "isa/tensor.h"

namespace nnasm {

// Each op's shape inference and the inputs it updates in place, as the ops layer implements them
// (ops/registry.cpp: op_semantics()). The program reaches the ops only through this interface.
class OpSemantics {
 public:
  // Output types of `ins` from its input types `in` (n_out entries into *out). The message names
  // the op and the operands; the caller adds the location.
  virtual Status infer_types(const Instruction& ins, const std::vector<TensorType>& in,
                             std::vector<TensorType>* out) const = 0;
  // For an OPF_UPDATES_STATE op, the inputs it updates in place when training (bit k: input k);
  // 0 for other ops.
  virtual uint32_t state_inputs(Opcode op) const = 0;

 protected:
  ~OpSemantics() = default;
};

// Descriptors by id. Ids are unique within a map and, drawn from a random start, unlikely to
// coincide between maps. References returned stay valid until the tensor is removed. Not
// thread-safe.
class TensorMap {
 public:
  explicit TensorMap(const OpSemantics& ops) : ops_(&ops) {}
  virtual ~TensorMap() = default;
  TensorMap(const TensorMap&) = delete;
  TensorMap& operator=(const TensorMap&) = delete;

  const OpSemantics& ops() const { return *ops_; }
  // Adds a descriptor under a fresh id (the desc's id is overwritten).
  virtual TensorDesc& add_desc(TensorDesc desc) = 0;
  virtual void remove(TensorId id) = 0;
  // nullptr if there is no such tensor.
  virtual TensorDesc* find_desc(TensorId id) = 0;
  virtual const TensorDesc* find_desc(TensorId id) const = 0;
  // Whether this map is the runtime's Context, which stores values beside the descriptors.
  // Context::of relies on it: no other map may return true.
  virtual bool stores_values() const { return false; }

 protected:
  // The next fresh id: a random start, then a splitmix64 sequence (never NO_TENSOR).
  TensorId next_id();

 private:
  const OpSemantics* ops_;
  uint64_t id_state_;
  bool id_started_ = false;
};

// A tensor map of descriptors alone.
class DescriptorMap final : public TensorMap {
 public:
  using TensorMap::TensorMap;
  TensorDesc& add_desc(TensorDesc desc) override;
  void remove(TensorId id) override { descs_.erase(id); }
  TensorDesc* find_desc(TensorId id) override;
  const TensorDesc* find_desc(TensorId id) const override;
  size_t size() const { return descs_.size(); }

 private:
  std::unordered_map<TensorId, TensorDesc> descs_;
};

}  // namespace nnasm
