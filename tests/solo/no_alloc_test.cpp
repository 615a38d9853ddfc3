// `run` must not touch the allocator: counted with a replaced global operator new and replaced C
// allocation functions (glibc's malloc family, which Eigen and C code use), which is why this test
// has a process of its own.
#include <atomic>
#include <cstdlib>
#include <vector>
#include <new>

#include <gtest/gtest.h>

#include "api/nnasm.h"
#include "engine/optimizer.h"
#include "tests/test_programs.h"

namespace {
std::atomic<bool> counting{false};
std::atomic<long> allocations{0};
}  // namespace

// Sanitizers own the allocator (their malloc must pair with their free), so under them nothing is
// replaced and the counting tests skip; the ordinary build runs them.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define NNASM_COUNT_ALLOCATIONS 0
#else
#define NNASM_COUNT_ALLOCATIONS 1

extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);

void* malloc(std::size_t n) {
  if (counting) ++allocations;
  return __libc_malloc(n);
}
void* calloc(std::size_t n, std::size_t m) {
  if (counting) ++allocations;
  return __libc_calloc(n, m);
}
void* realloc(void* p, std::size_t n) {
  if (counting) ++allocations;
  return __libc_realloc(p, n);
}
void* aligned_alloc(std::size_t a, std::size_t n) {
  if (counting) ++allocations;
  return __libc_memalign(a, n);
}
int posix_memalign(void** out, std::size_t a, std::size_t n) {
  if (counting) ++allocations;
  *out = __libc_memalign(a, n);
  return *out ? 0 : 12;  // ENOMEM
}
}

