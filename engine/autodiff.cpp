// The backward pass: walk the forward section in reverse, call each op's rule (ops/grad.h) for
// the instructions between the wanted tensors and y, accumulate partial gradients with ADD.
#include "engine/autodiff.h"

#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "ops/op.h"

namespace nnasm {
namespace {

bool in_program(const Program& p, TensorId id) {
  return id != NO_TENSOR && p.tensor_map().find_desc(id) && p.find(p.desc(id).name) == id;
}

std::string where(const Program& p, const Instruction& ins, size_t index) {
  std::string s = fmt::format("instruction {} ({} -> {}{})", index, ins.info().mnemonic, p.desc(ins.out[0]).sigil(),
                              p.desc(ins.out[0]).name);
  if (ins.loc.known()) s += " at " + ins.loc.str();
  return s;
}

// Gives the final gradient of `x` its own tensor named x.grad: renamed when the tensor is a
// backward temporary nobody else owns, copied otherwise (a pass-through gradient may be shared,
// and optimizer steps update gradients in place).
TensorId own_gradient(Program& p, GradBuilder& b, TensorId x, TensorId g, std::unordered_set<TensorId>* owned) {
  const bool temp = p.desc(g).role == Role::TEMPORARY && !p.desc(g).is_output;
  const bool backward_made = [&] {
    auto [begin, end] = p.section_range(Section::BACKWARD);
    for (size_t i = begin; i < end; ++i)
      if (p.code()[i].out[0] == g) return true;
    return false;
  }();
  if (!temp || !backward_made || owned->count(g)) g = b.emit(Opcode::COPY, {g});
  if (g == NO_TENSOR) return g;
  owned->insert(g);
  std::string name = p.desc(x).name + ".grad";
  for (int k = 1; p.find(name) != NO_TENSOR && p.find(name) != g; ++k) name = fmt::format("{}.grad.{}", p.desc(x).name, k);
  (void)p.rename(g, name);
  return g;
}

}  // namespace

Status check_trainable_type(const TensorDesc& d) {
  if (!dtype_reduced(d.type.dtype)) return Status::ok();
  if (d.role == Role::PARAM)
    return Status::errorf("param @{} is {}: training updates f32 params only; train in f32 and quantize the "
                          "inference model",
                          d.name, dtype_name(d.type.dtype));
  return Status::errorf("{}{} is {}: gradients are f32 only; train in f32 and quantize the inference model", d.sigil(),
                        d.name, dtype_name(d.type.dtype));
}

Result<std::vector<TensorId>> grad(Program& p, TensorId y, const std::vector<TensorId>& wrt) {
  if (!in_program(p, y)) return Status::error("grad: y is not a tensor of this program");
  for (TensorId x : wrt) {
    if (!in_program(p, x)) return Status::error("grad: a tensor to differentiate by is not in this program");
    NNASM_TRY(check_trainable_type(p.desc(x)));
  }
  std::vector<TensorId> out(wrt.size(), NO_TENSOR);
  bool all_cached = true;
  for (size_t k = 0; k < wrt.size(); ++k) all_cached &= (out[k] = p.cached_grad(y, wrt[k])) != NO_TENSOR;
  if (all_cached) return out;

  const auto [fb, fe] = p.section_range(Section::FORWARD);
  const std::vector<Instruction>& code = p.code();
  // Forward: which tensors depend on something in wrt.
  std::unordered_set<TensorId> depends(wrt.begin(), wrt.end());
  for (size_t i = fb; i < fe; ++i)
    for (TensorId in : code[i].in)
      if (depends.count(in)) {
        depends.insert(code[i].out.begin(), code[i].out.end());
        break;
      }

  GradBuilder b(p);
  std::unordered_map<TensorId, TensorId> g;  // accumulated gradient of each tensor so far
  if (depends.count(y)) g[y] = b.emit(Opcode::FILL, {y}, {{"value", imm_f(1)}});
  // Reverse: the instructions whose outputs carry gradient and whose inputs need it. Rules read
  // `code` by reference while appending to it, so iterate over indices and copy the instruction.
  for (size_t i = fe; i-- > fb;) {
    const Instruction ins = code[i];
    std::vector<TensorId> dy(ins.out.size(), NO_TENSOR);
    bool flows = false;
    for (size_t k = 0; k < ins.out.size(); ++k)
      if (auto it = g.find(ins.out[k]); it != g.end()) flows = true, dy[k] = it->second;
    std::vector<bool> need(ins.in.size());
    bool any = false;
    for (size_t k = 0; k < ins.in.size(); ++k) any |= need[k] = depends.count(ins.in[k]) > 0;
    if (!flows || !any) continue;
    const GradFn rule = op_hooks(ins.op).grad;
    if (!rule)
      return Status::errorf("grad: {} has no backward rule, and the gradient must flow through it",
                            where(p, ins, i));
    std::vector<TensorId> dx(ins.in.size(), NO_TENSOR);
    if (Status s = rule(b, ins, dy, need, &dx); !s) return Status::errorf("grad: {}: {}", where(p, ins, i), s.message());
    for (size_t k = 0; k < ins.in.size(); ++k) {
      if (!need[k] || dx[k] == NO_TENSOR) continue;
      auto it = g.find(ins.in[k]);
      if (it == g.end()) g[ins.in[k]] = dx[k];
      else it->second = b.emit(Opcode::ADD, {it->second, dx[k]});
    }
    if (!b.status()) return Status::errorf("grad: {}: {}", where(p, ins, i), b.status().message());
  }

  std::unordered_set<TensorId> owned;
  for (size_t k = 0; k < wrt.size(); ++k) {
    if (out[k] != NO_TENSOR) continue;
    auto it = g.find(wrt[k]);
    // y does not depend on x: its gradient is zero, still a tensor of x's shape.
    TensorId gx = it != g.end() ? it->second : b.emit(Opcode::FILL, {wrt[k]}, {{"value", imm_f(0)}});
    gx = own_gradient(p, b, wrt[k], gx, &owned);
    if (!b.status()) return b.status();
    p.cache_grad(y, wrt[k], gx);
    out[k] = gx;
  }
  return out;
}

Result<std::vector<std::pair<TensorId, TensorId>>> backward(Program& p, TensorId loss) {
  // p.find() of an unknown name gives NO_TENSOR; every message below names the loss, so check first.
  if (!in_program(p, loss)) return Status::error("backward: the loss is not a tensor of this program");
  std::vector<TensorId> params;
  for (TensorId id : p.tensors())
    if (p.desc(id).role == Role::PARAM) params.push_back(id);
  std::vector<std::pair<TensorId, TensorId>> out;
  // A parsed training listing carries its backward code already: find the gradients by name.
  if (p.has_section(Section::BACKWARD)) {
    for (TensorId w : params) {
      const TensorId gw = p.cached_grad(loss, w) != NO_TENSOR ? p.cached_grad(loss, w) : p.find(p.desc(w).name + ".grad");
      if (gw != NO_TENSOR) out.emplace_back(w, gw);
    }
    if (!out.empty()) return out;
  }
  // Only params the loss depends on get gradient code: walk back from the loss.
  std::unordered_set<TensorId> feeds{loss};
  const auto [fb, fe] = p.section_range(Section::FORWARD);
  for (size_t i = fe; i-- > fb;) {
    const Instruction& ins = p.code()[i];
    for (TensorId o : ins.out)
      if (feeds.count(o)) {
        feeds.insert(ins.in.begin(), ins.in.end());
        break;
      }
  }
  std::vector<TensorId> wrt;
  for (TensorId w : params)
    if (feeds.count(w)) wrt.push_back(w);
  if (wrt.empty()) return Status::errorf("backward: the loss %{} depends on no param", p.desc(loss).name);
  Result<std::vector<TensorId>> gs = grad(p, loss, wrt);
  if (!gs) return gs.status();
  for (size_t k = 0; k < wrt.size(); ++k) out.emplace_back(wrt[k], gs.value()[k]);
  return out;
}

}  // namespace nnasm
