// Writing the update: section.
#include "engine/optimizer.h"

#include <fmt/format.h>

#include "engine/autodiff.h"

namespace nnasm {
namespace {

// Appends one update instruction; outputs are the given (in-place) tensors, or a new temporary
// named `fresh` when that is non-empty.
Result<TensorId> update(Program& p, Opcode op, std::vector<TensorId> in, std::vector<TensorId> out,
                        const std::vector<std::pair<const char*, Imm>>& imm, const std::string& fresh = "") {
  Instruction ins = make_instruction(op, std::move(in), std::move(out));
  ins.section = Section::UPDATE;
  for (const auto& [k, v] : imm) NNASM_TRY(set_imm(ins, k, v));
  if (!fresh.empty()) {
    TensorDesc d;
    d.name = fresh;
    Result<TensorId> id = p.declare(std::move(d), false);
    if (!id) return id.status();
    ins.out = {id.value()};
  }
  const TensorId first = ins.out.empty() ? NO_TENSOR : ins.out[0];
  NNASM_TRY(p.append(std::move(ins)));
  return first;
}

Result<TensorId> state(Program& p, const std::string& name, const TensorType& type) {
  TensorDesc d;
  d.name = name;
  d.type = type;
  d.role = Role::STATE;
  d.init = InitSpec{InitKind::ZEROS, 0, 0};
  return p.declare(std::move(d));
}

}  // namespace

OptimizerSpec sgd(double lr, double momentum, bool nesterov, double weight_decay) {
  OptimizerSpec o;
  o.kind = OptimizerSpec::Kind::SGD;
  o.lr = lr;
  o.momentum = momentum;
  o.nesterov = nesterov;
  o.weight_decay = weight_decay;
  return o;
}

OptimizerSpec adam(double lr, double weight_decay) {
  OptimizerSpec o;
  o.lr = lr;
  o.weight_decay = weight_decay;
  return o;
}

OptimizerSpec adamw(double lr, double weight_decay) {
  OptimizerSpec o = adam(lr, weight_decay);
  o.kind = OptimizerSpec::Kind::ADAMW;
  return o;
}

OptimizerSpec rmsprop(double lr, double alpha) {
  OptimizerSpec o;
  o.kind = OptimizerSpec::Kind::RMSPROP;
  o.lr = lr;
  o.alpha = alpha;
  return o;
}

Status add_optimizer(Program& p, const OptimizerSpec& o, const std::vector<std::pair<TensorId, TensorId>>& grads) {
  if (p.has_section(Section::UPDATE)) return Status::error("add_optimizer: the program has an update section already");
  if (grads.empty()) return Status::error("add_optimizer: no gradients to apply");
  using K = OptimizerSpec::Kind;
  const TensorType scalar{DType::F32, Shape{}};
  Result<TensorId> t = state(p, o.name + ".t", scalar);
  if (!t) return t.status();
  NNASM_TRY(update(p, Opcode::ADVANCE, {*t}, {*t}, {}).status());
  const LrSchedule& s = o.schedule;
  Result<TensorId> lr = update(p, Opcode::LR_SCHEDULE, {*t}, {},
                               {{"kind", imm_i(static_cast<int64_t>(s.kind))},
                                {"base", imm_f(o.lr)},
                                {"warmup", imm_i(s.warmup)},
                                {"step_size", imm_i(s.step_size)},
                                {"gamma", imm_f(s.gamma)},
                                {"total", imm_i(s.total)},
                                {"min", imm_f(s.min)}},
                               o.name + ".lr");
  if (!lr) return lr.status();
  if (o.clip_norm > 0) {
    std::vector<TensorId> gs;
    for (const auto& pg : grads) gs.push_back(pg.second);
    NNASM_TRY(update(p, Opcode::CLIP_GRAD_NORM, gs, gs, {{"max_norm", imm_f(o.clip_norm)}}).status());
  }
  for (const auto& [w, g] : grads) {
    const std::string wn = p.desc(w).name;
    const TensorType type = p.desc(w).type;
    auto st = [&](const char* suffix) { return state(p, wn + suffix, type); };
    if (o.kind == K::SGD) {
      Result<TensorId> v = st(".mom");
      if (!v) return v.status();
      NNASM_TRY(update(p, Opcode::SGD, {w, g, *v, *lr}, {w, *v},
                       {{"momentum", imm_f(o.momentum)},
                        {"nesterov", imm_i(o.nesterov)},
                        {"weight_decay", imm_f(o.weight_decay)}})
                    .status());
    } else if (o.kind == K::RMSPROP) {
      Result<TensorId> sq = st(".sq");
      if (!sq) return sq.status();
      NNASM_TRY(update(p, Opcode::RMSPROP, {w, g, *sq, *lr}, {w, *sq},
                       {{"alpha", imm_f(o.alpha)}, {"eps", imm_f(o.eps)}, {"weight_decay", imm_f(o.weight_decay)}})
                    .status());
    } else {
      Result<TensorId> m = st(".m");
      if (!m) return m.status();
      Result<TensorId> v = st(".v");
      if (!v) return v.status();
      NNASM_TRY(update(p, o.kind == K::ADAM ? Opcode::ADAM : Opcode::ADAMW, {w, g, *m, *v, *lr, *t}, {w, *m, *v},
                       {{"beta1", imm_f(o.beta1)},
                        {"beta2", imm_f(o.beta2)},
                        {"eps", imm_f(o.eps)},
                        {"weight_decay", imm_f(o.weight_decay)}})
                    .status());
    }
  }
  return Status::ok();
}

Status make_trainable(Program& p, TensorId loss, const OptimizerSpec& o) {
  p.set_training(true);
  if (p.has_section(Section::UPDATE)) return Status::ok();
  auto grads = backward(p, loss);
  if (!grads) return Status::errorf("make_trainable: {}", grads.status().message());
  return add_optimizer(p, o, grads.value());
}

}  // namespace nnasm
