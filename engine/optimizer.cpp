// Writing the update: section.
#include "engine/optimizer.h"

#include <cmath>

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

// NaN fails every comparison below, so each check is written as "must be in range".
Status check_optimizer(const OptimizerSpec& o, const char* fn) {
  auto bad = [&](const char* what, double v, const char* want) {
    return Status::errorf("{}: optimizer {}: {} is {}, expected {}", fn, o.name, what, float_to_string(v), want);
  };
  using K = OptimizerSpec::Kind;
  if (!(o.lr >= 0 && std::isfinite(o.lr))) return bad("learning rate (lr)", o.lr, "a finite value >= 0");
  if (!(o.weight_decay >= 0 && std::isfinite(o.weight_decay))) return bad("weight_decay", o.weight_decay, "a finite value >= 0");
  if (!(o.clip_norm >= 0 && std::isfinite(o.clip_norm))) return bad("clip_norm", o.clip_norm, "a finite value >= 0 (0: no clipping)");
  if (o.kind == K::SGD) {
    if (!(o.momentum >= 0 && std::isfinite(o.momentum))) return bad("momentum", o.momentum, "a finite value >= 0");
    if (o.nesterov && !(o.momentum > 0)) return Status::errorf("{}: optimizer {}: nesterov needs momentum > 0", fn, o.name);
  }
  if (o.kind == K::ADAM || o.kind == K::ADAMW) {
    if (!(o.beta1 >= 0 && o.beta1 < 1)) return bad("beta1", o.beta1, "0 <= beta1 < 1");
    if (!(o.beta2 >= 0 && o.beta2 < 1)) return bad("beta2", o.beta2, "0 <= beta2 < 1");
  }
  if (o.kind == K::RMSPROP && !(o.alpha >= 0 && o.alpha <= 1)) return bad("alpha", o.alpha, "0 <= alpha <= 1");
  if (o.kind != K::SGD && !(o.eps >= 0 && std::isfinite(o.eps))) return bad("eps", o.eps, "a finite value >= 0");
  const LrSchedule& s = o.schedule;
  if (s.warmup < 0) return bad("schedule warmup", static_cast<double>(s.warmup), "steps >= 0");
  if (s.kind == LrSchedule::Kind::STEP) {
    if (s.step_size < 1) return bad("schedule step_size", static_cast<double>(s.step_size), "steps >= 1");
    if (!(s.gamma >= 0 && std::isfinite(s.gamma))) return bad("schedule gamma", s.gamma, "a finite value >= 0");
  }
  if (s.kind == LrSchedule::Kind::COSINE) {
    if (s.total < 1) return bad("schedule total", static_cast<double>(s.total), "steps >= 1");
    if (!(s.min >= 0 && std::isfinite(s.min))) return bad("schedule min", s.min, "a finite value >= 0");
  }
  if (o.name.empty()) return Status::errorf("{}: the optimizer's name (the prefix of its tensors) is empty", fn);
  return Status::ok();
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
  NNASM_TRY(check_optimizer(o, "add_optimizer"));
  if (p.has_section(Section::UPDATE)) return Status::error("add_optimizer: the program has an update section already");
  if (grads.empty()) return Status::error("add_optimizer: no gradients to apply");
  for (const auto& pg : grads) NNASM_TRY(check_trainable_type(p.desc(pg.first)).with_prefix("add_optimizer: "));
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
  // A second call would silently keep the first optimizer (or, on a parsed training listing, the
  // listing's): refuse it, so a changed learning rate or optimizer is never lost unnoticed.
  if (p.has_section(Section::UPDATE))
    return Status::error("make_trainable: the program already trains (it has an update section)");
  NNASM_TRY(check_optimizer(o, "make_trainable"));
  if (loss != NO_TENSOR && p.tensor_map().find_desc(loss)) {
    const TensorType& t = p.desc(loss).type;
    if (t.dtype != DType::F32 || t.shape.rank != 0)
      return Status::errorf("make_trainable: the loss %{} must be a scalar f32[], it is {}", p.desc(loss).name, t.str());
  }
  auto grads = backward(p, loss);
  if (!grads) return Status::errorf("make_trainable: {}", grads.status().message());
  NNASM_TRY(add_optimizer(p, o, grads.value()));
  p.set_training(true);
  return Status::ok();
}

}  // namespace nnasm
