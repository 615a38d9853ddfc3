// `nnasm build LISTING [--weights MODEL.nnm] -o OUT.nnm`: the way back from a hand-edited listing
// to a model file. Weights are matched by tensor name, so swapping an activation or removing a
// dropout keeps every trained value; a tensor whose type changed is an error rather than a silent
// re-initialization, and tensors new in the listing start from their initializers (noted).
#include <fmt/format.h>

#include "serialize/model_file.h"
#include "shell/cli/cli.h"

namespace nnasm {

namespace {
std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "@" : ", @") + n;
  return s;
}
}  // namespace

Status cmd_build(const BuildOptions& o) {
  Context ctx;
  Program prog(ctx);
  NNASM_TRY(load_program(o.file, &prog));
  ModelSaveOptions save;
  if (!o.weights.empty()) {
    Context wctx;
    Program weights(wctx);
    ModelMeta meta;
    bool is_model = false;
    NNASM_TRY(load_program(o.weights, &weights, &meta, &is_model));
    if (!is_model) return Status::errorf("nnasm: error: --weights {}: not a model file (.nnm)", o.weights);
    ValuesReport rep;
    NNASM_TRY(copy_values(weights, &prog, &rep).with_prefix(fmt::format("nnasm: error: --weights {}: ", o.weights)));
    ctx.set_seed(meta.seed);
    save.run_index = meta.run_index;
    if (!rep.fresh.empty())
      note("{} tensor{} without values in {} start from {} initializer: {}", rep.fresh.size(), rep.fresh.size() == 1 ? "" : "s",
           o.weights, rep.fresh.size() == 1 ? "its" : "their", joined(rep.fresh));
    if (!rep.unused.empty())
      note("{} tensor{} of {} not in {}, left out: {}", rep.unused.size(), rep.unused.size() == 1 ? "" : "s", o.weights,
           o.file, joined(rep.unused));
    note_verbose("{} tensors took their values from {}", rep.copied.size(), o.weights);
  }
  if (o.has_seed) ctx.set_seed(o.seed);
  return model_save(prog, o.out, save);
}

}  // namespace nnasm
