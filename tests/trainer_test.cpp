// The trainer on a synthetic, separable 3-class problem: it learns, evaluates partial batches
// correctly, is reproducible by seed, and reports mis-shaped programs clearly.
#include <cmath>
#include <cstdio>

#include <gtest/gtest.h>

#include "engine/optimizer.h"
#include "engine/trainer.h"
#include "serialize/listing.h"
#include "shell/shell.h"

namespace nnasm {
namespace {

// Points around three centres in 4-D; class = nearest centre.
struct Blobs {
  std::vector<float> x;
  std::vector<int32_t> y;
  explicit Blobs(int n, uint64_t seed) {
    uint64_t s = seed;
    auto u = [&s] {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      return static_cast<float>((s >> 33) % 10000) / 10000.f - 0.5f;
    };
    const float centre[3][4] = {{2, 0, 0, 1}, {0, 2, 0, -1}, {0, 0, 2, 0}};
    for (int i = 0; i < n; ++i) {
      const int c = i % 3;
      y.push_back(c);
      for (int d = 0; d < 4; ++d) x.push_back(centre[c][d] + u());
    }
  }
  LabeledData data() const { return {x.data(), y.data(), static_cast<int64_t>(y.size()), 4}; }
};

struct Model {
  Context ctx;
  Program p{ctx};
  std::unique_ptr<Executor> ex;
  explicit Model(uint64_t seed, int64_t batch = 8) : ctx(seed) {
    Graph g(p);
    Var x = g.input("x", {batch, 4});
    Var labels = g.input("labels", {batch}, DType::I32);
    Var logits = linear(relu(linear(x, 16)), 3);
    g.output(logits, "logits");
    g.output(softmax_ce(logits, labels), "loss");
    EXPECT_TRUE(g.status()) << g.status().message();
    EXPECT_TRUE(make_trainable(p, p.find("loss"), adam(0.05)));
    ex = std::move(Executor::prepare(p).value());
  }
};

TEST(Trainer, LearnsASeparableProblem) {
  Blobs train_set(300, 1), test_set(101, 2);  // 101: the last test batch is partial
  Model m(7);
  TrainOptions opt;
  opt.epochs = 5;
  auto log = train(*m.ex, train_set.data(), test_set.data(), opt, nullptr);
  ASSERT_TRUE(log) << log.status().message();
  ASSERT_EQ(log.value().size(), 5u);
  EXPECT_LT(log.value().back().train_loss, log.value().front().train_loss);
  EXPECT_GT(log.value().back().test_acc, 0.97);
  EXPECT_GT(log.value().back().samples_per_sec, 0);
  // evaluate agrees with the last epoch's test accuracy, and leaves the mode as it was.
  m.ex->set_training(true);
  auto acc = evaluate(*m.ex, test_set.data(), opt);
  ASSERT_TRUE(acc);
  EXPECT_DOUBLE_EQ(*acc, log.value().back().test_acc);
  EXPECT_TRUE(m.ex->training());
}

TEST(Trainer, SameSeedSameRun) {
  Blobs train_set(120, 3), test_set(30, 4);
  TrainOptions opt;
  opt.epochs = 2;
  Model a(5), b(5);
  auto la = train(*a.ex, train_set.data(), test_set.data(), opt, nullptr);
  auto lb = train(*b.ex, train_set.data(), test_set.data(), opt, nullptr);
  ASSERT_TRUE(la && lb);
  EXPECT_EQ(la.value().back().train_loss, lb.value().back().train_loss);
  const Tensor *wa = a.ex->tensor("w0"), *wb = b.ex->tensor("w0");
  EXPECT_TRUE(std::equal(wa->f32(), wa->f32() + wa->numel(), wb->f32()));
}

TEST(Trainer, ProgressGetsOneLinePerEpochInALog) {
  Blobs train_set(64, 1), test_set(16, 2);
  Model m(1);
  TrainOptions opt;
  opt.epochs = 3;
  char* buf = nullptr;
  size_t len = 0;
  FILE* out = open_memstream(&buf, &len);
  Progress progress(out, false, [] { return 0.0; });
  ASSERT_TRUE(train(*m.ex, train_set.data(), test_set.data(), opt, &progress));
  std::fclose(out);
  const std::string text(buf, len);
  std::free(buf);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3);
  EXPECT_NE(text.find("epoch 3/3"), std::string::npos) << text;
}

TEST(Trainer, ClearErrors) {
  Blobs d(16, 1);
  Model m(1);
  TrainOptions opt;
  opt.logits = "nope";
  auto r = train(*m.ex, d.data(), d.data(), opt, nullptr);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("%nope"), std::string::npos);
  LabeledData wrong = d.data();
  wrong.sample_size = 5;
  auto e = evaluate(*m.ex, wrong, TrainOptions{});
  ASSERT_FALSE(e);
  EXPECT_NE(e.status().message().find("5 values"), std::string::npos) << e.status().message();

  // A program without an update section cannot be trained.
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {8, 4});
  g.input("labels", {8}, DType::I32);
  g.output(linear(x, 3), "logits");
  auto ex = Executor::prepare(p);
  auto t = train(*ex.value(), d.data(), d.data(), TrainOptions{}, nullptr);
  ASSERT_FALSE(t);
  EXPECT_NE(t.status().message().find("no update section"), std::string::npos);

  // A model may take u8 inputs, but the trainer's samples are f32.
  Context qctx;
  Program q(qctx);
  const char* listing = "input %x : u8[8,4]\ninput %labels : i32[8]\nconst @s : f32[] = [1]\nconst @z : u8[] = [0]\n"
                        "param @w : f32[4,3] init=zeros\noutput %logits\noutput %loss\n\nforward:\n"
                        "  DEQUANTIZE %x, @s, @z -> %f\n  MATMUL %f, @w -> %logits\n"
                        "  SOFTMAX_CE %logits, %labels -> %loss\n";
  ASSERT_TRUE(program_parse(listing, "q.nnasm", &q));
  auto qex = Executor::prepare(q);
  ASSERT_TRUE(qex.is_ok()) << qex.status().message();
  auto qe = evaluate(*qex.value(), d.data(), TrainOptions{});
  ASSERT_FALSE(qe);
  EXPECT_NE(qe.status().message().find("trainer: %x must be f32 [batch, ...], is u8[8,4]"), std::string::npos)
      << qe.status().message();
}

}  // namespace
}  // namespace nnasm
