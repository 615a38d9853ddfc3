// GradBuilder: recording backward instructions, and the reshaping helpers rules share.
#include "ops/grad.h"

namespace nnasm {

TensorId GradBuilder::emit(Opcode op, std::vector<TensorId> in, const std::vector<std::pair<const char*, Imm>>& imm) {
  const std::vector<TensorId> out = emit_all(op, std::move(in), imm);
  return out.empty() ? NO_TENSOR : out[0];
}

std::vector<TensorId> GradBuilder::emit_all(Opcode op, std::vector<TensorId> in,
                                            const std::vector<std::pair<const char*, Imm>>& imm) {
  if (!status_) return {};
  for (TensorId id : in)
    if (id == NO_TENSOR) {
      status_ = Status::errorf("{}: a backward operand is missing", op_info(op).mnemonic);
      return {};
    }
  Instruction ins = make_instruction(op, std::move(in), {});
  ins.section = Section::BACKWARD;
  for (const auto& [key, value] : imm)
    if (Status s = set_imm(ins, key, value); !s) {
      status_ = s;
      return {};
    }
  Result<std::vector<TensorId>> out = p_->append_new(std::move(ins), "g");
  if (!out) {
    status_ = out.status();
    return {};
  }
  return out.value();
}

TensorId GradBuilder::scale(TensorId x, double alpha) {
  return alpha == 1.0 ? x : emit(Opcode::SCALE, {x}, {{"alpha", imm_f(alpha)}});
}

namespace {
std::vector<int64_t> dims_of(const Shape& s) { return std::vector<int64_t>(s.dims.begin(), s.dims.begin() + s.rank); }
}  // namespace

TensorId GradBuilder::reshape(TensorId x, const Shape& s) {
  if (x == NO_TENSOR || type(x).shape == s) return x;
  return emit(Opcode::RESHAPE, {x}, {{"shape", imm_ints(dims_of(s))}});
}

TensorId GradBuilder::expand(TensorId x, const Shape& s) {
  if (x == NO_TENSOR || type(x).shape == s) return x;
  return emit(Opcode::EXPAND, {x}, {{"shape", imm_ints(dims_of(s))}});
}

TensorId GradBuilder::sum_to(TensorId g, const Shape& target) {
  if (g == NO_TENSOR || type(g).shape == target) return g;
  // Sum over the leading dimensions target lacks and over those where target has 1, keeping
  // dims so each reduction is one REDUCE_SUM along one axis; then reshape to target.
  const Shape from = type(g).shape;
  const int lead = from.rank - target.rank;
  for (int d = 0; d < from.rank; ++d) {
    const bool stretched = d < lead || (target[d - lead] == 1 && from[d] != 1);
    if (stretched) g = emit(Opcode::REDUCE_SUM, {g}, {{"axis", imm_i(d)}, {"keepdims", imm_i(1)}});
  }
  return reshape(g, target);
}

TensorId GradBuilder::constant(float value) {
  if (!status_) return NO_TENSOR;
  TensorDesc d;
  d.name = p_->fresh_name("g.k");
  d.role = Role::CONST;
  d.type = TensorType{DType::F32, Shape()};
  d.values = {value};
  Result<TensorId> id = p_->declare(std::move(d));
  if (!id) {
    status_ = id.status();
    return NO_TENSOR;
  }
  return id.value();
}

Status no_gradient(GradBuilder&, const Instruction&, const std::vector<TensorId>&, const std::vector<bool>&,
                   std::vector<TensorId>*) {
  return Status::ok();
}

}  // namespace nnasm
