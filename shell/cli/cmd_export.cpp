// `nnasm export --inference [--output NAME]... [--batch N] MODEL.nnm -o OUT.nnm`: the trained model
// turned into the model a game ships — the forward computation of the chosen outputs with the
// trained weights, in inference mode, and no labels, loss, backward, update or optimizer state
// (serialize/export.h). `nnasm run OUT.nnm` then needs only the real inputs.
#include <fmt/format.h>

#include "serialize/export.h"
#include "serialize/model_file.h"
#include "shell/cli/cli.h"

namespace nnasm {

Status cmd_export(const ExportCmdOptions& o) {
  if (!o.inference)
    return Status::error("nnasm: error: export: say what to export: --inference (the only kind so far)");
  Context trained_ctx;
  Program trained(trained_ctx);
  ModelMeta meta;
  NNASM_TRY(load_program(o.file, &trained, &meta));
  Context ctx;
  Program prog(ctx);
  ExportOptions eo;
  eo.outputs = o.outputs;
  NNASM_TRY(export_inference(trained, eo, &prog).with_prefix(fmt::format("nnasm: error: {}: ", o.file)));
  std::unique_ptr<Program> rebatched;
  NNASM_TRY(at_batch(prog, o.batch, o.file, &rebatched));
  const Program& exported = rebatched ? *rebatched : prog;
  NNASM_TRY(model_save(exported, o.out));
  note("{}: inference model of {} with output{} {}, input{} {}", o.out, o.file, exported.outputs().size() == 1 ? "" : "s",
       tensor_names(exported, exported.outputs()), exported.inputs().size() == 1 ? "" : "s",
       tensor_names(exported, exported.inputs()));
  return Status::ok();
}

}  // namespace nnasm
