// libFuzzer target: the model file loader. Each input is decoded twice — as it is, and with its
// checksums recomputed (reseal_model_image), since random bytes almost never carry valid
// checksums and the interesting checks lie behind them. A file that loads must encode again to
// bytes that load and encode identically (save → load → save), and must prepare and run. Limits
// keep programs small so the fuzzer explores the loader, not the allocator.
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/executor.h"
#include "serialize/model_file.h"
#include "serialize/model_frame.h"

using namespace nnasm;

namespace {

ModelLimits small_limits() {
  ModelLimits lim;
  lim.max_file_bytes = 1 << 20;
  lim.max_listing_bytes = 1 << 16;
  lim.max_tensors = 1 << 10;
  lim.max_program_bytes = 4 << 20;
  return lim;
}

void load_and_check(const std::string& bytes) {
  Context ctx;
  ctx.set_threads(1);
  ctx.set_log([](const std::string&) {});
  Program p(ctx);
  if (!model_decode(bytes, "fuzz.nnm", &p, nullptr, small_limits())) return;
  const std::string again = model_encode(p);
  Context ctx2;
  ctx2.set_threads(1);
  Program q(ctx2);
  if (!model_decode(again, "again.nnm", &q, nullptr, small_limits())) __builtin_trap();
  if (model_encode(q) != again) __builtin_trap();
  Result<std::unique_ptr<Executor>> ex = Executor::prepare(p);
  if (!ex) return;
  (*ex)->run(Section::FORWARD);
  (*ex)->run(Section::BACKWARD);
  (*ex)->run(Section::UPDATE);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  load_and_check(bytes);
  reseal_model_image(&bytes);
  load_and_check(bytes);
  return 0;
}