void* operator new(std::size_t n) {
  if (counting) ++allocations;
  if (void* p = __libc_malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#endif

namespace nnasm {

#define SKIP_UNLESS_COUNTING() \
  if (!NNASM_COUNT_ALLOCATIONS) GTEST_SKIP() << "allocation counting is off under sanitizers"

// How many allocations `f` makes.
template <typename F>
long allocations_in(F&& f) {
  allocations = 0;
  counting = true;
  f();
  counting = false;
  return allocations.load();
}

TEST(NoAlloc, CounterSeesAllocations) {
  SKIP_UNLESS_COUNTING();
  allocations = 0;
  counting = true;
  auto* p = new std::vector<int>(100);
  counting = false;
  delete p;
  EXPECT_GE(allocations.load(), 1);
  allocations = 0;
  counting = true;
  void* volatile q = std::malloc(64);
  counting = false;
  std::free(q);
  EXPECT_EQ(allocations.load(), 1);
}

TEST(NoAlloc, RunOfEveryOpAllocatesNothing) {
  SKIP_UNLESS_COUNTING();
  Context ctx;
  Program p(ctx);
  Graph g(p);
  record_every_op(g);
  ASSERT_TRUE(g.status()) << g.status().message();
  auto ex = Executor::prepare(p);
  ASSERT_TRUE(ex) << ex.status().message();
  for (int i = 0; i < 15; ++i) ex.value()->tensor("a")->f32()[i] = 0.1f * static_cast<float>(i) - 0.7f;
  for (int i = 0; i < 5; ++i) ex.value()->tensor("b")->f32()[i] = 0.3f * static_cast<float>(i) - 0.5f;
  EXPECT_EQ(allocations_in([&] { for (int i = 0; i < 3; ++i) ex.value()->run(); }), 0);
  EXPECT_TRUE(std::isfinite(ex.value()->tensor("y")->f32()[0]));
}

// Batch normalization and dropout in a training step (batch statistics, running-statistic
// updates, the mask drawn twice) and in inference.
TEST(NoAlloc, BatchNormAndDropoutTrainingStepAllocatesNothing) {
  SKIP_UNLESS_COUNTING();
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {4, 2, 5, 5});
  Var labels = g.input("labels", {4}, DType::I32);
  Var h = dropout(relu(batchnorm2d(conv2d(x, 3, {3, 3}))), 0.5f);
  g.output(softmax_ce(linear(reshape(h, {4, 27}), 2), labels), "loss");
  ASSERT_TRUE(g.status()) << g.status().message();
  p.set_training(true);
  ASSERT_TRUE(make_trainable(p, p.find("loss"), sgd(0.1)));
  auto ex = Executor::prepare(p);
  ASSERT_TRUE(ex) << ex.status().message();
  for (int64_t i = 0; i < 200; ++i) ex.value()->tensor("x")->f32()[i] = 0.01f * static_cast<float>(i % 17) - 0.05f;
  EXPECT_EQ(allocations_in([&] {
              for (int i = 0; i < 3; ++i) ex.value()->train_step();
              ex.value()->set_training(false);
              ex.value()->run();
            }),
            0);
  EXPECT_TRUE(std::isfinite(ex.value()->tensor("loss")->f32()[0]));
}

// The recurrent layers' training steps (LSTM_BWD, GRU_BWD, RNN_BWD: their products and cells run
// on scratch), generated and reference, with peepholes and initial states, a bidirectional
// batch-first GRU, and an RNN with lengths.
TEST(NoAlloc, RecurrentTrainingStepsAllocateNothing) {
  SKIP_UNLESS_COUNTING();
  for (bool jit : {true, false}) {
    for (Opcode op : {Opcode::LSTM, Opcode::GRU, Opcode::RNN}) {
      SCOPED_TRACE(op_info(op).mnemonic);
      Context ctx;
      if (!jit) ctx.set_jit(JitConfig{false, Isa::REF});
      Program p(ctx);
      Graph g(p);
      const int64_t G = op == Opcode::LSTM ? 4 : op == Opcode::GRU ? 3 : 1, D = op == Opcode::GRU ? 2 : 1;
      Var x = g.input("x", op == Opcode::GRU ? Shape{4, 5, 3} : Shape{5, 4, 3});  // N = 4
      Var labels = g.input("labels", {4}, DType::I32);
      std::vector<Var> in{x, g.param("w", {D, G * 6, 3}, {InitKind::UNIFORM, -0.3, 0.3}),
                          g.param("r", {D, G * 6, 6}, {InitKind::UNIFORM, -0.3, 0.3}), g.param("b", {D, 2 * G * 6})};
      std::vector<std::pair<std::string, Imm>> imms;
      if (op == Opcode::LSTM) {
        in.push_back(g.input("h0", {1, 4, 6}));
        in.push_back(g.input("c0", {1, 4, 6}));
        in.push_back(g.param("p", {1, 18}));
        imms = {{"initial", imm_i(1)}, {"peephole", imm_i(1)}};
      } else if (op == Opcode::GRU) {
        imms = {{"direction", imm_i(2)}, {"batch_first", imm_i(1)}, {"linear_before_reset", imm_i(1)}};
      } else {
        in.push_back(g.input("lens", {4}, DType::I32));
        imms = {{"lens", imm_i(1)}};
      }
      g.record(op, in, imms, Loc::here());
      ASSERT_TRUE(g.status()) << g.status().message();
      Var last(&g, p.code().back().out[1]);
      g.output(softmax_ce(linear(reshape(last, {4, D * 6}), 2), labels), "loss");
      ASSERT_TRUE(g.status()) << g.status().message();
      ASSERT_TRUE(make_trainable(p, p.find("loss"), adam(0.01)));
      auto ex = Executor::prepare(p);
      ASSERT_TRUE(ex) << ex.status().message();
      for (int64_t i = 0; i < 60; ++i) ex.value()->tensor("x")->f32()[i] = 0.03f * static_cast<float>(i % 11) - 0.1f;
      EXPECT_EQ(allocations_in([&] { for (int i = 0; i < 3; ++i) ex.value()->train_step(); }), 0);
      EXPECT_TRUE(std::isfinite(ex.value()->tensor("loss")->f32()[0]));
    }
  }
}

TEST(NoAlloc, ReferenceCalcAllocatesNothing) {
  SKIP_UNLESS_COUNTING();
  // CALC's reference kernel parses its expression at every run, into its scratch memory; here
  // with broadcast inputs (gathered), a one-element input and constants.
  Context ctx;
  ctx.set_jit(JitConfig{false, Isa::REF});
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {3, 300}), row = g.input("row", {300}), col = g.input("col", {3, 1}), s = g.input("s", {});
  g.output(calc({x, row, col, s}, "add(exp(sub(%0,%2)),mul(gelu(%1,approx=tanh),add(%3,-1.5e-1)),beta=0.5)"), "y");
  ASSERT_TRUE(g.status()) << g.status().message();
  auto ex = Executor::prepare(p);
  ASSERT_TRUE(ex) << ex.status().message();
  EXPECT_EQ(std::string(ex.value()->kernel_name(0)), "ref");
  EXPECT_EQ(allocations_in([&] { for (int i = 0; i < 3; ++i) ex.value()->run(); }), 0);
  EXPECT_TRUE(std::isfinite(ex.value()->tensor("y")->f32()[0]));
}

TEST(NoAlloc, PoolingAndItsGradientsAllocateNothing) {
  SKIP_UNLESS_COUNTING();
  // Both pooling ops and both backward ops (a padded, overlapping average among them) in a
  // training step.
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {4, 1, 12, 12});
  Var labels = g.input("labels", {4}, DType::I32);
  Conv2dOptions o;
  o.act = Activation::RELU;
  Var h = avg_pool2d(max_pool2d(conv2d(x, 3, {3, 3}, o), {2, 2}), {3, 3}, {2, 2}, {1, 1}, false);  // [4,3,3,3]
  g.output(softmax_ce(linear(reshape(h, {4, 27}), 5), labels), "loss");
  ASSERT_TRUE(g.status()) << g.status().message();
  ASSERT_TRUE(make_trainable(p, p.find("loss"), sgd(0.01)));
  auto ex = Executor::prepare(p);
  ASSERT_TRUE(ex) << ex.status().message();
  for (int i = 0; i < 4 * 144; ++i) ex.value()->tensor("x")->f32()[i] = 0.01f * static_cast<float>(i % 97);
  for (int i = 0; i < 4; ++i) ex.value()->tensor("labels")->i32()[i] = i;
  ex.value()->train_step();
  EXPECT_EQ(allocations_in([&] { for (int i = 0; i < 3; ++i) ex.value()->train_step(); }), 0);
  EXPECT_TRUE(std::isfinite(ex.value()->tensor("loss")->f32()[0]));
}

