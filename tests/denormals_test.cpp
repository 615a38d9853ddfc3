// The executor flushes denormal floats to zero while it runs (engine/denormals.h), on every
// thread that runs a part, and gives the caller's floating-point mode back afterwards.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "engine/executor.h"
#include "shell/shell.h"
#include "tests/jit_levels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace nnasm {
namespace {

constexpr float DENORMAL = std::numeric_limits<float>::denorm_min() * 1000;  // about 1.4e-42

struct Doubled {
  Context ctx;
  Program p{ctx};
  std::unique_ptr<Executor> ex;
};

// y = x + x over `n` floats, prepared at `isa` with `threads` threads and the given setting;
// x holds DENORMAL everywhere but x[1] = 3.
std::unique_ptr<Doubled> doubled(Isa isa, int n, int threads, bool flush) {
  auto d = std::make_unique<Doubled>();
  d->ctx.set_jit(JitConfig{isa != Isa::REF, isa == Isa::REF ? Isa::AVX512 : isa});
  d->ctx.set_threads(threads);
  d->ctx.set_flush_denormals(flush);
  Graph g(d->p);
  Var x = g.input("x", {n});
  g.output(x + x, "y");
  auto ex = Executor::prepare(d->p);
  EXPECT_TRUE(ex) << ex.status().message();
  if (!ex) return nullptr;
  d->ex = std::move(ex.value());
  float* xs = d->ex->tensor("x")->f32();
  for (int i = 0; i < n; ++i) xs[i] = i == 1 ? 3.f : DENORMAL;
  return d;
}

TEST(Denormals, FlushedWhileRunningUnlessTurnedOff) {
  std::vector<Isa> levels = jit_levels();
  levels.push_back(Isa::REF);
  for (Isa isa : levels) {
    for (bool flush : {true, false}) {
      auto d = doubled(isa, 37, 1, flush);
      ASSERT_TRUE(d);
      d->ex->run();
      const float* y = d->ex->tensor("y")->f32();
      EXPECT_EQ(y[1], 6.f);
      for (int i : {0, 2, 36}) {
        if (flush) EXPECT_EQ(y[i], 0.f) << isa_name(isa) << " element " << i;
        else EXPECT_EQ(y[i], 2 * DENORMAL) << isa_name(isa) << " element " << i;
      }
    }
  }
}

// Big enough to run as parts on the pool's worker too: every part flushes.
TEST(Denormals, EveryPartFlushes) {
  for (Isa isa : jit_levels()) {
    if (isa == Isa::REF) continue;
    const int n = 1 << 20;
    auto d = doubled(isa, n, 2, true);
    ASSERT_TRUE(d);
    ASSERT_GT(d->ex->parts(0), 1) << isa_name(isa);
    d->ex->run();
    const float* y = d->ex->tensor("y")->f32();
    int kept = 0;
    for (int i = 0; i < n; ++i) kept += i != 1 && y[i] != 0.f;
    EXPECT_EQ(kept, 0) << isa_name(isa);
  }
}

// Parts of two executors on one pool, one flushing and one keeping denormals, in turn: each
// part runs in its own executor's mode, whichever thread ran the other's before.
TEST(Denormals, WorkersSwitchBetweenExecutorsSettings) {
  for (Isa isa : jit_levels()) {
    if (isa == Isa::REF) continue;
    const int n = 1 << 20;
    Context ctx;
    ctx.set_jit(JitConfig{true, isa});
    ctx.set_threads(2);
    Program flushing(ctx), keeping(ctx);
    std::unique_ptr<Executor> ex[2];
    for (int k = 0; k < 2; ++k) {
      Program& p = k ? keeping : flushing;
      ctx.set_flush_denormals(k == 0);
      Graph g(p);
      Var x = g.input("x", {n});
      g.output(x + x, "y");
      auto e = Executor::prepare(p);
      ASSERT_TRUE(e) << e.status().message();
      ex[k] = std::move(e.value());
      ASSERT_GT(ex[k]->parts(0), 1) << isa_name(isa);
      float* xs = ex[k]->tensor("x")->f32();
      for (int i = 0; i < n; ++i) xs[i] = DENORMAL;
    }
    for (int round = 0; round < 3; ++round)
      for (int k = 0; k < 2; ++k) {
        ex[k]->run();
        const float* y = ex[k]->tensor("y")->f32();
        int flushed = 0;
        for (int i = 0; i < n; ++i) flushed += y[i] == 0.f;
        EXPECT_EQ(flushed, k == 0 ? n : 0) << isa_name(isa) << " round " << round << (k ? " keeping" : " flushing");
      }
  }
}

#if defined(__x86_64__) || defined(__i386__)
TEST(Denormals, TheCallersModeIsGivenBack) {
  auto d = doubled(jit_levels().back(), 37, 1, true);
  ASSERT_TRUE(d);
  const unsigned before = _mm_getcsr();
  d->ex->run();
  d->ex->train_step();
  while (!d->ex->run_steps(1)) {
  }
  EXPECT_EQ(_mm_getcsr(), before);
  // A caller that flushes already keeps flushing.
  _mm_setcsr(before | 0x8040);
  d->ex->run();
  EXPECT_EQ(_mm_getcsr(), before | 0x8040);
  _mm_setcsr(before);
  volatile float x = DENORMAL;
  EXPECT_EQ(x + x, 2 * DENORMAL);  // the test's own arithmetic keeps denormals
}
#endif

}  // namespace
}  // namespace nnasm
