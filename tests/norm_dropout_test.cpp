// BATCHNORM2D and DROPOUT in whole programs: what the one-op parity cases cannot show. Dropout's
// mask statistics, its reproducibility (seed, run index, key) and the backward redrawing the
// forward's mask; batch normalization's running statistics over several training steps and the
// switch to inference; the passes leaving both alone where they must; the listing form.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/autodiff.h"
#include "engine/executor.h"
#include "engine/optimizer.h"
#include "engine/passes/pass.h"
#include "serialize/listing.h"
#include "shell/shell.h"

namespace nnasm {
namespace {

std::vector<float> values(const Executor& ex, const std::string& name) {
  const Tensor* t = ex.tensor(name);
  return std::vector<float>(t->f32(), t->f32() + t->numel());
}

void fill(Executor& ex, const std::string& name, float (*f)(int64_t)) {
  Tensor* t = ex.tensor(name);
  for (int64_t i = 0; i < t->numel(); ++i) t->f32()[i] = f(i);
}

struct DropoutProgram {
  explicit DropoutProgram(uint64_t seed, bool training = true) : ctx(seed), p(ctx) {
    Graph g(p);
    Var x = g.input("x", {200, 500});
    g.output(dropout(x, 0.3f), "y");
    g.output(dropout(x, 0.3f), "y2");
    p.set_training(training);
    ex = std::move(Executor::prepare(p).value());
    fill(*ex, "x", [](int64_t i) { return 1.f + static_cast<float>(i % 7); });
  }
  Context ctx;
  Program p;
  std::unique_ptr<Executor> ex;
};

TEST(Dropout, MaskFractionAndScaling) {
  DropoutProgram d(7);
  d.ex->run();
  const std::vector<float> y = values(*d.ex, "y");
  const float scale = static_cast<float>(1.0 / (1.0 - static_cast<double>(0.3f)));
  int64_t dropped = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const float x = 1.f + static_cast<float>(i % 7);
    if (y[i] == 0) ++dropped;
    else ASSERT_EQ(y[i], x * scale) << i;
  }
  // 100000 Bernoulli(0.3) draws: the standard deviation of the fraction is 0.00145.
  EXPECT_NEAR(static_cast<double>(dropped) / static_cast<double>(y.size()), 0.3, 0.006);
}

TEST(Dropout, IdentityInInference) {
  DropoutProgram d(7, false);
  d.ex->run();
  const std::vector<float> y = values(*d.ex, "y");
  for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], 1.f + static_cast<float>(i % 7));
  d.ex->set_training(true);
  d.ex->run();
  EXPECT_NE(values(*d.ex, "y"), y);
}

TEST(Dropout, ReproducibleFromSeedRunAndKey) {
  DropoutProgram a(11), b(11), c(12);
  a.ex->run();
  b.ex->run();
  c.ex->run();
  const std::vector<float> first = values(*a.ex, "y");
  EXPECT_EQ(first, values(*b.ex, "y")) << "same seed, same run: same mask";
  EXPECT_NE(first, values(*c.ex, "y")) << "another seed";
  EXPECT_NE(first, values(*a.ex, "y2")) << "another key (the shell numbers the dropouts)";
  a.ex->run();
  EXPECT_NE(first, values(*a.ex, "y")) << "the next run draws a new mask";
  a.ex->set_run_index(0);
  a.ex->run();
  EXPECT_EQ(first, values(*a.ex, "y")) << "run index 0 again";
}

