// with_batch: the program re-recorded at another batch, instruction by instruction, with the
// shape immediates that carry the batch rewritten.
#include "engine/rebatch.h"

#include <cmath>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace nnasm {
namespace {

// "file:line: RESHAPE %t5", for messages.
std::string where(const Program& p, const Instruction& ins, size_t k) {
  std::string s = ins.loc.known() ? ins.loc.str() + ": " : fmt::format("instruction {}: ", k);
  s += ins.info().mnemonic;
  if (!ins.out.empty()) s += fmt::format(" {}{}", p.desc(ins.out[0]).sigil(), p.desc(ins.out[0]).name);
  return s;
}

std::string ints_str(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ",")); }

// Whether `now` is `was` with its leading dimension changed from the batch b to n.
bool batch_led(const Shape& was, const Shape& now, int64_t b, int64_t n) {
  if (was.rank < 1 || was.rank != now.rank || was[0] != b || now[0] != n) return false;
  for (int d = 1; d < was.rank; ++d)
    if (was[d] != now[d]) return false;
  return true;
}

// c when v is c (= ±1, ±2) up to float rounding, else 0.
int small_multiple(double v) {
  for (int c : {1, 2, -1, -2})
    if (std::fabs(v - c) <= 1e-6 * std::fabs(c)) return c;
  return 0;
}

// Rewrites the immediates of `ins` (operands already mapped to the copy) that carry the batch.
Status rewrite(const Program& p, const Program& np, const Instruction& old, size_t k, int64_t b, int64_t n,
               Instruction* ins) {
  const auto type_was = [&](int j) { return p.desc(old.in[j]).type.shape; };
  const auto type_now = [&](int j) { return np.desc(ins->in[j]).type.shape; };
  switch (old.op) {
    case Opcode::RESHAPE: {
      const Shape was = type_was(0), now = type_now(0);
      if (was == now) return Status::ok();
      std::vector<int64_t>& s = ins->imm[NNASM_IMM(RESHAPE, shape)].ints;
      const std::string what = fmt::format("{} to {}", where(p, old, k), ints_str(s));
      if (!batch_led(was, now, b, n))
        return Status::errorf("{}: its input {} became {}, not a change of the batch alone", what, was.str(), now.str());
      int64_t rest = 1;
      bool free_rest = false;
      for (size_t d = 1; d < s.size(); ++d) {
        if (s[d] == -1) free_rest = true;
        else rest *= s[d];
      }
      const int64_t want = was.numel() / b;
      const bool keeps = !s.empty() && (s[0] == b || s[0] == -1) &&
                         (free_rest ? rest > 0 && want % rest == 0 && s[0] != -1 : rest == want);
      if (!keeps)
        return Status::errorf("{}: it mixes the batch of {} into other dimensions or moves it off dimension 0 (only "
                              "a reshape to [{}, ...] keeping the rest of each row can be rebatched)",
                              what, was.str(), b);
      if (s[0] == b) s[0] = n;
      return Status::ok();
    }
    case Opcode::EXPAND: {
      std::vector<int64_t>& s = ins->imm[NNASM_IMM(EXPAND, shape)].ints;
      // At batch 1 a leading 1 is as often a broadcast as the batch: only a batched input says.
      if (!s.empty() && s[0] == b && (b > 1 || type_was(0) != type_now(0))) s[0] = n;
      return Status::ok();
    }
    case Opcode::SLICE: {
      const Shape was = type_was(0), now = type_now(0);
      if (was == now) return Status::ok();
      int64_t axis = ins->i(NNASM_IMM(SLICE, axis));
      if (axis < 0) axis += was.rank;
      if (axis != 0) return Status::ok();
      int64_t& start = ins->imm[NNASM_IMM(SLICE, start)].i;
      int64_t& end = ins->imm[NNASM_IMM(SLICE, end)].i;
      if (start != 0 || end < b)
        return Status::errorf("{}: it takes rows [{},{}) of the batch of {}, which depend on the batch", where(p, old, k),
                              start, end, b);
      end = n;
      return Status::ok();
    }
    case Opcode::SCALE: {
      if (old.section != Section::BACKWARD && old.section != Section::UPDATE) return Status::ok();
      const Shape was = type_was(0), now = type_now(0);
      Imm& alpha = ins->imm[NNASM_IMM(SCALE, alpha)];
      if (was != now && was.numel() > 2) {
        if (int c = small_multiple(alpha.f * static_cast<double>(was.numel()))) {
          alpha = imm_f(c / static_cast<double>(now.numel()));
          return Status::ok();
        }
      }
      if (b > 2 && small_multiple(alpha.f * static_cast<double>(b)))
        return Status::errorf("{}: the gradient is scaled by {} (a mean over the batch of {}), which does not "
                              "follow the batch: record the training program again at the new batch",
                              where(p, old, k), alpha.f, b);
      return Status::ok();
    }
    default:
      return Status::ok();
  }
}

}  // namespace

