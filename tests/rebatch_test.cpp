// with_batch and prepare(program, {.batch = N}): programs recorded at batch 64 run at other
// batches row for row, and programs whose batch cannot change say why.
#include <cmath>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "engine/executor.h"
#include "engine/optimizer.h"
#include "engine/rebatch.h"
#include "shell/shell.h"

namespace nnasm {
namespace {

constexpr int64_t B = 64;

void record_mlp(Graph& g) {
  Var x = g.input("x", {B, 20});
  Var h = linear(x, 32, {.name = "l1", .act = Activation::RELU});
  g.output(softmax(linear(h, 10, {.name = "l2"})), "y");
}

// conv → pool → flatten reshape → linear → softmax; `lead` is the reshape's leading entry.
void record_cnn(Graph& g, int64_t lead) {
  Var x = g.input("x", {B, 3, 8, 8});
  Var c = conv2d(x, 4, {3, 3}, {.name = "c", .pad = {1, 1}, .act = Activation::RELU});
  Var f = reshape(max_pool2d(c, {2, 2}), {lead, 64});
  g.output(softmax(linear(f, 10, {.name = "fc"})), "y");
}

// Runs `p` at batch 64 on random rows, then at each batch n on rows [r, r + n), and expects
// every row of y to be the batch-64 program's row: bit for bit with the reference kernels, which
// sum along K in one order for any number of rows; within a few ulp with generated ones, whose
// GEMM picks its kernel shape and K blocking by the number of rows.
void expect_rows_match(Program& p) {
  ASSERT_TRUE(p.finish()) << p.finish().message();
  auto full = Executor::prepare(p);
  ASSERT_TRUE(full) << full.status().message();
  Tensor* x = (*full)->tensor("x");
  const int64_t row = x->desc.type.shape.numel() / B, out_row = (*full)->tensor("y")->numel() / B;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = 0; i < x->numel(); ++i) x->f32()[i] = u(rng);
  (*full)->run();
  const float* want = (*full)->tensor("y")->f32();
  for (int64_t n : {1, 3, 7}) {
    auto ex = Executor::prepare(p, PrepareOptions{.batch = n});
    ASSERT_TRUE(ex) << ex.status().message();
    EXPECT_EQ((*ex)->tensor("x")->desc.type.shape[0], n);
    ASSERT_EQ((*ex)->tensor("y")->numel(), n * out_row);
    const int64_t r = 5;
    std::memcpy((*ex)->tensor("x")->f32(), x->f32() + r * row, n * row * sizeof(float));
    (*ex)->run();
    const bool exact = !Context::of(p)->jit().enabled || Context::of(p)->jit().isa() == Isa::REF;
    for (int64_t i = 0; i < n * out_row; ++i) {
      const float got = (*ex)->tensor("y")->f32()[i], w = want[r * out_row + i];
      if (exact) ASSERT_EQ(got, w) << "batch " << n << " element " << i;
      else ASSERT_NEAR(got, w, 1e-6f * (1 + std::fabs(w))) << "batch " << n << " element " << i;
    }
  }
}

TEST(Rebatch, MlpRowsMatchTheRecordedBatch) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  record_mlp(g);
  expect_rows_match(p);
}

TEST(Rebatch, CnnWithFlattenReshapeRowsMatch) {
  for (int64_t lead : {B, int64_t(-1)}) {
    Context ctx;
    Program p(ctx);
    Graph g(p);
    record_cnn(g, lead);
    expect_rows_match(p);
  }
}

// A recurrent layer's batch is N: with batch_first its input [N, T, I] leads with it.
TEST(Rebatch, BatchFirstLstmRowsMatch) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {B, 5, 4});
  g.output(lstm(x, 8, {.name = "r", .batch_first = true}).y, "y");
  expect_rows_match(p);
}