TEST(NoAlloc, LargeGemmsUseThePreparedScratch) {
  SKIP_UNLESS_COUNTING();
  // Big enough that Eigen would take its packing blocks from malloc if we did not hand them over.
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {64, 784});
  Var h = relu(linear(x, 512));
  Var t = matmul(h, h, true, false);           // [512,512], K = 64
  Var u = matmul(x, g.param("v", {300, 784}), false, true);  // [64,300], transB
  g.output(softmax(linear(h, 10)), "y");
  g.output(reduce_sum(t, -1), "ts");
  g.output(u, "u");
  ASSERT_TRUE(g.status()) << g.status().message();
  auto ex = Executor::prepare(p);
  ASSERT_TRUE(ex) << ex.status().message();
  EXPECT_EQ(allocations_in([&] { ex.value()->run(); }), 0);
}

TEST(NoAlloc, ThreadedRunAllocatesNothing) {
  SKIP_UNLESS_COUNTING();
  // Parallel steps (GEMV and GEMM slices, big elementwise ops) on a pool of 3 threads: neither
  // the caller nor the workers may allocate in a run.
  Context ctx;
  ctx.set_threads(3);
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {64, 784});
  Var labels = g.input("labels", {64}, DType::I32);
  Var h = relu(linear(relu(linear(x, 256)), 128));
  g.output(softmax_ce(linear(h, 10), labels), "loss");
  g.output(tanh(matmul(x, transpose(x, {1, 0}))) * 2.f, "big");
  ASSERT_TRUE(g.status()) << g.status().message();
  ASSERT_TRUE(make_trainable(p, p.find("loss"), sgd(0.01, 0.9)));
  auto ex = Executor::prepare(p);
  ASSERT_TRUE(ex) << ex.status().message();
  int max_parts = 1;
  for (size_t i = 0; i < p.code().size(); ++i) max_parts = std::max(max_parts, ex.value()->parts(i));
  if (ctx.jit().isa() != Isa::REF) {
    EXPECT_GT(max_parts, 1);
  }
  for (int i = 0; i < 64; ++i) ex.value()->tensor("labels")->i32()[i] = i % 10;
  ex.value()->train_step();  // the pool's threads are warm
  EXPECT_EQ(allocations_in([&] { for (int i = 0; i < 5; ++i) ex.value()->train_step(); }), 0);
}