Result<int64_t> program_batch(const Program& p) {
  const std::vector<TensorId> inputs = p.inputs();
  if (inputs.empty()) return Status::error("the program has no inputs, so it has no batch to change");
  const TensorDesc& first = p.desc(inputs[0]);
  for (TensorId id : inputs) {
    const TensorDesc& d = p.desc(id);
    if (d.type.shape.rank == 0)
      return Status::errorf("input %{} is a scalar: the batch is every input's leading dimension", d.name);
    if (d.type.shape[0] != first.type.shape[0])
      return Status::errorf("input %{} {} and input %{} {} differ in their leading dimension: the batch is every "
                            "input's leading dimension",
                            d.name, d.type.shape.str(), first.name, first.type.shape.str());
  }
  return first.type.shape[0];
}

Result<std::unique_ptr<Program>> with_batch(const Program& p, int64_t n) {
  if (n < 1) return Status::errorf("batch {} is not a size: give at least 1", n);
  if (n > MAX_TENSOR_ELEMENTS) return Status::errorf("batch {} is over the limit of {} elements a tensor", n, MAX_TENSOR_ELEMENTS);
  NNASM_TRY(p.finish());
  Result<int64_t> batch = program_batch(p);
  if (!batch) return batch.status().with_prefix("cannot change the batch: ");
  const int64_t b = *batch;

  auto np = std::make_unique<Program>(p.tensor_map());
  np->set_training(p.training());
  std::unordered_map<TensorId, TensorId> to;
  for (TensorId id : p.tensors()) {
    const TensorDesc& d = p.desc(id);
    if (d.sigil() == '@') {
      NNASM_TRY(np->adopt(id));
      to[id] = id;
      continue;
    }
    TensorDesc nd = d;
    const bool input = d.role == Role::INPUT;
    if (input) nd.type.shape[0] = n;
    Result<TensorId> nid = np->declare(std::move(nd), input);
    if (!nid) return nid.status().with_prefix(fmt::format("cannot change the batch to {}: ", n));
    to[id] = *nid;
  }
  const auto map_ids = [&](std::vector<TensorId>& v) {
    for (TensorId& id : v) id = to.at(id);
  };
  for (size_t k = 0; k < p.code().size(); ++k) {
    const Instruction& old = p.code()[k];
    Instruction ins = old;
    map_ids(ins.in);
    map_ids(ins.out);
    Status st = rewrite(p, *np, old, k, b, n, &ins);
    if (st) st = np->append(std::move(ins)).with_prefix(where(p, old, k) + ": ");
    if (!st) return st.with_prefix(fmt::format("cannot change the batch from {} to {}: ", b, n));
  }
  for (const auto& [yx, g] : p.grad_cache())
    if (to.count(yx.first) && to.count(yx.second) && to.count(g)) np->cache_grad(to[yx.first], to[yx.second], to[g]);
  NNASM_TRY(np->finish());
  return np;
}

}  // namespace nnasm