// dx of Σ dropout(x) is the mask scaled: with x all ones, exactly y, run after run.
TEST(Dropout, BackwardRedrawsTheForwardMask) {
  Context ctx(3);
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {17, 33});
  Var y = dropout(x, 0.5f);
  Var s = reduce_sum(reshape(y, {17 * 33}), 0);
  g.output(y, "y");
  g.output(s, "s");
  p.set_training(true);
  Result<std::vector<TensorId>> dx = grad(p, s.id(), {x.id()});
  ASSERT_TRUE(dx) << dx.status().message();
  auto ex = Executor::prepare(p);
  ASSERT_TRUE(ex) << ex.status().message();
  fill(*ex.value(), "x", [](int64_t) { return 1.f; });
  for (int run = 0; run < 3; ++run) {
    ex.value()->run(Section::FORWARD);
    ex.value()->run(Section::BACKWARD);
    EXPECT_EQ(values(*ex.value(), "y"), values(*ex.value(), p.desc(dx.value()[0]).name)) << "run " << run;
  }
}

// PyTorch's update, step by step, then inference with the running statistics.
TEST(BatchNorm, RunningStatisticsFollowTrainingSteps) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {4, 3, 5, 5});
  BatchNormOptions o;
  o.momentum = 0.2f;
  g.output(batchnorm2d(x, o), "y");
  ASSERT_TRUE(g.status()) << g.status().message();
  EXPECT_NE(p.find("bn0.running_mean"), NO_TENSOR);
  EXPECT_EQ(p.desc(p.find("bn0.running_var")).role, Role::STATE);
  EXPECT_EQ(p.desc(p.find("bn0.gamma")).role, Role::PARAM);
  p.set_training(true);
  auto exr = Executor::prepare(p);
  ASSERT_TRUE(exr) << exr.status().message();
  Executor& ex = *exr.value();
  std::vector<double> rm(3, 0), rv(3, 1);
  const int64_t M = 4 * 25;
  for (int step = 0; step < 3; ++step) {
    Tensor* xt = ex.tensor("x");
    for (int64_t i = 0; i < xt->numel(); ++i)
      xt->f32()[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i) + step) * (1 + (i / 25) % 3) + step);
    std::vector<double> mean(3, 0), var(3, 0);
    for (int64_t i = 0; i < xt->numel(); ++i) mean[(i / 25) % 3] += xt->f32()[i] / static_cast<double>(M);
    for (int64_t i = 0; i < xt->numel(); ++i) {
      const double d = xt->f32()[i] - mean[(i / 25) % 3];
      var[(i / 25) % 3] += d * d / static_cast<double>(M);
    }
    ex.run();
    for (int c = 0; c < 3; ++c) {
      rm[c] = 0.8 * rm[c] + 0.2 * mean[c];
      rv[c] = 0.8 * rv[c] + 0.2 * var[c] * M / (M - 1);
      EXPECT_NEAR(ex.tensor("bn0.running_mean")->f32()[c], rm[c], 1e-5) << step;
      EXPECT_NEAR(ex.tensor("bn0.running_var")->f32()[c], rv[c], 1e-5) << step;
    }
    // Training output: zero mean, unit (biased) variance per channel.
    const std::vector<float> y = values(ex, "y");
    double s = 0;
    for (int64_t i = 0; i < 25 * 4; ++i) s += y[static_cast<size_t>((i / 25) * 75 + i % 25)];
    EXPECT_NEAR(s, 0, 1e-3);
  }
  ex.set_training(false);
  const std::vector<float> before = values(ex, "bn0.running_mean");
  ex.run();
  EXPECT_EQ(values(ex, "bn0.running_mean"), before) << "inference updates nothing";
  const float x0 = ex.tensor("x")->f32()[0];
  EXPECT_NEAR(ex.tensor("y")->f32()[0], (x0 - rm[0]) / std::sqrt(rv[0] + 1e-5), 1e-4);
}

