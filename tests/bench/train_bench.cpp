// One training step of the sample MLP (784-256-128-10, ReLU, softmax cross-entropy, batch 64,
// SGD with momentum) through nnasm's forward/backward/update sections, next to the same step
// written by hand with Eigen, measured in the same run.
#include <benchmark/benchmark.h>

#include <Eigen/Core>

#include "engine/executor.h"
#include "engine/optimizer.h"
#include "engine/trainer.h"
#include "serialize/fashion_mnist.h"
#include "shell/shell.h"

namespace nnasm {
namespace {

// Times training steps of the MLP, after `untimed` steps, with denormals flushed or kept.
void run_mlp_steps(benchmark::State& st, int untimed, bool flush_denormals) {
  Context ctx;
  ctx.set_flush_denormals(flush_denormals);
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {64, 784});
  Var labels = g.input("labels", {64}, DType::I32);
  Var h = relu(linear(relu(linear(x, 256)), 128));
  g.output(softmax_ce(linear(h, 10), labels), "loss");
  if (!make_trainable(p, p.find("loss"), sgd(0.01, 0.9))) return st.SkipWithError("make_trainable failed");
  auto ex = Executor::prepare(p);
  if (!ex) return st.SkipWithError("prepare failed");
  float* xs = ex.value()->tensor("x")->f32();
  for (int i = 0; i < 64 * 784; ++i) xs[i] = static_cast<float>(i % 255) / 255.f;
  for (int i = 0; i < 64; ++i) ex.value()->tensor("labels")->i32()[i] = i % 10;
  for (int i = 0; i < untimed; ++i) ex.value()->train_step();
  for (auto _ : st) ex.value()->train_step();
  st.SetItemsProcessed(st.iterations() * 64);
}

void BM_train_step_mlp_b64(benchmark::State& st) { run_mlp_steps(st, 0, true); }
BENCHMARK(BM_train_step_mlp_b64)->Unit(benchmark::kMicrosecond);

// The same step once the model has fit its batch (1,000 steps first, untimed): the gradients are
// tiny by then, and many products underflow into denormals, which Intel cores compute through a
// microcode assist. range(0): 1 flushes them while running (the default), 0 keeps them
// (Context::set_flush_denormals).
void BM_train_step_mlp_b64_late(benchmark::State& st) { run_mlp_steps(st, 1000, st.range(0) != 0); }
BENCHMARK(BM_train_step_mlp_b64_late)->ArgName("flush")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// The same step by hand: what a user would write with Eigen instead of nnasm.
void BM_train_step_mlp_b64_eigen(benchmark::State& st) {
  using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using V = Eigen::RowVectorXf;
  const int n = 64;
  M x = (M::Random(n, 784).array() + 1) / 2;
  M w1 = M::Random(784, 256) * 0.05f, w2 = M::Random(256, 128) * 0.05f, w3 = M::Random(128, 10) * 0.05f;
  V b1 = V::Zero(256), b2 = V::Zero(128), b3 = V::Zero(10);
  M vw1 = M::Zero(784, 256), vw2 = M::Zero(256, 128), vw3 = M::Zero(128, 10);
  V vb1 = V::Zero(256), vb2 = V::Zero(128), vb3 = V::Zero(10);
  M h1(n, 256), h2(n, 128), z(n, 10), d3(n, 10), d2(n, 128), d1(n, 256), gw1(784, 256), gw2(256, 128), gw3(128, 10);
  std::vector<int> labels(n);
  for (int i = 0; i < n; ++i) labels[i] = i % 10;
  const float lr = 0.01f, mu = 0.9f;
  auto sgd = [&](auto& w, auto& v, const auto& g) {
    v = mu * v + g;
    w -= lr * v;
  };
  for (auto _ : st) {
    h1.noalias() = x * w1;
    h1 = (h1.rowwise() + b1).cwiseMax(0.f);
    h2.noalias() = h1 * w2;
    h2 = (h2.rowwise() + b2).cwiseMax(0.f);
    z.noalias() = h2 * w3;
    z.rowwise() += b3;
    for (int r = 0; r < n; ++r) {  // softmax − one-hot, / n
      const float m = z.row(r).maxCoeff();
      d3.row(r) = (z.row(r).array() - m).exp();
      d3.row(r) /= d3.row(r).sum();
      d3(r, labels[r]) -= 1;
    }
    d3 /= static_cast<float>(n);
    gw3.noalias() = h2.transpose() * d3;
    d2.noalias() = d3 * w3.transpose();
    d2 = d2.cwiseProduct((h2.array() > 0).cast<float>().matrix());
    gw2.noalias() = h1.transpose() * d2;
    d1.noalias() = d2 * w2.transpose();
    d1 = d1.cwiseProduct((h1.array() > 0).cast<float>().matrix());
    gw1.noalias() = x.transpose() * d1;
    sgd(w3, vw3, gw3);
    sgd(b3, vb3, d3.colwise().sum());
    sgd(w2, vw2, gw2);
    sgd(b2, vb2, d2.colwise().sum());
    sgd(w1, vw1, gw1);
    sgd(b1, vb1, d1.colwise().sum());
    benchmark::DoNotOptimize(w1.data());
  }
  st.SetItemsProcessed(st.iterations() * n);
}
BENCHMARK(BM_train_step_mlp_b64_eigen)->Unit(benchmark::kMicrosecond);

// One epoch of Fashion-MNIST (937 steps of the program above, with Adam, plus the test-set
// evaluation), as `make run` trains it. Skipped when the data set is not installed.
void BM_fashion_mnist_epoch(benchmark::State& st) {
  static Dataset train_set, test_set;
  static const Status loaded = [] {
    Status s = fashion_mnist_load("", true, &train_set);
    return s ? fashion_mnist_load("", false, &test_set) : s;
  }();
  if (!loaded) {
    st.SkipWithError(loaded.message().c_str());
    return;
  }
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {64, 784});
  Var labels = g.input("labels", {64}, DType::I32);
  Var logits = linear(relu(linear(relu(linear(x, 256)), 128)), 10);
  g.output(logits, "logits");
  g.output(softmax_ce(logits, labels), "loss");
  if (!make_trainable(p, p.find("loss"), adam(1e-3))) st.SkipWithError("make_trainable failed");
  auto ex = Executor::prepare(p);
  TrainOptions opt;
  opt.epochs = 1;
  const LabeledData tr{train_set.images.data(), train_set.labels.data(), train_set.n, 784};
  const LabeledData te{test_set.images.data(), test_set.labels.data(), test_set.n, 784};
  for (auto _ : st) benchmark::DoNotOptimize(train(*ex.value(), tr, te, opt, nullptr));
  st.SetItemsProcessed(st.iterations() * train_set.n);
}
BENCHMARK(BM_fashion_mnist_epoch)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace nnasm
