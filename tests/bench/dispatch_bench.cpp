// Interpreter dispatch overhead: a stream of 1,000 tiny instructions (SCALE of one float, each
// reading the previous result), so the time per instruction is the executor's loop, the indirect
// call and the kernel's prologue/epilogue — the cost every instruction pays.
#include <benchmark/benchmark.h>

#include "tests/bench/bench_program.h"

namespace nnasm {
namespace {

constexpr int N_INSTRUCTIONS = 1000;

void record_chain(Graph& g) {
  Var x = g.input("x", {1});
  for (int i = 0; i < N_INSTRUCTIONS; ++i) x = scale(x, 1.0001f);
  g.output(x, "y");
}

void BM_dispatch_1000_tiny(benchmark::State& st) {
  const bool jit = st.range(0) != 0;
  auto b = bench_program(record_chain, JitConfig{jit, Isa::AVX512});
  if (!b) {
    st.SkipWithError("prepare failed");
    return;
  }
  st.SetLabel(b->ex->kernel_name(0));
  for (auto _ : st) b->ex->run();
  st.counters["ns_per_instruction"] =
      benchmark::Counter(static_cast<double>(st.iterations()) * N_INSTRUCTIONS,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_dispatch_1000_tiny)->ArgName("jit")->Arg(1)->Arg(0);

}  // namespace
}  // namespace nnasm
