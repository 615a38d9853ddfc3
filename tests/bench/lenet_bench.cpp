// LeNet-5 (the model of samples/fashion_cnn.cpp: conv 5×5 6 channels pad 2, ReLU, max-pool 2,
// conv 5×5 16 channels, ReLU, max-pool 2, 120, 84, 10) through the executor: inference at batch 1
// (softmax on top, as a game would run it) and one training step at batch 64 (forward,
// backward, SGD with momentum), JIT at the best level.
#include <benchmark/benchmark.h>

#include "engine/executor.h"
#include "engine/optimizer.h"
#include "shell/shell.h"
#include "tests/bench/bench_program.h"

namespace nnasm {
namespace {

Var lenet(Var x) {
  Conv2dOptions c1;
  c1.pad = {2, 2};
  Var h = max_pool2d(relu(conv2d(x, 6, {5, 5}, c1)), {2, 2});
  h = max_pool2d(relu(conv2d(h, 16, {5, 5})), {2, 2});
  h = relu(linear(reshape(h, {-1, 400}), 120));
  h = relu(linear(h, 84));
  return linear(h, 10);
}

void BM_lenet_infer_b1(benchmark::State& st) {
  auto b = bench_program([](Graph& g) { g.output(softmax(lenet(g.input("x", {1, 1, 28, 28}))), "y"); });
  if (!b) {
    st.SkipWithError("build failed");
    return;
  }
  for (auto _ : st) b->ex->run();
  st.SetItemsProcessed(st.iterations());
}
BENCHMARK(BM_lenet_infer_b1)->Unit(benchmark::kMicrosecond);

void BM_lenet_train_step_b64(benchmark::State& st) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {64, 1, 28, 28});
  Var labels = g.input("labels", {64}, DType::I32);
  g.output(softmax_ce(lenet(x), labels), "loss");
  if (!g.status() || !make_trainable(p, p.find("loss"), sgd(0.01, 0.9))) {
    st.SkipWithError("recording failed");
    return;
  }
  auto ex = Executor::prepare(p);
  if (!ex) {
    st.SkipWithError(ex.status().message().c_str());
    return;
  }
  float* xs = ex.value()->tensor("x")->f32();
  for (int i = 0; i < 64 * 784; ++i) xs[i] = static_cast<float>(i % 255) / 255.f;
  for (int i = 0; i < 64; ++i) ex.value()->tensor("labels")->i32()[i] = i % 10;
  for (auto _ : st) ex.value()->train_step();
  st.SetItemsProcessed(st.iterations() * 64);
}
BENCHMARK(BM_lenet_train_step_b64)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace nnasm
