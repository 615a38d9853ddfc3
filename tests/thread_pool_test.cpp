// The thread pool (engine/thread_pool.h) and parallel steps: every task runs exactly once, an idle
// pool sleeps, and programs give bitwise the same results with 1, 2 and 3 threads at every ISA
// level the machine has (more threads than cores included).
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/autodiff.h"
#include "engine/executor.h"
#include "engine/optimizer.h"
#include "engine/thread_pool.h"
#include "shell/shell.h"

namespace nnasm {
namespace {

struct Counts {
  std::vector<std::atomic<int>> hits;
  explicit Counts(int n) : hits(n) {}
};

void count_task(void* ctx, int task) { static_cast<Counts*>(ctx)->hits[task].fetch_add(1); }

TEST(ThreadPool, RunsEveryTaskExactlyOnce) {
  for (int threads : {1, 2, 3, 4, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.threads(), threads);
    for (int n : {0, 1, 2, 3, 5, 8, 17, 100, 1000, ThreadPool::MAX_TASKS}) {
      Counts c(n);
      for (int rep = 0; rep < 3; ++rep) pool.run(n, count_task, &c);
      for (int t = 0; t < n; ++t) ASSERT_EQ(c.hits[t].load(), 3) << "threads " << threads << " tasks " << n << " task " << t;
    }
  }
}

TEST(ThreadPool, ManyBackToBackJobs) {
  ThreadPool pool(3);
  Counts c(7);
  for (int rep = 0; rep < 20000; ++rep) pool.run(1 + rep % 7, count_task, &c);
  int total = 0;
  for (auto& h : c.hits) total += h.load();
  int expect = 0;
  for (int rep = 0; rep < 20000; ++rep) expect += 1 + rep % 7;
  EXPECT_EQ(total, expect);
}

TEST(ThreadPool, ConcurrentCallersEachGetTheirTasksRun) {
  ThreadPool pool(2);
  Counts a(50), b(50);
  std::thread other([&] {
    for (int rep = 0; rep < 500; ++rep) pool.run(50, count_task, &b);
  });
  for (int rep = 0; rep < 500; ++rep) pool.run(50, count_task, &a);
  other.join();
  for (int t = 0; t < 50; ++t) {
    EXPECT_EQ(a.hits[t].load(), 500);
    EXPECT_EQ(b.hits[t].load(), 500);
  }
}

TEST(ThreadPool, IdleWorkersSleepAndWakeForTheNextJob) {
  ThreadPool pool(3);
  Counts c(4);
  pool.run(4, count_task, &c);
  // After their spin both workers go to sleep. How many sleeps that took depends on whether a
  // worker started late and slept once before the first job, so counts below are relative. The
  // deadline only keeps a broken pool from hanging the suite; a slow machine takes longer.
  auto wait_until = [&](const std::function<bool()>& done) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
  };
  // A worker counts itself as sleeping just before it checks for a job it missed, so wait for
  // the count to hold still before taking it as settled.
  uint64_t settled = ~0ull;
  wait_until([&] {
    if (pool.sleeping() != 2) return false;
    const uint64_t before = pool.sleeps();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    settled = pool.sleeps();
    return settled == before && pool.sleeping() == 2;
  });
  ASSERT_EQ(pool.sleeping(), 2);
  // Asleep, they stay asleep: no new sleeps (which would mean a wake and another spin).
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(pool.sleeps(), settled);
  EXPECT_EQ(pool.sleeping(), 2);
  pool.run(4, count_task, &c);
  for (int t = 0; t < 4; ++t) EXPECT_EQ(c.hits[t].load(), 2);
  // The job woke both; each sleeps again after it, once.
  wait_until([&] { return pool.sleeps() >= settled + 2 && pool.sleeping() == 2; });
  EXPECT_EQ(pool.sleeps(), settled + 2);
}

// Workers that sleep after 1 µs miss jobs, wake late and find their tasks taken over by the
// caller: every task still runs exactly once.
TEST(ThreadPool, JobsAcrossSleepsRunEveryTaskOnce) {
  for (int threads : {2, 3, 5}) {
    ThreadPool pool(threads, 1);
    Counts c(9);
    std::vector<int> expect(9, 0);
    for (int rep = 0; rep < 3000; ++rep) {
      const int n = 1 + rep % 9;
      pool.run(n, count_task, &c);
      for (int t = 0; t < n; ++t) ++expect[t];
      if (rep % 100 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rep % 700));
    }
    for (int t = 0; t < 9; ++t) EXPECT_EQ(c.hits[t].load(), expect[t]) << "threads " << threads << " task " << t;
  }
}

