// `nnasm dump FILE [-o OUT]`: a model file's program as its normalized listing, for reading and
// hand editing; `nnasm build` turns the edited listing back into a model file. Because the printer
// and the parser are inverses, dump → build → dump gives the same text.
#include <cstdio>

#include "serialize/atomic_file.h"
#include "serialize/listing.h"
#include "shell/cli/cli.h"

namespace nnasm {

Status cmd_dump(const DumpOptions& o) {
  Context ctx;
  Program prog(ctx);
  NNASM_TRY(load_program(o.file, &prog));
  const std::string text = program_print(prog);
  if (!o.out.empty()) return write_file_atomic(o.out, text);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return Status::ok();
}

}  // namespace nnasm
