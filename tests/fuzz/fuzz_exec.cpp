// libFuzzer target, end to end: parse a listing, prepare it and run every section (forward,
// backward, update), once with the reference kernels (NNASM_JIT=0's path, which the sanitizers
// see into) and once with the JIT as the environment configures it. Programs whose tensors need
// more than MAX_BYTES in all are skipped, so that the fuzzer explores the engine rather than
// finding out that big tensors need big memory. Deterministic: one thread, the context's fixed
// seed, inputs filled with small values from their element index.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/executor.h"
#include "serialize/listing.h"

using namespace nnasm;

namespace {

constexpr size_t MAX_BYTES = size_t(4) << 20;

// Small values of both signs (and zero); for i32 inputs, class ids from -1 (out of range) to 3.
void fill_inputs(const Program& p) {
  for (TensorId id : p.inputs()) {
    Tensor& t = Context::of(p)->at(id);
    const int64_t n = t.numel();
    if (t.desc.type.dtype == DType::F32) {
      for (int64_t i = 0; i < n; ++i) t.f32()[i] = static_cast<float>(i % 7 - 3) * 0.25f;
    } else {
      for (int64_t i = 0; i < n; ++i) t.i32()[i] = static_cast<int32_t>(i % 5 - 1);
    }
  }
}

void prepare_and_run(const Program& p) {
  Result<std::unique_ptr<Executor>> ex = Executor::prepare(p);
  if (!ex) return;
  fill_inputs(p);
  (*ex)->run(Section::FORWARD);
  (*ex)->run(Section::BACKWARD);
  (*ex)->run(Section::UPDATE);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Context ctx;
  ctx.set_threads(1);
  ctx.set_log([](const std::string&) {});
  Program p(ctx);
  if (!program_parse(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.nnasm", &p)) return 0;
  if (!p.finish()) return 0;
  size_t bytes = 0;
  for (TensorId id : p.tensors()) {
    bytes += storage_bytes(p.desc(id).type);
    if (bytes > MAX_BYTES) return 0;
  }
  const JitConfig jit = ctx.jit();
  JitConfig ref = jit;
  ref.enabled = false;
  ctx.set_jit(ref);
  prepare_and_run(p);
  ctx.set_jit(jit);
  prepare_and_run(p);
  return 0;
}