// A recurrent layer stepped once per frame (its h and c carried in state, ASSIGN writing them
// back) and its reset, on an instance as a game runs one per character.
TEST(NoAlloc, SteppedLstmFramesAndResetAllocateNothing) {
  SKIP_UNLESS_COUNTING();
  Context ctx;
  Program p(ctx);
  Graph g(p);
  RecurrentOptions o;
  o.step = true;
  o.layers = 2;
  g.output(linear(lstm(g.input("obs", {1, 12}), 24, o).y, 4), "act");
  ASSERT_TRUE(g.status()) << g.status().message();
  auto ex = Executor::prepare(p);
  ASSERT_TRUE(ex) << ex.status().message();
  auto in = ex.value()->instantiate();
  ASSERT_TRUE(in) << in.status().message();
  float* obs = static_cast<float*>(in.value()->data(in.value()->program().find("obs")));
  in.value()->run();
  EXPECT_EQ(allocations_in([&] {
              for (int frame = 0; frame < 10; ++frame) {
                obs[frame] = 0.1f * static_cast<float>(frame);
                in.value()->run();
                if (frame == 5) in.value()->reset_state();
              }
              ex.value()->reset_state();
            }),
            0);
}

// The C API's per-frame calls, as a game makes them: through an instance created beforehand.
TEST(NoAlloc, CApiFrameCallsAllocateNothing) {
  SKIP_UNLESS_COUNTING();
  const char listing[] =
      "input %obs : f32[1,32]\nparam @w1 : f32[32,64] init=he_normal\nparam @b1 : f32[64] init=zeros\n"
      "param @w2 : f32[64,8] init=he_normal\nparam @b2 : f32[8] init=zeros\noutput %act\n\nforward:\n"
      "  LINEAR %obs, @w1, @b1 -> %h  act=relu\n  LINEAR %h, @w2, @b2 -> %z\n  SOFTMAX %z -> %act  axis=-1\n";
  nnasm_model* m = nullptr;
  ASSERT_EQ(nnasm_model_load_memory(listing, sizeof listing - 1, nullptr, &m), NNASM_OK) << nnasm_last_error();
  nnasm_instance* in = nullptr;
  ASSERT_EQ(nnasm_instance_create(m, &in), NNASM_OK);
  float obs[32] = {0.5f}, act[8];
  int done = 0;
  EXPECT_EQ(allocations_in([&] {
              for (int frame = 0; frame < 10; ++frame) {
                obs[frame] = 0.1f * static_cast<float>(frame);
                nnasm_instance_set_input(in, "obs", obs, sizeof obs);
                nnasm_instance_run(in);
                nnasm_instance_get_output(in, "act", act, sizeof act);
                while (!done) nnasm_instance_run_steps(in, 1, &done);
                done = 0;
                nnasm_instance_reset_state(in);
              }
            }),
            0);
  EXPECT_TRUE(std::isfinite(act[0]));
  nnasm_instance_free(in);
  nnasm_model_free(m);
}

}  // namespace nnasm
