// Executor: prepare/run on several programs, initialization by seed, contexts kept apart.
#include <cmath>

#include <gtest/gtest.h>

#include "engine/init.h"
#include "tests/test_programs.h"

namespace nnasm {
namespace {

std::unique_ptr<Executor> prepared(Program& p) {
  auto ex = Executor::prepare(p);
  EXPECT_TRUE(ex) << ex.status().message();
  return ex ? std::move(ex.value()) : nullptr;
}

TEST(Executor, RunsTheExpressionFromTheReadme) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x1 = g.input("x1", {1, 3}), x2 = g.input("x2", {1, 3}), x3 = g.input("x3", {1, 3});
  g.output(x1 + softmax(relu(x2 + 3.f * x3)), "y");
  ASSERT_TRUE(g.status()) << g.status().message();
  auto ex = prepared(p);
  ASSERT_TRUE(ex);
  const float a[] = {1, 2, 3}, b[] = {0, -5, 1}, c[] = {1, 0, -1};
  for (int i = 0; i < 3; ++i) {
    ex->tensor("x1")->f32()[i] = a[i];
    ex->tensor("x2")->f32()[i] = b[i];
    ex->tensor("x3")->f32()[i] = c[i];
  }
  ex->run();
  // relu(b + 3c) = [3, 0, 0]; softmax = [e^3, 1, 1] / (e^3 + 2).
  const double z = std::exp(3.0) + 2;
  const double want[] = {1 + std::exp(3.0) / z, 2 + 1 / z, 3 + 1 / z};
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(ex->tensor("y")->f32()[i], want[i], 1e-6);
  // Inputs are never overwritten.
  EXPECT_EQ(ex->tensor("x2")->f32()[1], -5.f);
}

TEST(Executor, LinearMlpMatchesHandComputation) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {2, 2});
  Var w = g.constant("w", {2, 3}, {1, 0, -1, 2, 1, 0});
  Var b = g.constant("b", {3}, {0.5, -0.5, 0});
  g.output(relu(linear(x, w, b)), "y");
  ASSERT_TRUE(g.status());
  auto ex = prepared(p);
  ASSERT_TRUE(ex);
  const float xv[] = {1, 2, -1, 1};
  std::copy(xv, xv + 4, ex->tensor("x")->f32());
  ex->run();
  // row 0: [1+4+.5, 0+2-.5, -1+0] = [5.5, 1.5, -1] -> relu [5.5, 1.5, 0]
  // row 1: [-1+2+.5, 0+1-.5, 1] = [1.5, 0.5, 1]
  const float want[] = {5.5f, 1.5f, 0, 1.5f, 0.5f, 1};
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(ex->tensor("y")->f32()[i], want[i]);
}

TEST(Executor, RunIsRepeatableAndSeesNewInputs) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  g.output(square(g.input("x", {4})), "y");
  auto ex = prepared(p);
  ASSERT_TRUE(ex);
  for (int round = 1; round <= 3; ++round) {
    for (int i = 0; i < 4; ++i) ex->tensor("x")->f32()[i] = static_cast<float>(round * i);
    ex->run();
    for (int i = 0; i < 4; ++i) EXPECT_EQ(ex->tensor("y")->f32()[i], static_cast<float>(round * i * round * i));
  }
}

TEST(Executor, EveryOpProgramRunsFinite) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  record_every_op(g);
  ASSERT_TRUE(g.status()) << g.status().message();
  auto ex = prepared(p);
  ASSERT_TRUE(ex);
  for (int i = 0; i < 15; ++i) ex->tensor("a")->f32()[i] = 0.1f * static_cast<float>(i) - 0.7f;
  for (int i = 0; i < 5; ++i) ex->tensor("b")->f32()[i] = 0.3f * static_cast<float>(i) - 0.5f;
  ex->run();
  for (int i = 0; i < 15; ++i) EXPECT_TRUE(std::isfinite(ex->tensor("y")->f32()[i])) << i;
  EXPECT_STRNE(ex->kernel_name(0), "");
  EXPECT_STREQ(ex->kernel_name(ex->program().code().size()), "?");
}

TEST(Executor, JitOffRunsReferenceKernelsOnly) {
  Context ctx;
  ctx.set_jit(JitConfig{false, Isa::AVX512});
  Program p(ctx);
  Graph g(p);
  record_every_op(g);
  auto ex = prepared(p);
  ASSERT_TRUE(ex);
  for (size_t i = 0; i < ex->program().code().size(); ++i) EXPECT_STREQ(ex->kernel_name(i), "ref") << i;
}