// A job of more tasks than threads balances: while one thread is held in the first task of its
// run, the others run the rest of that run. Each held task waits until its run's other tasks
// are done, which only another thread can do (or the held task runs last, on a thread that has
// run them itself); a pool that ran a thread's tasks in order on that thread would hold it until
// the deadline and fail.
TEST(ThreadPool, OthersTakeOverTheRunOfAThreadHeldUp) {
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    constexpr int PER_THREAD = 4;
    const int n = threads * PER_THREAD;
    for (int held = 0; held < threads; ++held) {  // the thread whose first task holds it
      struct Job {
        int held_task = 0;
        std::vector<std::atomic<int>> hits;
        std::atomic<bool> timed_out{false};
        explicit Job(int n) : hits(n) {}
      } job(n);
      job.held_task = held * PER_THREAD;
      auto task = [](void* ctx, int t) {
        auto* j = static_cast<Job*>(ctx);
        if (t == j->held_task) {
          const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
          auto rest_done = [&] {
            for (int u = t + 1; u < t + PER_THREAD; ++u)
              if (j->hits[u].load() == 0) return false;
            return true;
          };
          while (!rest_done())
            if (std::chrono::steady_clock::now() > give_up) {
              j->timed_out = true;
              break;
            } else {
              std::this_thread::yield();
            }
        }
        j->hits[t].fetch_add(1);
      };
      pool.run(n, task, &job);
      EXPECT_FALSE(job.timed_out) << "threads " << threads << ", held " << held;
      for (int t = 0; t < n; ++t) EXPECT_EQ(job.hits[t].load(), 1) << "task " << t;
    }
  }
}

TEST(ThreadPool, OneThreadHasNoWorkers) {
  ThreadPool pool(1);
  Counts c(10);
  pool.run(10, count_task, &c);
  for (auto& h : c.hits) EXPECT_EQ(h.load(), 1);
  EXPECT_EQ(pool.sleeps(), 0u);
}

TEST(ThreadPool, ContextThreadsAreSettable) {
  Context ctx;
  EXPECT_GE(ctx.threads(), 1);
  ctx.set_threads(3);
  EXPECT_EQ(ctx.threads(), 3);
  EXPECT_EQ(ctx.thread_pool()->threads(), 3);
  ctx.set_threads(0);
  EXPECT_EQ(ctx.threads(), 1);
  EXPECT_EQ(ctx.thread_pool()->threads(), 1);
}

// ---- bitwise identity of parallel steps ----

std::vector<Isa> isas() {
  std::vector<Isa> v{Isa::REF};
  if (cpu_info().best >= Isa::AVX2) v.push_back(Isa::AVX2);
  if (cpu_info().best >= Isa::AVX512) v.push_back(Isa::AVX512);
  return v;
}

struct Built {
  Context ctx;
  Program p{ctx};
  std::unique_ptr<Executor> ex;
};