// Stepped one frame per run, the layer sees x [N, I] as [1, N, I] and keeps its h as state
// [1, N, H]: N is fixed, and the reshape that moves it off dimension 0 is named.
TEST(Rebatch, SteppedRecurrentStateCannotChangeItsBatch) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {B, 4});
  g.output(gru(x, 8, {.name = "r", .step = true}).y, "y");
  ASSERT_TRUE(p.finish()) << p.finish().message();
  auto q = with_batch(p, 3);
  ASSERT_FALSE(q);
  EXPECT_NE(q.status().message().find("cannot change the batch from 64 to 3"), std::string::npos) << q.status().message();
  EXPECT_NE(q.status().message().find("rebatch_test.cpp:"), std::string::npos) << q.status().message();
  EXPECT_NE(q.status().message().find("RESHAPE %t0 to [1,64,4]"), std::string::npos) << q.status().message();
}

TEST(Rebatch, SharesWeightsAndLeavesTheOriginalAlone) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  record_mlp(g);
  auto q = with_batch(p, 3);
  ASSERT_TRUE(q) << q.status().message();
  EXPECT_EQ((*q)->find("l1.w"), p.find("l1.w"));
  EXPECT_NE((*q)->find("x"), p.find("x"));
  EXPECT_EQ(p.desc(p.find("x")).type.shape[0], B);
  EXPECT_EQ((*q)->desc((*q)->find("y")).type.shape, Shape({3, 10}));
  EXPECT_EQ(*program_batch(**q), 3);
}

// An executor at another batch takes its copy's tensors with it: preparing at batch after batch
// leaves the context's tensors as they were, and the original still runs.
TEST(Rebatch, AnExecutorAtAnotherBatchLeavesTheContextAsItWas) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  record_cnn(g, B);
  auto full = Executor::prepare(p);
  ASSERT_TRUE(full) << full.status().message();
  const size_t before = ctx.size();
  for (int64_t n = 1; n <= 20; ++n) {
    auto ex = Executor::prepare(p, PrepareOptions{.batch = n});
    ASSERT_TRUE(ex) << ex.status().message();
    (*ex)->run();
  }
  EXPECT_EQ(ctx.size(), before);
  (*full)->run();
  EXPECT_EQ((*full)->tensor("y")->numel(), B * 10);
}

TEST(Rebatch, ReshapeMixingTheBatchIsRefusedWithItsName) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {B, 20});
  g.output(reshape(x, {32, 40}), "y");
  auto q = with_batch(p, 3);
  ASSERT_FALSE(q);
  EXPECT_NE(q.status().message().find("RESHAPE %"), std::string::npos) << q.status().message();
  EXPECT_NE(q.status().message().find("mixes the batch"), std::string::npos) << q.status().message();
}

TEST(Rebatch, InputsWithoutACommonBatchAreRefused) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var a = g.input("a", {B, 4}), b = g.input("b", {4});
  g.output(a + b, "y");
  auto q = with_batch(p, 3);
  ASSERT_FALSE(q);
  EXPECT_NE(q.status().message().find("%b"), std::string::npos) << q.status().message();

  Context ctx2;
  Program p2(ctx2);
  Graph g2(p2);
  Var s = g2.input("s", {});
  g2.output(s * 2.f, "y");
  auto q2 = Executor::prepare(p2, PrepareOptions{.batch = 2});
  ASSERT_FALSE(q2);
  EXPECT_NE(q2.status().message().find("%s is a scalar"), std::string::npos) << q2.status().message();
}

TEST(Rebatch, ShapeMismatchWithAParamNamesTheInstruction) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {B, 4});
  Var bias = g.param("bias", {B, 4});
  g.output(x + bias, "y");
  auto q = with_batch(p, 3);
  ASSERT_FALSE(q);
  EXPECT_NE(q.status().message().find("ADD %"), std::string::npos) << q.status().message();
}

