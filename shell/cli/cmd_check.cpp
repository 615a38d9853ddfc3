// `nnasm check FILE [--print]`: the listing's compiler front end on its own, for editors and
// scripts. Success prints a one-line summary (so a person running it by hand sees that something
// was checked) or, with --print, exactly the normalized listing, so that `check --print` can be
// piped back into a file.
#include <cstdio>

#include <fmt/format.h>

#include "serialize/listing.h"
#include "shell/cli/cli.h"

namespace nnasm {

Status cmd_check(const CheckOptions& o) {
  Context ctx;
  Program prog(ctx);
  NNASM_TRY(load_program(o.file, &prog));
  if (o.print) {
    const std::string text = program_print(prog);
    std::fwrite(text.data(), 1, text.size(), stdout);
  } else {
    const size_t n = prog.code().size(), m = prog.tensors().size();
    fmt::print("{}: ok ({} instruction{}, {} tensor{})\n", o.file, n, n == 1 ? "" : "s", m, m == 1 ? "" : "s");
  }
  return Status::ok();
}

}  // namespace nnasm