TEST(Executor, ParamInitIsReproducibleBySeedAndKeptOnRePrepare) {
  auto weights = [](uint64_t seed) {
    Context ctx(seed);
    Program p(ctx);
    Graph g(p);
    Var x = g.input("x", {1, 64});
    g.output(linear(x, 32), "y");
    auto ex = Executor::prepare(p);
    std::vector<float> w(ex.value()->tensor("w0")->f32(), ex.value()->tensor("w0")->f32() + 64 * 32);
    // A second prepare keeps the values a param already holds.
    ex.value()->tensor("w0")->f32()[0] = 42;
    auto again = Executor::prepare(p);
    EXPECT_EQ(again.value()->tensor("w0")->f32()[0], 42);
    return w;
  };
  std::vector<float> a = weights(7), b = weights(7), c = weights(8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // he_normal: std ≈ sqrt(2 / fan_in) = 0.177.
  double ss = 0;
  for (float v : a) ss += v * v;
  EXPECT_NEAR(std::sqrt(ss / static_cast<double>(a.size())), std::sqrt(2.0 / 64), 0.02);
}

TEST(Executor, InitKindsHaveTheirMoments) {
  Context ctx(3);
  Program p(ctx);
  Graph g(p);
  struct Case {
    const char* name;
    InitSpec init;
    double mean, sd;
  };
  const Case cases[] = {
      {"z", {InitKind::ZEROS, 0, 0}, 0, 0},
      {"o", {InitKind::ONES, 0, 0}, 1, 0},
      {"c", {InitKind::CONSTANT, 2.5, 0}, 2.5, 0},
      {"u", {InitKind::UNIFORM, -1, 3}, 1, 4 / std::sqrt(12.0)},
      {"n", {InitKind::NORMAL, 1, 2}, 1, 2},
      {"xu", {InitKind::XAVIER_UNIFORM, 0, 0}, 0, std::sqrt(2.0 / (100 + 200))},
      {"xn", {InitKind::XAVIER_NORMAL, 0, 0}, 0, std::sqrt(2.0 / (100 + 200))},
      {"hu", {InitKind::HE_UNIFORM, 0, 0}, 0, std::sqrt(2.0 / 100)},
      {"hn", {InitKind::HE_NORMAL, 0, 0}, 0, std::sqrt(2.0 / 100)},
  };
  Var x = g.input("x", {100, 200});
  Var acc = x;
  for (const Case& c : cases) acc = acc + g.param(c.name, {100, 200}, c.init);
  g.output(acc, "y");
  auto ex = prepared(p);
  ASSERT_TRUE(ex);
  for (const Case& c : cases) {
    const float* v = ex->tensor(c.name)->f32();
    double s = 0, ss = 0;
    for (int i = 0; i < 20000; ++i) s += v[i];
    const double mean = s / 20000;
    for (int i = 0; i < 20000; ++i) ss += (v[i] - mean) * (v[i] - mean);
    EXPECT_NEAR(mean, c.mean, 0.05 * (c.sd + 0.1)) << c.name;
    EXPECT_NEAR(std::sqrt(ss / 20000), c.sd, 0.03 * c.sd + 1e-9) << c.name;
  }
}

TEST(Executor, TwoContextsNeverCollide) {
  Context c1, c2;
  Program p1(c1), p2(c2);
  Graph g1(p1), g2(p2);
  g1.output(neg(g1.input("x", {2})), "y");
  g2.output(exp(g2.input("x", {3})), "y");
  auto e1 = prepared(p1);
  auto e2 = prepared(p2);
  ASSERT_TRUE(e1 && e2);
  e1->tensor("x")->f32()[0] = 1;
  e2->tensor("x")->f32()[0] = 0;
  e1->run();
  e2->run();
  EXPECT_EQ(e1->tensor("y")->f32()[0], -1.f);
  EXPECT_EQ(e2->tensor("y")->f32()[0], 1.f);
  EXPECT_NE(p1.find("x"), p2.find("x"));
}

TEST(Executor, RefusesAnUnfinishedProgram) {
  Context ctx;
  Program p(ctx);
  TensorDesc d;
  d.name = "y";
  d.role = Role::OUTPUT;
  d.is_output = true;
  ASSERT_TRUE(p.declare(d, false));
  auto ex = Executor::prepare(p);
  ASSERT_FALSE(ex);
  EXPECT_NE(ex.status().message().find("%y is an output but no instruction defines it"), std::string::npos);
}

TEST(Executor, FanInOut) {
  double fi, fo;
  fan_in_out(Shape{784, 256}, &fi, &fo);
  EXPECT_EQ(fi, 784);
  EXPECT_EQ(fo, 256);
  fan_in_out(Shape{16, 6, 5, 5}, &fi, &fo);
  EXPECT_EQ(fi, 150);
  EXPECT_EQ(fo, 400);
}

// run_timed is run with a clock around each instruction: the same results (a dropout's mask
// included, so the same run index) and one non-negative time per instruction of the section.
TEST(Executor, RunTimedComputesWhatRunComputes) {
  Context ctx(5);
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {4, 33});
  g.output(dropout(tanh(x) * 2.f, 0.5f), "y");
  ASSERT_TRUE(g.status()) << g.status().message();
  auto ex = prepared(p);
  ASSERT_TRUE(ex);
  ex->set_training(true);
  for (int64_t i = 0; i < 4 * 33; ++i) ex->tensor("x")->f32()[i] = 0.01f * static_cast<float>(i) - 0.5f;
  ex->set_run_index(3);
  ex->run();
  const std::vector<float> want(ex->tensor("y")->f32(), ex->tensor("y")->f32() + 4 * 33);
  std::vector<double> seconds(ex->program().code().size(), 0.0);
  ex->run();  // run 4 draws another mask; run_timed as run 3 must draw run 3's again
  ex->set_run_index(3);
  ex->run_timed(Section::FORWARD, seconds.data());
  for (int64_t i = 0; i < 4 * 33; ++i) EXPECT_EQ(ex->tensor("y")->f32()[i], want[static_cast<size_t>(i)]) << i;
  for (double t : seconds) EXPECT_GE(t, 0.0);
  int zeros = 0;
  for (float v : want) zeros += v == 0.f;
  EXPECT_GT(zeros, 0);  // the mask dropped something, so equal outputs mean equal masks
}

}  // namespace
}  // namespace nnasm
