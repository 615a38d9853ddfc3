// Parallel steps on the engine's own thread pool: the sample MLP (784-256-128-10) forward at
// batch 1 and 64 and its training step at batch 64, the GEMV 1×784·784×256 and square SGEMM
// (256, 512, 1024), each with 1, 2, 4, … threads up to the machine's cores (the benchmark
// argument; 1 and 2 on the 2-core machine docs/benchmarks.md comes from), measured in the same run.
// oneDNN's SGEMM at the same counts is BM_threads_sgemm_onednn (baselines_onednn.cpp). And
// what every parallel step pays on this machine: a job of one empty task per thread on the pool
// (from 2 threads), a cache line's round trip between two threads, and how equal and
// independent the machine's cores are at the time of the run (BM_threads_core_speeds).
#include <benchmark/benchmark.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "engine/optimizer.h"
#include "engine/thread_pool.h"
#include "tests/bench/bench_program.h"

namespace nnasm {
namespace {

void mlp(Program& p, Graph& g, int64_t batch, bool train) {
  Var x = g.input("x", {batch, 784});
  Var labels = g.input("labels", {batch}, DType::I32);
  Var h = relu(linear(relu(linear(x, 256)), 128));
  g.output(softmax_ce(linear(h, 10), labels), "loss");
  if (train) make_trainable(p, p.find("loss"), sgd(0.01, 0.9));
}

void BM_threads_mlp_forward_b1(benchmark::State& st) {
  auto b = threaded(static_cast<int>(st.range(0)), [](Program& p, Graph& g) { mlp(p, g, 1, false); });
  if (!b) return st.SkipWithError("prepare failed");
  for (auto _ : st) b->ex->run();
}
void BM_threads_mlp_forward_b64(benchmark::State& st) {
  auto b = threaded(static_cast<int>(st.range(0)), [](Program& p, Graph& g) { mlp(p, g, 64, false); });
  if (!b) return st.SkipWithError("prepare failed");
  for (auto _ : st) b->ex->run();
  st.SetItemsProcessed(st.iterations() * 64);
}
void BM_threads_mlp_train_b64(benchmark::State& st) {
  auto b = threaded(static_cast<int>(st.range(0)), [](Program& p, Graph& g) { mlp(p, g, 64, true); });
  if (!b) return st.SkipWithError("prepare failed");
  for (auto _ : st) b->ex->train_step();
  st.SetItemsProcessed(st.iterations() * 64);
}
void threads_gemv(benchmark::State& st, int64_t k, int64_t n) {
  auto b = threaded(static_cast<int>(st.range(0)), [k, n](Program&, Graph& g) {
    g.output(matmul(g.input("x", {1, k}), g.input("w", {k, n})), "y");
  });
  if (!b) return st.SkipWithError("prepare failed");
  for (auto _ : st) b->ex->run();
  st.SetBytesProcessed(st.iterations() * k * n * 4);
}
void BM_threads_gemv_1x784x256(benchmark::State& st) { threads_gemv(st, 784, 256); }
// 3 MiB of B: more than one core's L2 holds (on the machines we measure on), less than two;
// 2 threads split it along K, so that each core keeps its rows of B in its own L2.
void BM_threads_gemv_1x1536x512(benchmark::State& st) { threads_gemv(st, 1536, 512); }
void BM_threads_sgemm(benchmark::State& st) {
  const int64_t n = st.range(0);
  auto b = threaded(static_cast<int>(st.range(1)), [n](Program&, Graph& g) {
    g.output(matmul(g.input("a", {n, n}), g.input("b", {n, n})), "c");
  });
  if (!b) return st.SkipWithError("prepare failed");
  for (auto _ : st) b->ex->run();
  st.counters["GFLOPS"] = benchmark::Counter(2.0 * n * n * n * st.iterations(), benchmark::Counter::kIsRate,
                                             benchmark::Counter::kIs1000);
}
// The hand-off of one parallel step with nothing to do: publish, a worker claims its task,
// the caller waits for it. A worker that missed a job gets no wait on the next (the pool runs its
// task on the caller rather than wait), and with empty tasks it may never catch up: the caller
// then runs them all, in tens of nanoseconds, and the time is not a hand-off's. `taken_over` says
// what share of the workers' tasks the caller ran (0 when the time is the hand-off).
void BM_threads_pool_empty_job(benchmark::State& st) {
  const int threads = static_cast<int>(st.range(0));
  ThreadPool pool(threads);
  struct Count {
    std::thread::id caller = std::this_thread::get_id();
    std::atomic<int64_t> taken_over{0};
  } count;
  auto task = [](void* ctx, int t) {
    auto* c = static_cast<Count*>(ctx);
    if (t > 0 && std::this_thread::get_id() == c->caller) c->taken_over.fetch_add(1, std::memory_order_relaxed);
  };
  for (auto _ : st) pool.run(threads, task, &count);
  st.counters["taken_over"] = static_cast<double>(count.taken_over.load()) / (st.iterations() * (threads - 1));
}
// One thread writes a counter, the other answers on a second line: two line transfers.
void BM_threads_cache_line_round_trip(benchmark::State& st) {
  alignas(64) std::atomic<int64_t> ping{0};
  alignas(64) std::atomic<int64_t> pong{0};
  std::thread echo([&] {
    for (int64_t seen = 0;;) {
      const int64_t v = ping.load(std::memory_order_acquire);
      if (v < 0) return;
      if (v != seen) pong.store(seen = v, std::memory_order_release);
    }
  });
  int64_t i = 0;
  for (auto _ : st) {
    ping.store(++i, std::memory_order_release);
    while (pong.load(std::memory_order_acquire) != i) {
    }
  }
  ping.store(-1, std::memory_order_release);
  echo.join();
}
// How equal and independent the cores are now: the same one-thread program (argument 0: the
// MLP's first layer at batch 64, bound by the FMAs; 1: its GEMV at batch 1, bound by L2 reads),
// one instance per core with operands of its own, run on a thread pinned to each core alone and
// then on all of them at once. Nothing is shared and nothing waits on another thread, so on a
// machine that gives each thread a core of its own every ratio is 1. Counters: the fastest core's
// time per run alone (`fastest_us`), the slowest core's alone over it (`slowest_alone`), and the
// slowest core's with all running over it (`slowest_together`). A parallel step runs at the speed
// of its slowest part, so where these exceed 1 the thread rows above cannot scale: on a virtual
// machine, a host that runs other work beside a virtual core (or clocks it lower) shows here.
void BM_threads_core_speeds(benchmark::State& st) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return st.SkipWithError("sched_getaffinity failed");
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  if (cpus.size() < 2) return st.SkipWithError("one core");
  const bool gemv = st.range(0) == 1;
  const int64_t batch = gemv ? 1 : 64, calls = gemv ? 2000 : 60;
  std::vector<std::unique_ptr<BenchProgram>> progs;
  for (size_t i = 0; i < cpus.size(); ++i) {
    progs.push_back(threaded(1, [batch](Program&, Graph& g) {
      g.output(linear(g.input("x", {batch, 784}), 256), "y");
    }));
    if (!progs.back()) return st.SkipWithError("prepare failed");
  }
  const size_t n = cpus.size();
  std::atomic<size_t> ready{0};
  // Runs `calls` runs of core i's program on a thread pinned to it, after `wait_for` threads are
  // ready; adds the seconds per run to *sum.
  auto block = [&](size_t i, size_t wait_for, double* sum) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[i], &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    progs[i]->ex->run();  // on this core's caches
    ready.fetch_add(1);
    while (ready.load() < wait_for) {
    }
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t c = 0; c < calls; ++c) progs[i]->ex->run();
    *sum += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / calls;
  };
  // Each core's mean over the iterations: the ratio of two single blocks would be above 1 on
  // equal cores by this machine's noise alone.
  std::vector<double> alone_sum(n), together_sum(n);
  for (auto _ : st) {
    for (size_t i = 0; i < n; ++i) {
      ready = 0;
      std::thread(block, i, 1, &alone_sum[i]).join();
    }
    ready = 0;
    std::vector<std::thread> all;
    for (size_t i = 0; i < n; ++i) all.emplace_back(block, i, n, &together_sum[i]);
    for (std::thread& t : all) t.join();
  }
  const double fastest = *std::min_element(alone_sum.begin(), alone_sum.end());
  st.counters["fastest_us"] = fastest / static_cast<double>(st.iterations()) * 1e6;
  st.counters["slowest_alone"] = *std::max_element(alone_sum.begin(), alone_sum.end()) / fastest;
  st.counters["slowest_together"] = *std::max_element(together_sum.begin(), together_sum.end()) / fastest;
}

BENCHMARK(BM_threads_core_speeds)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_threads_pool_empty_job)->ArgsProduct({thread_counts(2)})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_threads_cache_line_round_trip)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_threads_mlp_forward_b1)->ArgsProduct({thread_counts(1)})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_threads_mlp_forward_b64)->ArgsProduct({thread_counts(1)})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_threads_mlp_train_b64)->ArgsProduct({thread_counts(1)})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_threads_gemv_1x784x256)->ArgsProduct({thread_counts(1)})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_threads_gemv_1x1536x512)->ArgsProduct({thread_counts(1)})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_threads_sgemm)->ArgsProduct({{256, 512, 1024}, thread_counts(1)})->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace nnasm