// Records `record` with `threads` threads at `isa`, fills the f32 inputs deterministically, runs
// `steps` times (train steps when `train`), and returns every f32 tensor's bytes in program order.
// *max_parts: the most parts of any step; *max_update_parts: of any optimizer step.
std::vector<std::vector<float>> run_program(const std::function<void(Program&, Graph&)>& record, Isa isa, int threads,
                                            bool train, int* max_parts, int* max_update_parts,
                                            bool stream = true) {
  Built b;
  JitConfig cfg{isa != Isa::REF, isa == Isa::REF ? Isa::AVX512 : isa};
  cfg.stream = stream;
  b.ctx.set_jit(cfg);
  b.ctx.set_threads(threads);
  {
    Graph g(b.p);
    record(b.p, g);
    EXPECT_TRUE(g.status()) << g.status().message();
  }
  auto ex = Executor::prepare(b.p);
  EXPECT_TRUE(ex) << ex.status().message();
  if (!ex) return {};
  b.ex = std::move(ex.value());
  EXPECT_EQ(b.ex->streamed(), cfg.enabled && stream);
  for (TensorId id : b.p.inputs()) {
    Tensor& t = b.ctx.at(id);
    if (t.desc.type.dtype == DType::F32)
      for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = static_cast<float>((i * 7919) % 255) / 127.f - 1.f;
    else
      for (int64_t i = 0; i < t.numel(); ++i) t.i32()[i] = static_cast<int32_t>(i % 10);
  }
  *max_parts = *max_update_parts = 1;
  const Program& run = b.ex->program();  // optimized: its steps are what ran
  for (size_t i = 0; i < run.code().size(); ++i) {
    *max_parts = std::max(*max_parts, b.ex->parts(i));
    if (run.code()[i].info().category == OpCategory::OPTIMIZER)
      *max_update_parts = std::max(*max_update_parts, b.ex->parts(i));
  }
  for (int s = 0; s < 2; ++s) train ? b.ex->train_step() : b.ex->run();
  std::vector<std::vector<float>> out;
  for (TensorId id : run.tensors()) {
    const Tensor& t = *b.ex->tensor(run.desc(id).name);  // a planned temporary: the executor's record
    if (t.desc.type.dtype == DType::F32) out.emplace_back(t.f32(), t.f32() + t.numel());
  }
  return out;
}

// `split_updates`: also require some optimizer step to be split (JIT, threads > 1).
void expect_same_for_any_threads(const std::function<void(Program&, Graph&)>& record, bool train,
                                 bool split_updates = false, std::initializer_list<int> counts = {2, 3}) {
  for (Isa isa : isas()) {
    int parts1 = 0, parts = 0, update1 = 0, update = 0;
    const auto one = run_program(record, isa, 1, train, &parts1, &update1);
    EXPECT_EQ(parts1, 1);
    for (int threads : counts) {
      const auto many = run_program(record, isa, threads, train, &parts, &update);
      if (isa != Isa::REF) {
        EXPECT_GT(parts, 1) << "no step was split at " << isa_name(isa);
        if (split_updates) {
          EXPECT_GT(update, 1) << "no update step was split at " << isa_name(isa);
        }
      }
      ASSERT_EQ(one.size(), many.size());
      for (size_t k = 0; k < one.size(); ++k)
        ASSERT_EQ(0, std::memcmp(one[k].data(), many[k].data(), one[k].size() * sizeof(float)))
            << "tensor " << k << " differs at " << isa_name(isa) << " with " << threads << " threads";
    }
  }
}

void mlp(Program& p, Graph& g, int64_t batch, bool train, const OptimizerSpec& opt = sgd(0.01, 0.9)) {
  Var x = g.input("x", {batch, 784});
  Var labels = g.input("labels", {batch}, DType::I32);
  Var h = relu(linear(relu(linear(x, 256)), 128));
  g.output(softmax_ce(linear(h, 10), labels), "loss");
  if (train) {
    ASSERT_TRUE(make_trainable(p, p.find("loss"), opt));
  }
}

// Also at 4 and 8 threads (more parts than this 2-core machine has cores): the split choices of
// a many-core host.
TEST(ParallelSteps, MlpForwardBatch1IsBitwiseTheSame) {
  expect_same_for_any_threads([](Program& p, Graph& g) { mlp(p, g, 1, false); }, false, false, {2, 3, 4, 8});
}

