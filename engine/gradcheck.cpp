// check_gradients: copy the forward section, append Σ y·r and its backward code, then compare the
// analytic gradients with central differences of the forward section, element by element.
#include "engine/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <unordered_map>

#include <fmt/format.h>

#include "engine/autodiff.h"
#include "jit/rng.h"

namespace nnasm {
namespace {

std::string name_of(const TensorDesc& d) { return fmt::format("{}{}", d.sigil(), d.name); }

// "[1,2]" for flat index 6 of a [2,4] tensor; "" for a scalar.
std::string index_str(int64_t flat, const Shape& s) {
  if (s.rank == 0) return "";
  std::vector<int64_t> idx(static_cast<size_t>(s.rank));
  for (int d = s.rank - 1; d >= 0; --d) {
    idx[static_cast<size_t>(d)] = flat % s[d];
    flat /= s[d];
  }
  return fmt::format("[{}]", fmt::join(idx, ","));
}

bool in_program(const Program& p, TensorId id) {
  return id != NO_TENSOR && p.tensor_map().find_desc(id) && p.find(p.desc(id).name) == id;
}

// The checker's own program: a copy of `src`'s declarations and forward section.
struct Copy {
  explicit Copy(uint64_t seed) : ctx(seed), prog(ctx) {}
  Context ctx;
  Program prog;
  std::unordered_map<TensorId, TensorId> map;  // src id -> copy id
};

Status copy_forward(const Program& src, Copy* c) {
  for (TensorId id : src.tensors()) {
    const TensorDesc& d = src.desc(id);
    if (!d.declared_up_front()) continue;
    Result<TensorId> n = c->prog.declare(d);
    if (!n) return n.status();
    c->map[id] = n.value();
  }
  const auto [b, e] = src.section_range(Section::FORWARD);
  for (size_t i = b; i < e; ++i) {
    Instruction ins = src.code()[i];
    for (TensorId& t : ins.in) {
      auto it = c->map.find(t);
      if (it == c->map.end())
        return Status::errorf("instruction {} reads a tensor the forward section does not define", i);
      t = it->second;
    }
    for (TensorId& t : ins.out) {
      if (!c->map.count(t)) {
        TensorDesc d = src.desc(t);
        d.values.clear();
        Result<TensorId> n = c->prog.declare(d, false);
        if (!n) return n.status();
        c->map[t] = n.value();
      }
      t = c->map.at(t);
    }
    NNASM_TRY(c->prog.append(std::move(ins)));
  }
  c->prog.set_training(src.training());
  return Status::ok();
}

Result<TensorId> append(Program& p, Opcode op, std::vector<TensorId> in,
                        const std::vector<std::pair<const char*, Imm>>& imm = {}) {
  Instruction ins = make_instruction(op, std::move(in), {});
  for (const auto& [k, v] : imm) NNASM_TRY(set_imm(ins, k, v));
  Result<std::vector<TensorId>> out = p.append_new(std::move(ins), "gradcheck.t");
  if (!out) return out.status();
  return out.value()[0];
}

// Elements of a tensor of n elements to perturb: all, or `max` of them chosen from the seed.
std::vector<int64_t> pick_elements(int64_t n, int max, uint64_t seed) {
  std::vector<int64_t> all(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) all[static_cast<size_t>(i)] = i;
  if (n <= max) return all;
  Rng rng(seed);
  for (int k = 0; k < max; ++k) {  // a partial Fisher–Yates shuffle
    const uint64_t j = static_cast<uint64_t>(k) + rng.below(static_cast<uint64_t>(n - k));
    std::swap(all[static_cast<size_t>(k)], all[j]);
  }
  all.resize(static_cast<size_t>(max));
  std::sort(all.begin(), all.end());
  return all;
}

}  // namespace

Result<GradCheckReport> check_gradients(const Program& p, TensorId y, const std::vector<TensorId>& wrt,
                                        const GradCheckOptions& o) {
  if (!in_program(p, y)) return Status::error("check_gradients: y is not a tensor of this program");
  if (p.desc(y).type.dtype != DType::F32)
    return Status::errorf("check_gradients: y {} must be f32", name_of(p.desc(y)));
  if (wrt.empty()) return Status::error("check_gradients: no tensors to check the gradient with respect to");
  if (!(o.step > 0) || o.max_elements < 1 || !(o.rtol >= 0) || !(o.atol >= 0))
    return Status::error("check_gradients: options need step > 0, max_elements ≥ 1, rtol ≥ 0 and atol ≥ 0");
  for (TensorId x : wrt) {
    if (!in_program(p, x)) return Status::error("check_gradients: a tensor to check is not in this program");
    const TensorDesc& d = p.desc(x);
    if (d.type.dtype != DType::F32)
      return Status::errorf("check_gradients: {} is {}; only f32 tensors have gradients", name_of(d), d.type.str());
    if (!d.declared_up_front())
      return Status::errorf(
          "check_gradients: {} is computed by the program; only inputs, params, consts and state can be perturbed",
          name_of(d));
  }

  auto copy = std::make_unique<Copy>(Context::of(p)->seed());
  copy->ctx.set_jit(Context::of(p)->jit());
  copy->ctx.set_opt_level(Context::of(p)->opt_level());
  if (Status s = copy_forward(p, copy.get()); !s) return s.with_prefix("check_gradients: copying the program: ");
  Program& q = copy->prog;
  const TensorId yq = copy->map.count(y) ? copy->map.at(y) : NO_TENSOR;
  if (yq == NO_TENSOR)
    return Status::errorf("check_gradients: {} is not computed by the forward section", name_of(p.desc(y)));

  q.mark_output(yq);  // read after each run, so the optimizer keeps it
  // s = Σ y·r, r fixed and random: ±[0.5, 1.5], rounded to float as the const stores it.
  Rng rng(o.seed);  // the same elements and values on every platform
  const Shape ys = q.desc(yq).type.shape;
  const int64_t ny = ys.numel();
  TensorDesc rd;
  rd.name = q.fresh_name("gradcheck.r");
  rd.type = TensorType{DType::F32, ys};
  rd.role = Role::CONST;
  for (int64_t i = 0; i < ny; ++i) {
    const double m = 0.5 + rng.uniform();
    rd.values.push_back(static_cast<float>(rng.next() & 1 ? m : -m));
  }
  const std::vector<double> r = rd.values;
  Result<TensorId> rid = q.declare(std::move(rd));
  if (!rid) return rid.status();
  Result<TensorId> s = append(q, Opcode::MUL, {yq, rid.value()});
  if (s && ys.rank > 0) s = append(q, Opcode::RESHAPE, {s.value()}, {{"shape", imm_ints({ny})}});
  if (s && ys.rank > 0) s = append(q, Opcode::REDUCE_SUM, {s.value()}, {{"axis", imm_i(0)}});
  if (!s) return s.status().with_prefix("check_gradients: forming Σ y·r: ");

  std::vector<TensorId> xq;
  for (TensorId x : wrt) xq.push_back(copy->map.at(x));
  Result<std::vector<TensorId>> g = grad(q, s.value(), xq);
  if (!g) return g.status().with_prefix("check_gradients: ");

  // Values: what the user's tensors hold, else defaults (see the header).
  for (TensorId id : p.tensors()) {
    const Tensor& src = Context::of(p)->at(id);
    if (!src.desc.declared_up_front()) continue;
    Tensor& dst = copy->ctx.at(copy->map.at(id));
    // Params and state left unallocated here are initialized by prepare.
    const bool fill_input = dst.desc.role == Role::INPUT && dst.desc.type.dtype == DType::F32;
    if (!src.allocated() && !fill_input) continue;
    if (!dst.allocate())
      return Status::errorf("check_gradients: cannot allocate {} bytes for {}", storage_bytes(dst.desc.type), name_of(dst.desc));
    if (src.allocated())
      std::memcpy(dst.storage(), src.storage(), static_cast<size_t>(dst.numel()) * dtype_size(dst.desc.type.dtype));
    else
      for (int64_t i = 0; i < dst.numel(); ++i) dst.f32()[i] = static_cast<float>(2 * rng.uniform() - 1);
  }
  Result<std::unique_ptr<Executor>> exr = Executor::prepare(q);
  if (!exr) return exr.status().with_prefix("check_gradients: ");
  Executor& ex = *exr.value();
  if (o.fill) o.fill(ex);

  const float* yv = copy->ctx.at(yq).f32();
  auto scalar = [&] {
    ex.set_run_index(0);  // every run draws the same random numbers (DROPOUT's mask)
    copy->ctx.params_changed();  // a perturbed param reaches the derive section
    ex.run(Section::FORWARD);
    double acc = 0;
    for (int64_t i = 0; i < ny; ++i) acc += static_cast<double>(yv[i]) * r[static_cast<size_t>(i)];
    return acc;
  };
  scalar();
  ex.run(Section::BACKWARD);
  std::vector<std::vector<float>> analytic;
  for (TensorId gid : g.value()) {
    const Tensor& t = copy->ctx.at(gid);
    analytic.emplace_back(t.f32(), t.f32() + t.numel());
  }

  GradCheckReport rep;
  double worst_ratio = -1;
  const std::string yname = name_of(p.desc(y));
  for (size_t k = 0; k < xq.size(); ++k) {
    Tensor& xt = copy->ctx.at(xq[k]);
    float* xv = xt.f32();
    for (int64_t i : pick_elements(xt.numel(), o.max_elements, o.seed ^ (0x5851f42d4c957f2dULL * (k + 1)))) {
      const float orig = xv[i];
      const float up = static_cast<float>(orig + o.step), down = static_cast<float>(orig - o.step);
      xv[i] = up;
      const double s_up = scalar();
      xv[i] = down;
      const double s_down = scalar();
      xv[i] = orig;
      const double numeric = (s_up - s_down) / (static_cast<double>(up) - static_cast<double>(down));
      const double a = analytic[k][static_cast<size_t>(i)];
      const double err = std::fabs(a - numeric), mag = std::max(std::fabs(a), std::fabs(numeric));
      const double tol = o.atol + o.rtol * mag;
      // A NaN on either side fails and counts as an infinite error.
      const bool ok = err <= tol;
      const double e = std::isnan(err) ? INFINITY : err;
      const double ratio = e / std::max(tol, 1e-300);
      ++rep.checked;
      rep.ok &= ok;
      rep.max_abs_error = std::max(rep.max_abs_error, e);
      rep.max_rel_error = std::max(rep.max_rel_error, e / std::max({mag, o.atol, 1e-300}));
      if (ratio > worst_ratio) {
        worst_ratio = ratio;
        rep.worst = fmt::format("d {} / d {}{}: analytic {:.6g}, numeric {:.6g}", yname, name_of(p.desc(wrt[k])),
                                index_str(i, xt.desc.type.shape), a + 0.0, numeric + 0.0);  // no "-0"
      }
    }
  }
  return rep;
}

}  // namespace nnasm
