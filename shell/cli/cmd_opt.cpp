// `nnasm opt FILE [-O0|-O1] [--diff] [--passes a,b] [--list]`: the optimizer on its own, so a
// user sees what prepare will run. The output is a listing (it parses back); --diff makes every
// instruction a pass created or changed carry the pass's reason as its trailing comment, after
// a header comment summarizing the rewrites per pass.
#include <cstdio>

#include <fmt/format.h>

#include "engine/passes/pass.h"
#include "serialize/listing.h"
#include "shell/cli/cli.h"

namespace nnasm {

Status cmd_opt(const OptOptions& o) {
  if (o.list) {
    for (const PassInfo& p : all_passes()) fmt::print("{:<16} -O{}  {}\n", p.name, p.level, p.what);
    return Status::ok();
  }
  Context ctx;
  Program prog(ctx);
  NNASM_TRY(load_program(o.file, &prog));
  OptimizeReport report;
  NNASM_TRY(optimize(prog, o.level, &report, o.passes).with_prefix(o.file + ": error: "));
  std::string text;
  if (o.diff) {
    text = fmt::format("; nnasm opt {}: {} -> {} instructions in {} round{}\n", o.passes.empty() ? fmt::format("-O{}", o.level) : "--passes",
                       report.instructions_before, report.instructions_after, report.rounds, report.rounds == 1 ? "" : "s");
    for (const auto& [name, n] : report.rewrites) text += fmt::format(";   {:<16} {} rewrite{}\n", name, n, n == 1 ? "" : "s");
    if (report.rewrites.empty()) text += ";   no pass changed anything\n";
    text += program_print(prog, [&prog](size_t i) { return prog.code()[i].note; });
  } else {
    text = program_print(prog);
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
  return Status::ok();
}

}  // namespace nnasm