// From 4 parts, a product whose B is packed (here Bᵀ) splits as a grid of row blocks and
// column slices (jit/gemm_plan.cpp): the same bits as one thread's, with the ReLU fused.
TEST(ParallelSteps, GridSplitProductIsBitwiseTheSame) {
  expect_same_for_any_threads(
      [](Program&, Graph& g) {
        g.output(relu(matmul(g.input("a", {256, 96}), g.input("b", {192, 96}), false, true)), "c");
      },
      false, false, {2, 3, 4, 8});
}

// Inference at batch 64: the first layer's column split runs as more slices than threads, which
// the pool balances (jit/gemm_plan.cpp, SLICES_PER_THREAD): whichever thread runs a
// slice, the same bits as one thread's.
TEST(ParallelSteps, MlpForwardBatch64SlicesAreBitwiseTheSame) {
  auto record = [](Program& p, Graph& g) { mlp(p, g, 64, false); };
  expect_same_for_any_threads(record, false, false, {2, 3, 4, 8});
  if (cpu_info().best < Isa::AVX2) GTEST_SKIP() << "no JIT level";
  int parts = 0, update = 0;
  run_program(record, Isa::AVX2, 2, false, &parts, &update);
  EXPECT_GT(parts, 2) << "the first layer in slices on 2 threads";
}

// Also at 4 and 8 threads, as the batch-1 forward.
TEST(ParallelSteps, MlpTrainingBatch64IsBitwiseTheSame) {
  expect_same_for_any_threads([](Program& p, Graph& g) { mlp(p, g, 64, true); }, true, false, {2, 3, 4, 8});
}

// The 784→256 weight (200,704 elements) is big enough for its update to be split.
TEST(ParallelSteps, MlpTrainingUpdatesAreSplitAndBitwiseTheSame) {
  const OptimizerSpec opts[] = {sgd(0.01, 0.9), sgd(0.01, 0.9, true, 1e-4), adam(1e-3), adam(1e-3, 1e-4),
                                adamw(1e-3), rmsprop(1e-2)};
  for (const OptimizerSpec& opt : opts) {
    SCOPED_TRACE(&opt - opts);
    expect_same_for_any_threads([&opt](Program& p, Graph& g) { mlp(p, g, 64, true, opt); }, true, true);
  }
}

// The generated dispatch stream calls the same kernels as the interpreter loop, parallel steps
// included: every tensor after two training steps is bitwise the same either way.
// An optimizer step's threshold is the memory it touches: the 256→128 weight's SGD with momentum
// (32,768 elements, five arrays of them read or written) splits on 2 threads, in the same halves
// as the weight gradient's parts (split by rows), so each core updates the rows it computed.
TEST(ParallelSteps, OptimizerStepsSplitByTheMemoryTheyTouch) {
  Built b;
  const bool jit = b.ctx.jit().enabled && b.ctx.jit().isa() != Isa::REF;  // parts are generated kernels
  b.ctx.set_threads(2);
  {
    Graph g(b.p);
    mlp(b.p, g, 64, true);
  }
  auto ex = Executor::prepare(b.p);
  ASSERT_TRUE(ex) << ex.status().message();
  const Program& run = ex.value()->program();
  int checked = 0;
  for (size_t i = 0; i < run.code().size(); ++i) {
    const Instruction& ins = run.code()[i];
    if (ins.info().category != OpCategory::OPTIMIZER || run.desc(ins.in[0]).type.shape.numel() != 256 * 128) continue;
    EXPECT_EQ(ex.value()->parts(i), jit ? 2 : 1) << ex.value()->kernel_name(i);
    ++checked;
  }
  EXPECT_EQ(checked, 1);
}

