// `nnasm run FILE [--in NAME=PATH.npy]... [--out NAME=PATH.npy]... [--seed N] [--train]`: runs a
// listing or model file once on inputs from .npy files, in inference mode unless --train is given. Everything a user can get wrong (names, missing inputs, dtypes,
// shapes, unreadable files) is checked before Executor::prepare allocates the model, so a mistake
// costs nothing and the message names both sides of the mismatch.
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "engine/executor.h"
#include "serialize/listing.h"
#include "serialize/npy.h"
#include "shell/cli/cli.h"

namespace nnasm {

namespace {

template <typename... A>
Status fail(fmt::format_string<A...> f, A&&... a) {
  return Status::error("nnasm: error: " + fmt::format(f, std::forward<A>(a)...));
}

}  // namespace

Status cmd_run(const RunOptions& o) {
  std::vector<Binding> outs(o.outs.size());
  for (size_t i = 0; i < o.outs.size(); ++i) NNASM_TRY(parse_binding(o.outs[i], "--out", "%@", &outs[i]));

  Context ctx;
  Program loaded(ctx);
  NNASM_TRY(load_program(o.file, &loaded));
  std::unique_ptr<Program> rebatched;
  NNASM_TRY(at_batch(loaded, o.batch, o.file, &rebatched));
  Program& prog = rebatched ? *rebatched : loaded;
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

  if (!outs.empty()) {
    for (size_t i = 0; i < outs.size(); ++i) {
      const Tensor& t = ctx.at(out_ids[i]);
      Status s = npy_write(outs[i].path, t.desc.type, t.storage());
      if (!s) return fail("--out {}: {}", outs[i].name, s.message());
    }
    return Status::ok();
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
