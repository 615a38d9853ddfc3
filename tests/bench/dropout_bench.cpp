// DROPOUT in training mode (rate 0.5, a new mask every run) on 2^20 floats and on a 64×256
// activation (an MLP's hidden layer at batch 64): the generated kernel capped at AVX-512 and at
// AVX2, and the reference kernel (JIT off), each its own benchmark. The JIT rows also report
// ref_x: how many times faster than the reference, timed back to back in that entry. Labels
// name the kernel that ran, so a level the machine lacks shows as the one it fell to.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "tests/bench/bench_program.h"

namespace nnasm {
namespace {

std::unique_ptr<BenchProgram> dropout_program(const Shape& s, JitConfig jit) {
  auto b = bench_program([&s](Graph& g) { g.output(dropout(g.input("x", s), 0.5f), "y"); }, jit);
  if (b) b->ex->set_training(true);
  return b;
}

void bench_dropout(benchmark::State& st, Shape s, JitConfig jit) {
  auto b = dropout_program(s, jit);
  if (!b) {
    st.SkipWithError("build failed");
    return;
  }
  st.SetLabel(b->ex->kernel_name(0));
  for (auto _ : st) b->ex->run();
  st.SetBytesProcessed(st.iterations() * 2 * 4 * s.numel());
  if (jit.enabled) {
    auto r = dropout_program(s, JitConfig{false, Isa::AVX512});
    const double t_jit = best_time([&] { b->ex->run(); });
    st.counters["ref_x"] = best_time([&] { r->ex->run(); }) / t_jit;
  }
}

const int registered = [] {
  const struct {
    const char* name;
    Shape shape;
  } sizes[] = {{"1M", Shape{int64_t(1) << 20}}, {"64x256", Shape{64, 256}}};
  const struct {
    const char* name;
    JitConfig jit;
  } levels[] = {{"avx512", JitConfig{true, Isa::AVX512}},
                {"avx2", JitConfig{true, Isa::AVX2}},
                {"ref", JitConfig{false, Isa::AVX512}}};
  for (const auto& s : sizes)
    for (const auto& l : levels) {
      const Shape shape = s.shape;
      const JitConfig jit = l.jit;
      benchmark::RegisterBenchmark((std::string("BM_DROPOUT_") + s.name + "/" + l.name).c_str(),
                                   [shape, jit](benchmark::State& st) { bench_dropout(st, shape, jit); })
          ->Unit(benchmark::kMicrosecond);
    }
  return 0;
}();

}  // namespace
}  // namespace nnasm