TEST(ParallelSteps, DispatchStreamMatchesTheLoop) {
  for (Isa isa : isas()) {
    if (isa == Isa::REF) continue;
    int parts = 0, update = 0;
    auto record = [](Program& p, Graph& g) { mlp(p, g, 64, true); };
    const auto streamed = run_program(record, isa, 2, true, &parts, &update, true);
    EXPECT_GT(parts, 1);
    const auto looped = run_program(record, isa, 2, true, &parts, &update, false);
    ASSERT_EQ(streamed.size(), looped.size());
    for (size_t k = 0; k < streamed.size(); ++k)
      ASSERT_EQ(0, std::memcmp(streamed[k].data(), looped[k].data(), streamed[k].size() * sizeof(float)))
          << "tensor " << k << " differs at " << isa_name(isa);
  }
}

// Convolutions split their images into parts (forward and data gradient); the weight gradient
// sums over the images in one part. A small CNN's training steps are bitwise the same.
TEST(ParallelSteps, ConvTrainingIsBitwiseTheSame) {
  expect_same_for_any_threads(
      [](Program& p, Graph& g) {
        Var x = g.input("x", {8, 8, 12, 12});
        Var labels = g.input("labels", {8}, DType::I32);
        Conv2dOptions o;
        o.pad = {1, 1};
        o.act = Activation::RELU;
        Var c1 = conv2d(x, 16, {3, 3}, o);
        o.stride = {2, 2};
        Var c2 = conv2d(c1, 8, {3, 3}, o);
        g.output(softmax_ce(linear(reshape(c2, {8, 8 * 6 * 6}), 10), labels), "loss");
        ASSERT_TRUE(make_trainable(p, p.find("loss"), sgd(0.01, 0.9)));
      },
      true);
}

// One image (batch-1 inference) splits its output channels instead, 8 or more a part: 27 channels
// make 2 and 3 parts of uneven size, each with its own channel blocking and tail.
TEST(ParallelSteps, SingleImageConvSplitsItsChannels) {
  expect_same_for_any_threads(
      [](Program&, Graph& g) {
        Conv2dOptions o;
        o.pad = {1, 1};
        o.act = Activation::RELU;
        g.output(conv2d(g.input("x", {1, 16, 37, 29}), 27, {3, 3}, o), "y");
        // The direct kernel's flat mode: a small map of many channels, a 1×1 on 7×7 (AVX-512).
        g.output(conv2d(g.input("s", {1, 96, 7, 7}), 45, {3, 3}, o), "small");
        g.output(conv2d(g.input("p7", {1, 160, 7, 7}), 37, {1, 1}), "pointwise_7x7");
        // im2col + GEMM, its rows split: a 1×1, a stride 2.
        g.output(conv2d(g.input("p", {1, 384, 9, 11}), 37, {1, 1}), "pointwise");
        Conv2dOptions o2 = o;
        o2.stride = {2, 2};
        g.output(conv2d(g.input("s2", {1, 48, 30, 27}), 24, {3, 3}, o2), "stride2");
        o.groups = 96;  // depthwise, at strides 1 and 2
        g.output(conv2d(g.input("d", {1, 96, 48, 45}), 96, {3, 3}, o), "dw");
        o.stride = {2, 2};
        g.output(conv2d(g.input("d2", {1, 96, 47, 45}), 96, {3, 3}, o), "dw_stride2");
      },
      false);
}

TEST(ParallelSteps, BigGemmsAreBitwiseTheSame) {
  expect_same_for_any_threads(
      [](Program&, Graph& g) {
        Var a = g.input("a", {300, 700});
        Var b = g.input("b", {700, 333});
        Var bt = g.input("bt", {333, 700});
        Var v = g.input("v", {3, 700});
        g.output(matmul(a, b), "ab");                   // packed, an N tail
        g.output(matmul(a, bt, false, true), "abt");    // packed, Bᵀ
        g.output(matmul(v, b), "vb");                   // gemv in K segments: a column split
        g.output(matmul(g.input("w", {2, 5000}), g.input("bn", {5000, 16})), "narrow");  // one vector wide: a K split
        g.output(matmul(a, a, true, false), "ata");     // packed, Aᵀ, 700 columns
      },
      false);
}

