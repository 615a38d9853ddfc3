// The kernel registry: expands the opcode table into the per-op hooks, and implements the
// OpSemantics through which a program reaches the ops' shape inference.
#include <unordered_map>

#include <fmt/format.h>

#include "isa/program.h"
#include "ops/op.h"

namespace nnasm {
namespace {

struct Registry {
  std::unordered_map<uint16_t, OpHooks> hooks;
  Registry() {
#define OPCODE(id, NAME, MN, NIN, NOUT, SCHEMA, CAT, FLAGS) hooks[id] = op_hooks_##NAME();
#include "isa/opcodes.def"
#undef OPCODE
  }
};

// Immutable after its thread-safe first initialization.
const Registry& registry() {
  static const Registry r;
  return r;
}

}  // namespace

const OpHooks& op_hooks(Opcode op) { return registry().hooks.at(static_cast<uint16_t>(op)); }

Status infer_types(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  return op_hooks(ins.op).shape(ins, in, out);
}

uint32_t state_inputs(Opcode op) { return op_hooks(op).state_inputs; }

namespace {
class RegistrySemantics final : public OpSemantics {
 public:
  Status infer_types(const Instruction& ins, const std::vector<TensorType>& in,
                     std::vector<TensorType>* out) const override {
    return nnasm::infer_types(ins, in, out);
  }
  uint32_t state_inputs(Opcode op) const override { return nnasm::state_inputs(op); }
};
}  // namespace

const OpSemantics& op_semantics() {
  static const RegistrySemantics s;
  return s;
}

std::string operand_str(const Instruction&, int k, const TensorType& t) {
  return fmt::format("operand {} ({})", k + 1, t.str());
}

Status require_f32(const Instruction& ins, const std::vector<TensorType>& in) {
  for (size_t k = 0; k < in.size(); ++k)
    if (in[k].dtype != DType::F32)
      return Status::errorf("{}: {} must be f32", ins.info().mnemonic, operand_str(ins, static_cast<int>(k), in[k]));
  return Status::ok();
}

}  // namespace nnasm