TEST(Rebatch, BatchOutOfRangeIsRefused) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  record_mlp(g);
  for (int64_t n : {int64_t(0), int64_t(-3), int64_t(1) << 40}) {
    auto q = with_batch(p, n);
    EXPECT_FALSE(q) << n;
  }
  EXPECT_FALSE(Executor::prepare(p, PrepareOptions{.batch = -1}));
  auto big = Executor::prepare(p, PrepareOptions{.batch = int64_t(1) << 30});
  ASSERT_FALSE(big);
  EXPECT_NE(big.status().message().find("tensor 'x'"), std::string::npos) << big.status().message();
}

// Records a training program at batch 64 (rebatched to 7) and at batch 7, gives both the same
// weights and inputs (i32 labels as class ids), runs one training step on each and expects the
// same loss and updated weights: the rebatched gradients are the recorded model's.
using Recorder = Var (*)(Graph& g, Var y, int64_t b);
void expect_step_of_the_model_recorded_at_7(Recorder loss_of) {
  auto record = [&](Program& p, int64_t b) {
    Graph g(p);
    Var loss = loss_of(g, linear(g.input("x", {b, 6}), 3, {.name = "l"}), b);
    g.output(loss, "loss");
    return make_trainable(p, loss.id(), sgd(0.1));
  };
  Context c64, c7;
  Program p64(c64), p7(c7);
  ASSERT_TRUE(record(p64, B));
  ASSERT_TRUE(record(p7, 7));
  auto a = Executor::prepare(p64, PrepareOptions{.batch = 7});
  ASSERT_TRUE(a) << a.status().message();
  auto b = Executor::prepare(p7);
  ASSERT_TRUE(b) << b.status().message();
  for (const char* name : {"x", "t", "l.w", "l.b"}) {
    Tensor* from = (*a)->tensor(name);
    Tensor* to = (*b)->tensor(name);
    ASSERT_EQ(from->numel(), to->numel()) << name;
    for (int64_t i = 0; i < from->numel(); ++i) {
      if (to->desc.type.dtype == DType::I32) from->i32()[i] = to->i32()[i] = int32_t(i % 3);
      else from->f32()[i] = to->f32()[i] = 0.01f * float((i * 37) % 23) - 0.1f;
    }
  }
  (*a)->train_step();
  (*b)->train_step();
  for (const char* name : {"loss", "l.w", "l.b"})
    for (int64_t i = 0; i < (*a)->tensor(name)->numel(); ++i)
      EXPECT_FLOAT_EQ((*a)->tensor(name)->f32()[i], (*b)->tensor(name)->f32()[i]) << name << " " << i;
}

// MSE's gradient scales by 2/size, which the copy rescales.
TEST(Rebatch, TrainingProgramRescalesTheMeanOfItsLoss) {
  expect_step_of_the_model_recorded_at_7([](Graph& g, Var y, int64_t b) { return mse(y, g.input("t", {b, 3})); });
}

// Softmax cross-entropy divides by the rows it sees: labels [B] follow the batch, nothing is
// rescaled.
TEST(Rebatch, CrossEntropyTrainingStepMatchesTheModelRecordedAtTheBatch) {
  expect_step_of_the_model_recorded_at_7(
      [](Graph& g, Var y, int64_t b) { return softmax_ce(y, g.input("t", {b}, DType::I32)); });
}

TEST(Rebatch, MeanOverTheBatchInABackwardSectionIsRefused) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {B, 6});
  Var loss = reduce_mean(reduce_sum(square(linear(x, 3, {.name = "l"})), 1), 0);
  g.output(loss, "loss");
  ASSERT_TRUE(make_trainable(p, loss.id(), sgd(0.1)));
  auto q = with_batch(p, 7);
  ASSERT_FALSE(q);
  EXPECT_NE(q.status().message().find("SCALE %"), std::string::npos) << q.status().message();
  EXPECT_NE(q.status().message().find("mean over the batch"), std::string::npos) << q.status().message();
}

}  // namespace
}  // namespace nnasm
