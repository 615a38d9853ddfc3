// libFuzzer target: the Myelin flow reader and importer (serialize/flow/) on arbitrary bytes. A
// file that reads must import each of its functions to an error or to a program that is
// finished, whose report adds up (every operation imported or listed as a problem), whose listing
// reads back to itself, and that prepares and runs. Limits keep programs small so the fuzzer
// explores the reader and the importer, not the allocator.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/executor.h"
#include "serialize/flow/flow_import.h"
#include "serialize/listing.h"

using namespace nnasm;

namespace {

void import_and_run(const Flow& flow, const std::string& function) {
  Context ctx;
  ctx.set_threads(1);
  ctx.set_log([](const std::string&) {});
  Program p(ctx);
  ImportReport report;
  FlowImportOptions o;
  o.function = function;
  o.batch = 2;
  o.max_program_bytes = 4 << 20;
  if (!flow_import(flow, &p, &report, o)) return;
  if (report.imported + report.problems.size() != report.nodes || !p.finish()) __builtin_trap();
  const std::string text = program_print(p);
  Context ctx2;
  Program q(ctx2);
  if (!program_parse(text, "imported.nnasm", &q) || program_print(q) != text) __builtin_trap();
  Result<std::unique_ptr<Executor>> ex = Executor::prepare(p);
  if (ex) (*ex)->run();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Flow flow;
  if (!flow_read(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.flow", &flow)) return 0;
  for (const FlowFunction& f : flow.funcs) import_and_run(flow, f.name);
  return 0;
}