// A small CNN with both ops trains: the loss falls, and gradients reach γ and β.
TEST(BatchNorm, ConvBatchNormDropoutTrains) {
  Context ctx(5);
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {8, 1, 6, 6});
  Var labels = g.input("labels", {8}, DType::I32);
  Var h = relu(batchnorm2d(conv2d(x, 4, {3, 3}, {"c1"}), {"bn1"}));
  Var logits = linear(dropout(reshape(h, {8, 64}), 0.25f), 2, {"fc"});
  g.output(softmax_ce(logits, labels), "loss");
  ASSERT_TRUE(g.status()) << g.status().message();
  p.set_training(true);
  ASSERT_TRUE(make_trainable(p, p.find("loss"), sgd(0.1, 0.9)));
  EXPECT_NE(p.find("bn1.gamma.grad"), NO_TENSOR);
  auto exr = Executor::prepare(p);
  ASSERT_TRUE(exr) << exr.status().message();
  Executor& ex = *exr.value();
  for (int64_t i = 0; i < 8 * 36; ++i) ex.tensor("x")->f32()[i] = ((i / 36) % 2 ? 1.f : -1.f) * static_cast<float>((i % 36) % 5) * 0.3f;
  for (int i = 0; i < 8; ++i) ex.tensor("labels")->i32()[i] = i % 2;
  ex.train_step();
  const float first = ex.tensor("loss")->f32()[0];
  for (int i = 0; i < 30; ++i) ex.train_step();
  EXPECT_LT(ex.tensor("loss")->f32()[0], 0.5f * first);
}

int count_op(const Program& p, Opcode op) {
  int n = 0;
  for (const Instruction& ins : p.code()) n += ins.op == op;
  return n;
}

TEST(NormPasses, NeitherMergedFoldedNorRemoved) {
  const char* text = R"(
input  %x : f32[2,3,4]
const  @k : f32[2,3] = [1, 2, 3, 4, 5, 6]
param  @g : f32[3] init=ones
param  @b : f32[3] init=zeros
state  @m : f32[3] init=zeros
state  @v : f32[3] init=ones
output %y

forward:
  DROPOUT      %x -> %d1  rate=0.5 key=1
  DROPOUT      %x -> %d2  rate=0.5 key=1
  DROPOUT      @k -> %dk  rate=0.5 key=2
  BATCHNORM2D  %x, @g, @b, @m, @v -> %n1  eps=1e-05 momentum=0.1
  BATCHNORM2D  %x, @g, @b, @m, @v -> %n2  eps=1e-05 momentum=0.1
  BATCHNORM2D  %x, @g, @b, @m, @v -> %unused  eps=1e-05 momentum=0.1
  ADD          %d1, %d2 -> %s
  ADD          %n1, %n2 -> %t
  ADD          %s, %t -> %u
  RESHAPE      %dk -> %r  shape=[2,3,1]
  ADD          %u, %r -> %y
)";
  Context ctx;
  Program p(ctx);
  ASSERT_TRUE(program_parse(text, "norm.nnasm", &p));
  const std::string printed = program_print(p);
  EXPECT_NE(printed.find("-> %n1  eps=1e-05 momentum=0.1"), std::string::npos) << printed;
  EXPECT_NE(printed.find("-> %d1  rate=0.5 key=1"), std::string::npos) << printed;
  Program q(ctx);
  ASSERT_TRUE(program_parse(program_print(p), "again.nnasm", &q));
  EXPECT_EQ(program_print(q), program_print(p));
  ASSERT_TRUE(optimize(p, 1));
  EXPECT_EQ(count_op(p, Opcode::DROPOUT), 3) << program_print(p);
  EXPECT_EQ(count_op(p, Opcode::BATCHNORM2D), 3) << program_print(p);
}

// Inference reads the running statistics only, so a hand-written listing may give them as
// consts; training would write them, so it is refused with the fix, and nothing is written.
constexpr const char* CONST_STATS_LISTING = R"(
input  %x : f32[2,3,2,3]
const  @g : f32[3] = [1, 2, -0.5]
const  @b : f32[3] = [0.25, 0, 1]
const  @m : f32[3] = [0.5, -1, 2]
const  @v : f32[3] = [1, 4, 0.25]
output %y

