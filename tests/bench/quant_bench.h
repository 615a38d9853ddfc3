// What issue 30's reduced-precision benchmarks share (quant_bench.cpp, baselines_onednn.cpp): a
// listing of tests/bench/quant/ prepared for timing, and several codes timed in alternating
// blocks.
#pragma once
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "serialize/listing.h"
#include "tests/bench/bench_program.h"

namespace nnasm {

// The listing at `path` (relative to the repository root, where the benchmarks run) prepared on
// `threads` threads at the machine's best JIT level, its params initialized as the listing says
// and its f32 inputs filled as prepared() does. nullptr if it is missing or does not prepare.
inline std::unique_ptr<BenchProgram> listing_program(const std::string& path, int threads = 1) {
  auto b = std::make_unique<BenchProgram>();
  b->ctx.set_threads(threads);
  if (!program_parse_file(path, &b->p)) return nullptr;
  return prepared(std::move(b), false);
}

// The kernel of `b`'s first layer: its first instruction after the derive section (where
// QUANTIZE and the weight packing of an int8 listing run once).
inline std::string first_layer(const BenchProgram& b) {
  return b.ex->kernel_name(b.ex->program().section_range(Section::DERIVE).second);
}

namespace baselines {

// Several codes timed in alternating blocks of about 20 µs inside each benchmark iteration (the
// first side, then the second, …, then the first again), for the same reason as head_to_head:
// every side sees the same clock. Counters: `<name>_us`, each side's median time per call over
// the blocks, and `<name>_ratio`, that over the first side's (the baseline of the row). A side
// whose call is empty is left out (a listing not there yet).
struct Side {
  std::string name;
  std::function<void()> call;
};
inline void alternate(benchmark::State& st, const std::vector<Side>& sides) {
  using clock = std::chrono::steady_clock;
  std::vector<int> calls;
  std::vector<std::vector<double>> times(sides.size());
  for (const Side& s : sides) {
    if (!s.call) {
      calls.push_back(0);
      continue;
    }
    s.call();
    const auto t0 = clock::now();
    s.call();
    const double t = std::chrono::duration<double>(clock::now() - t0).count();
    calls.push_back(static_cast<int>(std::clamp(20e-6 / std::max(t, 1e-9), 1.0, 1000.0)));
  }
  for (auto _ : st)
    for (size_t i = 0; i < sides.size(); ++i) {
      if (!calls[i]) continue;
      const auto t0 = clock::now();
      for (int c = 0; c < calls[i]; ++c) sides[i].call();
      times[i].push_back(std::chrono::duration<double>(clock::now() - t0).count() / calls[i]);
    }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  const double base = median(times[0]);
  for (size_t i = 0; i < sides.size(); ++i) {
    if (!calls[i]) continue;
    const double m = median(times[i]);
    st.counters[sides[i].name + "_us"] = m * 1e6;
    if (i > 0 && base > 0) st.counters[sides[i].name + "_ratio"] = m / base;
  }
}

}  // namespace baselines
}  // namespace nnasm
