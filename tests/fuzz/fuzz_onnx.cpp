// libFuzzer target: the ONNX importer (serialize/onnx/) on arbitrary bytes. A failed import must
// say why; a successful one must have mapped every node, print as a listing that parses back, and
// prepare and run (with the reference kernels, which the sanitizers see into). Programs whose
// tensors need more than MAX_BYTES in all are not run, as in fuzz_exec.cpp.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/executor.h"
#include "serialize/listing.h"
#include "serialize/onnx/onnx_import.h"

using namespace nnasm;

namespace {

constexpr size_t MAX_BYTES = size_t(4) << 20;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Context ctx;
  ctx.set_threads(1);
  ctx.set_log([](const std::string&) {});
  Program p(ctx);
  ImportReport report;
  const Status s = onnx_import(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.onnx", {}, &p, &report);
  if (!s) {
    if (s.message().empty()) __builtin_trap();
    return 0;
  }
  if (!report.complete() || report.imported != report.nodes) __builtin_trap();
  Context ctx2;
  Program q(ctx2);
  if (!program_parse(program_print(p), "fuzz.nnasm", &q)) __builtin_trap();
  size_t bytes = 0;
  for (TensorId id : p.tensors()) {
    bytes += storage_bytes(p.desc(id).type);
    if (bytes > MAX_BYTES) return 0;
  }
  JitConfig ref = ctx.jit();
  ref.enabled = false;
  ctx.set_jit(ref);
  Result<std::unique_ptr<Executor>> ex = Executor::prepare(p);
  if (ex) (*ex)->run();
  return 0;
}
