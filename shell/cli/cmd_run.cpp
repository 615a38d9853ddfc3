// `nnasm run FILE [--in NAME=PATH.npy]... [--out NAME=PATH.npy]... [--expect NAME=REF.npy]... [--seed N]
// [--train] [--isa LEVEL]`: runs a listing or model file once on inputs from .npy files, in inference
// mode unless --train is given; --expect compares outputs with reference arrays (a test's oracle). Everything a user can get wrong (names, missing inputs, dtypes,
// shapes, unreadable files) is checked before Executor::prepare allocates the model, so a mistake
// costs nothing and the message names both sides of the mismatch.
#include <cstdio>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "engine/executor.h"
#include "jit/cpu.h"
#include "serialize/listing.h"
#include "serialize/npy.h"
#include "shell/cli/cli.h"

namespace nnasm {

namespace {

template <typename... A>
Status fail(fmt::format_string<A...> f, A&&... a) {
  return Status::error("nnasm: error: " + fmt::format(f, std::forward<A>(a)...));
}

// "[1,2]": the row-major index `flat` of `shape`.
std::string index_str(const Shape& shape, int64_t flat) {
  std::vector<int64_t> idx(static_cast<size_t>(shape.rank));
  for (int d = shape.rank - 1; d >= 0; --d) {
    idx[static_cast<size_t>(d)] = shape[d] > 0 ? flat % shape[d] : 0;
    flat = shape[d] > 0 ? flat / shape[d] : 0;
  }
  return fmt::format("[{}]", fmt::join(idx, ","));
}

// Compares tensor `t` with the reference in `b.path` elementwise: |a - e| <= atol + rtol * |e|, a
// NaN matching only a NaN. Prints one line on a match; a mismatch is an error naming the worst
// element (the one furthest past its tolerance).
Status check_expected(const Tensor& t, const Binding& b, double atol, double rtol) {
  NpyArray ref;
  if (Status s = npy_read(b.path, &ref); !s) return fail("--expect {}: {}", b.name, s.message());
  if (!(ref.type.shape == t.desc.type.shape))
    return fail("--expect {}: {} holds {}, the output {}{} is {}", b.name, b.path, ref.type.str(), t.desc.sigil(),
                t.desc.name, t.desc.type.str());
  const int64_t n = t.numel();
  auto element = [](DType dt, const void* p, int64_t i) -> double {
    switch (dt) {
      case DType::I32: return static_cast<const int32_t*>(p)[i];
      case DType::I8: return static_cast<const int8_t*>(p)[i];
      case DType::U8: return static_cast<const uint8_t*>(p)[i];
      default: return static_cast<const float*>(p)[i];
    }
  };
  const DType rt = ref.type.dtype;
  const void* ref_data = rt == DType::I32 ? static_cast<const void*>(ref.i32.data())
                         : rt == DType::I8 || rt == DType::U8 ? static_cast<const void*>(ref.bytes.data())
                                                             : static_cast<const void*>(ref.f32.data());
  auto got = [&](int64_t i) { return element(t.desc.type.dtype, t.storage(), i); };
  auto want = [&](int64_t i) { return element(rt, ref_data, i); };
  int64_t bad = 0, worst = -1;
  double worst_excess = -1, max_diff = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double a = got(i), e = want(i);
    const bool both_nan = std::isnan(a) && std::isnan(e);
    const double diff = both_nan ? 0 : std::isnan(a) || std::isnan(e) ? INFINITY : std::fabs(a - e);
    const double tol = atol + rtol * std::fabs(e);
    max_diff = std::max(max_diff, diff);
    if (!(diff <= tol)) {
      ++bad;
      const double excess = tol > 0 ? diff / tol : INFINITY;
      if (worst < 0 || excess > worst_excess) worst = i, worst_excess = excess;
    }
  }
  if (bad > 0)
    return fail("--expect {}: {} of {} elements differ from {} (|a - b| > {} + {} * |b|); worst at {}: {:.8g} vs expected {:.8g} "
                "(difference {:.3g})",
                b.name, bad, n, b.path, atol, rtol, index_str(t.desc.type.shape, worst), got(worst), want(worst),
                std::fabs(got(worst) - want(worst)));
  fmt::print("{}{}: matches {} ({} elements, largest difference {:.3g})\n", t.desc.sigil(), t.desc.name, b.path, n, max_diff);
  return Status::ok();
}

}  // namespace

Status apply_isa(Context& ctx, const std::string& level) {
  if (level.empty()) return Status::ok();
  Isa isa = Isa::REF;
  if (!isa_from_name(level, &isa)) return fail("--isa {}: expected avx512, avx2 or ref", level);
  if (isa > cpu_info().best)
    return fail("--isa {}: this CPU's best level is {} (nnasm info lists its features)", level, isa_name(cpu_info().best));
  JitConfig c = ctx.jit();
  c.cap = isa;
  ctx.set_jit(c);
  return Status::ok();
}

