// Interpreter dispatch overhead: streams of 1,000 tiny instructions (one float each), so the time
// per instruction is the dispatch, the call and the kernel's prologue/epilogue — the cost every
// instruction pays. Three streams:
//   chain  SCALE after SCALE, each reading the previous result: also pays the store→load
//          forwarding latency of the one-float dependency (a floor of about 10 cycles).
//   indep  1,000 SCALEs of the input: dispatch alone.
//   mixed  independent instructions cycling through five different kernels, so the
//          interpreter loop's one indirect call site changes target at every instruction.
// Each at three dispatch settings: the generated stream (the default), the interpreter loop
// over JIT kernels, and reference kernels (JIT off, which always loops).
// The programs run with the memory plan but without the rewriting passes: -O1 would fold the
// chain's SCALEs into one and drop the unread results (one instruction left, as this file
// measured by mistake before), and -O0 gives each of the 1,000 results 64 bytes of its own, so
// the stores would stream through 64 KB and measure L1 misses. Only const-fold runs, and finds
// nothing to fold (the input is not a constant). The label gives the instruction count.
#include <benchmark/benchmark.h>

#include <fmt/format.h>

#include "tests/bench/bench_program.h"

namespace nnasm {
namespace {

constexpr int N_INSTRUCTIONS = 1000;

void record_chain(Graph& g) {
  Var x = g.input("x", {1});
  for (int i = 0; i < N_INSTRUCTIONS; ++i) x = scale(x, 1.0001f);
  g.output(x, "y");
}

void record_independent(Graph& g, bool mixed) {
  Var x = g.input("x", {1});
  Var last = x;
  for (int i = 0; i < N_INSTRUCTIONS; ++i) {
    switch (mixed ? i % 5 : 0) {
      case 0: last = scale(x, 1.0001f); break;
      case 1: last = relu(x); break;
      case 2: last = x + x; break;
      case 3: last = sigmoid(x); break;
      case 4: last = x * x; break;
    }
  }
  g.output(last, "y");
}

// range(0): 0 chain, 1 indep, 2 mixed; range(1): 0 stream, 1 loop, 2 ref.
void BM_dispatch_1000_tiny(benchmark::State& st) {
  const int shape = static_cast<int>(st.range(0));
  const int mode = static_cast<int>(st.range(1));
  JitConfig cfg{mode != 2, Isa::AVX512};
  cfg.stream = mode == 0;
  auto b = bench_program(
      [&](Graph& g) {
        if (shape == 0) record_chain(g);
        else record_independent(g, shape == 2);
      },
      cfg, 1, {"const-fold"});
  if (!b || b->ex->program().code().size() != N_INSTRUCTIONS) {
    st.SkipWithError("prepare failed, or the program is not 1,000 instructions");
    return;
  }
  static const char* shapes[] = {"chain", "indep", "mixed"};
  static const char* modes[] = {"stream", "loop", "ref"};
  st.SetLabel(fmt::format("{} {} {} instructions{}", shapes[shape], modes[mode], b->ex->program().code().size(),
                          b->ex->streamed() ? ", streamed" : ""));
  for (auto _ : st) b->ex->run();
  st.counters["ns_per_instruction"] =
      benchmark::Counter(static_cast<double>(st.iterations()) * N_INSTRUCTIONS,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_dispatch_1000_tiny)
    ->ArgNames({"shape", "mode"})
    ->ArgsProduct({{0, 1, 2}, {0, 1, 2}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace nnasm