// In training, a layer whose weights the update changes splits along K (Executor::choose_kernel):
// odd sizes with tails, 3 K blocks (601 = 3 × 201 − 2) for 2 and 3 parts, bias and ReLU applied
// by the part that finishes last; bitwise as one thread.
TEST(ParallelSteps, TrainedLayersSplitAlongKBitwiseTheSame) {
  expect_same_for_any_threads(
      [](Program& p, Graph& g) {
        Var x = g.input("x", {37, 601});
        Var labels = g.input("labels", {37}, DType::I32);
        g.output(softmax_ce(linear(relu(linear(x, 45)), 10), labels), "loss");
        ASSERT_TRUE(make_trainable(p, p.find("loss"), sgd(0.01, 0.9)));
      },
      true);
}

// The batch-1 MLP: the first layer splits its columns, and the second runs in the same parallel
// job, split along K, each part on the slice of the first layer's output that it has just
// written (Executor::join), at 2, 4 and 8 threads (the second layer's 8 K segments divide evenly).
// Bitwise as one thread, also at 3 threads (3 column slices, which 8 segments cannot match: no
// join there); an instance and run_steps run the joined steps too.
TEST(ParallelSteps, Batch1LayersShareOneJob) {
  auto mlp = [](Program&, Graph& g) {
    g.output(softmax(linear(relu(linear(relu(linear(g.input("x", {1, 784}), 256)), 128)), 10)), "y");
  };
  expect_same_for_any_threads(mlp, false, false, {2, 3, 4, 8});
  for (Isa isa : isas()) {
    if (isa == Isa::REF) continue;
    for (int threads : {4, 8}) {
      Built b;
      b.ctx.set_jit(JitConfig{true, isa});
      b.ctx.set_threads(threads);
      Graph g(b.p);
      mlp(b.p, g);
      auto ex = Executor::prepare(b.p);
      ASSERT_TRUE(ex) << ex.status().message();
      EXPECT_EQ(ex.value()->parts(0), threads) << isa_name(isa);
      EXPECT_EQ(ex.value()->parts(1), 0) << isa_name(isa) << ", " << threads << " threads: no join";
    }
    Built b;
    b.ctx.set_jit(JitConfig{true, isa});
    b.ctx.set_threads(2);
    Graph g(b.p);
    mlp(b.p, g);
    auto ex = Executor::prepare(b.p);
    ASSERT_TRUE(ex) << ex.status().message();
    Executor& e = *ex.value();
    EXPECT_EQ(e.parts(0), 2) << isa_name(isa);
    EXPECT_EQ(e.parts(1), 0) << isa_name(isa) << ": the second layer did not join the first's job";
    EXPECT_EQ(e.parts(2), 1) << isa_name(isa);
    Tensor* x = e.tensor("x");
    for (int64_t i = 0; i < x->numel(); ++i) x->f32()[i] = static_cast<float>(i % 13) / 6.f - 1.f;
    e.run();
    const std::vector<float> want(e.tensor("y")->f32(), e.tensor("y")->f32() + 10);
    auto inst = e.instantiate();
    ASSERT_TRUE(inst) << inst.status().message();
    std::memcpy(inst.value()->data(b.p.find("x")), x->f32(), 784 * sizeof(float));
    inst.value()->run();
    EXPECT_EQ(0, std::memcmp(want.data(), inst.value()->data(b.p.find("y")), 10 * sizeof(float))) << isa_name(isa);
    std::fill(e.tensor("y")->f32(), e.tensor("y")->f32() + 10, 0.f);
    while (!e.run_steps(1)) {
    }
    EXPECT_EQ(0, std::memcmp(want.data(), e.tensor("y")->f32(), 10 * sizeof(float))) << isa_name(isa);
  }
}