forward:
  BATCHNORM2D  %x, @g, @b, @m, @v -> %y  eps=0.001 momentum=0.1
)";

TEST(BatchNorm, ConstStatisticsRunInInference) {
  Context ctx;
  Program p(ctx);
  ASSERT_TRUE(program_parse(CONST_STATS_LISTING, "const_stats.nnasm", &p));
  Result<std::unique_ptr<Executor>> ex = Executor::prepare(p);
  ASSERT_TRUE(ex) << ex.status().message();
  fill(**ex, "x", [](int64_t i) { return static_cast<float>(i % 11) * 0.375f - 1.5f; });
  const float g[3] = {1, 2, -0.5f}, b[3] = {0.25f, 0, 1}, m[3] = {0.5f, -1, 2}, v[3] = {1, 4, 0.25f};
  auto check = [&] {
    (*ex)->run();
    const std::vector<float> y = values(**ex, "y");
    ASSERT_EQ(y.size(), 36u);
    for (int n = 0; n < 2; ++n)
      for (int c = 0; c < 3; ++c)
        for (int k = 0; k < 6; ++k) {
          const int i = (n * 3 + c) * 6 + k;
          const double x = static_cast<float>(i % 11) * 0.375f - 1.5f;
          const double want = g[c] * (x - m[c]) / std::sqrt(static_cast<double>(v[c]) + 0.001) + b[c];
          EXPECT_NEAR(y[static_cast<size_t>(i)], want, 1e-5) << i;
        }
  };
  check();
  const Status s = (*ex)->set_training(true);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("declare @m as state to train; consts are read-only"), std::string::npos) << s.message();
  EXPECT_FALSE((*ex)->training());
  check();  // still inference, and the consts are as they were
  EXPECT_EQ(values(**ex, "m"), std::vector<float>(m, m + 3));
  EXPECT_EQ(values(**ex, "v"), std::vector<float>(v, v + 3));
}

TEST(BatchNorm, TrainingWithConstStatisticsNamesTheFix) {
  Context ctx;
  Program p(ctx);
  const std::string text = std::string("mode training\n") + CONST_STATS_LISTING;
  Status s = program_parse(text, "const_stats.nnasm", &p);
  if (s) {
    const Result<std::unique_ptr<Executor>> ex = Executor::prepare(p);
    ASSERT_FALSE(ex);
    s = ex.status();
  }
  EXPECT_NE(s.message().find("BATCHNORM2D updates input 4 (@m) in place when training: declare @m as state to train; "
                             "consts are read-only"),
            std::string::npos)
      << s.message();
}

// PyTorch's exporter merges equal initializers: a fresh layer's zero bias and zero running mean
// become one tensor. Inference runs it; training asks for statistics of their own.
TEST(BatchNorm, StatisticSharedWithBetaRunsInInference) {
  const char* text = R"(
input  %x : f32[4,2]
param  @g : f32[2] init=ones
param  @z : f32[2] init=zeros
state  @v : f32[2] init=ones
output %y

forward:
  BATCHNORM2D  %x, @g, @z, @z, @v -> %y  eps=0 momentum=0.1
)";
  Context ctx;
  Program p(ctx);
  ASSERT_TRUE(program_parse(text, "shared.nnasm", &p));
  Result<std::unique_ptr<Executor>> ex = Executor::prepare(p);
  ASSERT_TRUE(ex) << ex.status().message();
  fill(**ex, "x", [](int64_t i) { return static_cast<float>(i) - 3.f; });
  (*ex)->run();
  const std::vector<float> y = values(**ex, "y");
  for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(y[i], static_cast<float>(i) - 3.f) << i;
  const Status s = (*ex)->set_training(true);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("(@z) in place when training, but it is also input 3"), std::string::npos) << s.message();
  EXPECT_EQ(values(**ex, "z"), std::vector<float>(2, 0.f));
}

}  // namespace
}  // namespace nnasm
