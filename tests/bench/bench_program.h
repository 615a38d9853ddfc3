// What every benchmark file needs: a program recorded with shell functions and prepared at a
// chosen JIT setting, kept alive with its context for the duration of the benchmark.
#pragma once
#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/executor.h"
#include "engine/usable_cpus.h"
#include "shell/shell.h"

namespace nnasm {

struct BenchProgram {
  Context ctx;
  Program p{ctx};
  std::unique_ptr<Executor> ex;
};

// Prepares b's recorded program and fills its inputs: f32 with small deterministic values, and
// with `class_ids` i32 with 0…9. nullptr if prepare failed.
inline std::unique_ptr<BenchProgram> prepared(std::unique_ptr<BenchProgram> b, bool class_ids) {
  auto ex = Executor::prepare(b->p);
  if (!ex) return nullptr;
  b->ex = std::move(ex.value());
  for (TensorId id : b->p.inputs()) {
    Tensor& t = b->ctx.at(id);
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (t.desc.type.dtype == DType::F32) t.f32()[i] = static_cast<float>((i * 7919) % 255) / 255.f - 0.5f;
      else if (class_ids) t.i32()[i] = static_cast<int32_t>(i % 10);
    }
  }
  return b;
}

// Records `record`, prepares it with `jit` (default: JIT at the machine's best level) at
// optimization level `opt_level` (default: the context's, from NNASM_OPT), with only the named
// `passes` when given, and fills every f32 input with small deterministic values. nullptr if
// recording or prepare failed.
inline std::unique_ptr<BenchProgram> bench_program(const std::function<void(Graph&)>& record,
                                                   JitConfig jit = JitConfig{true, Isa::AVX512}, int opt_level = -1,
                                                   std::vector<std::string> passes = {}) {
  auto b = std::make_unique<BenchProgram>();
  b->ctx.set_jit(jit);
  if (opt_level >= 0) b->ctx.set_opt_level(opt_level);
  b->ctx.set_passes(std::move(passes));
  Graph g(b->p);
  record(g);
  if (!g.status()) return nullptr;
  return prepared(std::move(b), false);
}

// Records `record` with the context set to `threads` threads, prepares it at the context's
// defaults, and fills every input as prepared() does, i32 ones with class ids. nullptr if
// recording or prepare failed.
inline std::unique_ptr<BenchProgram> threaded(int threads, const std::function<void(Program&, Graph&)>& record) {
  auto b = std::make_unique<BenchProgram>();
  b->ctx.set_threads(threads);
  Graph g(b->p);
  record(b->p, g);
  if (!g.status()) return nullptr;
  return prepared(std::move(b), true);
}

// Seconds per call of f: the best of `reps` timed calls after one warm-up (for the ratio
// counters that compare two variants inside one benchmark).
inline double best_time(const std::function<void()>& f, int reps = 15) {
  f();
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// The thread counts a scaling benchmark runs at: `first` (1 or 2), doubling, and the cores this
// process may use (usable_cpus; at least 2, so that the 2-thread rows exist on any machine).
inline std::vector<int64_t> thread_counts(int64_t first) {
  const int64_t cores = std::max<int64_t>(2, usable_cpus().threads);
  std::vector<int64_t> counts;
  for (int64_t t = first; t < cores; t *= 2) counts.push_back(t);
  counts.push_back(cores);
  return counts;
}

}  // namespace nnasm