// run_timed with part times (nnasm bench --profile): the batch-1 MLP's joined job at 2 threads
// computes what run() does, and each of its 2 parts gets its start (≥ 0) and a running time; the
// steps that run whole, and the step joined to the job, get none. An instance times alike.
TEST(ParallelSteps, RunTimedTimesEachPartOfAJob) {
  for (Isa isa : isas()) {
    if (isa == Isa::REF) continue;
    SCOPED_TRACE(isa_name(isa));
    Built b;
    b.ctx.set_jit(JitConfig{true, isa});
    b.ctx.set_threads(2);
    Graph g(b.p);
    g.output(softmax(linear(relu(linear(relu(linear(g.input("x", {1, 784}), 256)), 128)), 10)), "y");
    auto ex = Executor::prepare(b.p);
    ASSERT_TRUE(ex) << ex.status().message();
    auto inst = ex.value()->instantiate();
    ASSERT_TRUE(inst) << inst.status().message();
    for (Executor* e : {ex.value().get(), inst.value().get()}) {
      ASSERT_EQ(e->parts(0), 2);
      ASSERT_EQ(e->max_parts(), 2);
      float* x = static_cast<float*>(e->data(b.p.find("x")));
      for (int64_t i = 0; i < 784; ++i) x[i] = static_cast<float>(i % 11) / 5.f - 1.f;
      e->run();
      const float* y = static_cast<const float*>(e->data(b.p.find("y")));
      const std::vector<float> want(y, y + 10);
      const size_t n = e->program().code().size();
      std::vector<double> seconds(n, 0.0);
      std::vector<Executor::PartTime> parts(n * 2);
      for (int run = 0; run < 3; ++run) e->run_timed(Section::FORWARD, seconds.data(), parts.data());
      EXPECT_EQ(0, std::memcmp(want.data(), y, sizeof(float) * 10));
      for (int t = 0; t < 2; ++t) {
        EXPECT_GT(parts[t].busy, 0.0) << "part " << t;
        EXPECT_GE(parts[t].start, 0.0) << "part " << t;
        EXPECT_LE(parts[t].start + parts[t].busy, seconds[0] * (1 + 1e-9)) << "part " << t << " within its step";
      }
      for (size_t i = 2; i < parts.size(); ++i) {
        EXPECT_EQ(parts[i].busy, 0.0) << "step " << i / 2 << " part " << i % 2;
        EXPECT_EQ(parts[i].start, 0.0) << "step " << i / 2 << " part " << i % 2;
      }
    }
  }
}

TEST(ParallelSteps, BigElementwiseOpsAreBitwiseTheSame) {
  expect_same_for_any_threads(
      [](Program&, Graph& g) {
        Var x = g.input("x", {257, 1001});
        Var y = g.input("y", {257, 1001});
        Var row = g.input("row", {1001});
        Var col = g.input("col", {257, 1});
        Var flat = g.input("flat", {200003});
        g.output(tanh(x) + y * row - col, "e");
        g.output(maximum(x, y) / (abs(y) + fill(y, 1)), "m");
        g.output(gelu(sigmoid(flat)) * 2.f, "f");
      },
      false);
}

// A training dropout big enough to split: each part draws from its own first element, so the
// masks (and the redrawn backward mask) are the same for any split.
TEST(ParallelSteps, DropoutIsBitwiseTheSame) {
  expect_same_for_any_threads(
      [](Program& p, Graph& g) {
        Var x = g.input("x", {300, 1001});
        Var y = dropout(x, 0.4f);
        g.output(y, "y");
        g.output(dropout(g.input("flat", {200003}), 0.7f), "f");
        p.set_training(true);
        Var s = reduce_sum(reshape(y, {300 * 1001}), 0);
        g.output(s, "s");
        ASSERT_TRUE(grad(p, s.id(), {x.id()}));
      },
      true);
}

}  // namespace
}  // namespace nnasm