Status cmd_run(const RunOptions& o) {
  std::vector<Binding> outs(o.outs.size());
  for (size_t i = 0; i < o.outs.size(); ++i) NNASM_TRY(parse_binding(o.outs[i], "--out", "%@", &outs[i]));
  std::vector<Binding> expects(o.expects.size());
  for (size_t i = 0; i < o.expects.size(); ++i) NNASM_TRY(parse_binding(o.expects[i], "--expect", "%@", &expects[i]));
  if (!(o.atol >= 0) || !(o.rtol >= 0)) return fail("--atol {} --rtol {}: tolerances must be >= 0", o.atol, o.rtol);

  Context ctx;
  RunProgram source(ctx);
  NNASM_TRY(load_run_program(o.file, o.batch, o.isa, ctx, &source));
  Program& prog = source.program();
  std::map<TensorId, NpyArray> data;
  NNASM_TRY(read_inputs(prog, o.file, o.ins, true, &data));

  std::vector<TensorId> out_ids;
  for (const Binding& b : outs) {
    const TensorId id = prog.find(b.name);
    if (id == NO_TENSOR)
      return fail("--out {}: {} has no tensor named '{}' (its outputs: {})", b.name, o.file, b.name,
                  tensor_names(prog, prog.outputs()));
    // Read after the run: as an output, neither the optimizer nor the memory planner reuses it.
    if (prog.desc(id).role == Role::TEMPORARY) prog.mark_output(id);
    out_ids.push_back(id);
  }
  std::vector<TensorId> expect_ids;
  for (const Binding& b : expects) {
    const TensorId id = prog.find(b.name);
    if (id == NO_TENSOR)
      return fail("--expect {}: {} has no tensor named '{}' (its outputs: {})", b.name, o.file, b.name,
                  tensor_names(prog, prog.outputs()));
    if (prog.desc(id).role == Role::TEMPORARY) prog.mark_output(id);
    expect_ids.push_back(id);
  }

  // The mode is the command line's, not the listing's: a listing saved from a training program
  // says `mode training`, yet running it is inference unless asked. Set on the program too, so
  // the optimizer and the --kernels listing see the mode the run has.
  // Params nobody gave values (a listing's `init=`, a model file's "not initialized") start from
  // random initial weights: outputs that look plausible and mean nothing. Said even with --quiet,
  // which silences notes, not warnings.
  std::vector<TensorId> fresh;
  for (TensorId id : prog.tensors())
    if (prog.desc(id).role == Role::PARAM && prog.desc(id).values.empty() && !ctx.at(id).allocated()) fresh.push_back(id);
  if (!fresh.empty()) {
    constexpr size_t kNamed = 8;
    std::vector<TensorId> named(fresh.begin(), fresh.begin() + std::min(fresh.size(), kNamed));
    fmt::print(stderr, "nnasm: warning: {}: {} param{} hold{} only {} initializer (random weights, not trained values): {}{}\n",
               o.file, fresh.size(), fresh.size() == 1 ? "" : "s", fresh.size() == 1 ? "s" : "", fresh.size() == 1 ? "its" : "their",
               tensor_names(prog, named), fresh.size() > kNamed ? fmt::format(" and {} more", fresh.size() - kNamed) : "");
  }
  prog.set_training(o.train);
  if (o.has_seed) ctx.set_seed(o.seed);
  if (o.opt_level >= 0) ctx.set_opt_level(o.opt_level);
  Result<std::unique_ptr<Executor>> ex = Executor::prepare(prog);
  if (!ex) return fail("{}: {}", o.file, ex.status().message());
  if (Status s = (*ex)->set_training(o.train); !s) return fail("{}: {}", o.file, s.message());
  copy_inputs(ctx, data);
  if (o.kernels) {
    const Executor& e = **ex;
    fmt::print("{}\n", program_print(e.program(), [&e](size_t i) { return fmt::format("kernel: {}", e.kernel_name(i)); }));
  }
  (*ex)->run();

  // Every comparison is printed before the first mismatch fails the run, so one run shows them all.
  Status expected = Status::ok();
  for (size_t i = 0; i < expects.size(); ++i) {
    Status s = check_expected(ctx.at(expect_ids[i]), expects[i], o.atol, o.rtol);
    if (!s && expected) expected = s;
    else if (!s) fmt::print(stderr, "{}\n", s.message());
  }
  if (!outs.empty() || !expects.empty()) {
    for (size_t i = 0; i < outs.size(); ++i) {
      const Tensor& t = ctx.at(out_ids[i]);
      Status s = npy_write(outs[i].path, t.desc.type, t.storage());
      if (!s) return fail("--out {}: {}", outs[i].name, s.message());
    }
    std::fflush(stdout);
    return expected;
  }
  for (TensorId id : prog.outputs()) {
    const Tensor& t = ctx.at(id);
    fmt::print("{}{}: {}\n{}\n", t.desc.sigil(), t.desc.name, t.desc.type.str(),
               format_tensor(t.desc.type, t.storage()));
  }
  std::fflush(stdout);
  return Status::ok();
}

}  // namespace nnasm
