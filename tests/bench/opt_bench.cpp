// What the optimizer buys: the sample MLP (784-256-128-10, ReLU, softmax) at batch 1 and its
// SGD training step at batch 64, prepared at -O0 (as recorded) and -O1 (the default), in the
// same run. Counters: instructions that run, bytes of the temporaries (the sum of their sizes,
// before memory planning), and the arena they are planned into (0 at -O0, which plans nothing:
// every temporary keeps its own storage).
#include <benchmark/benchmark.h>

#include "engine/executor.h"
#include "engine/optimizer.h"
#include "shell/shell.h"

namespace nnasm {
namespace {

struct Mlp {
  Context ctx;
  Program p{ctx};
  std::unique_ptr<Executor> ex;
};

std::unique_ptr<Mlp> prepare_mlp(int64_t batch, bool train, int level) {
  auto m = std::make_unique<Mlp>();
  m->ctx.set_opt_level(level);
  Graph g(m->p);
  Var x = g.input("x", {batch, 784});
  Var h = relu(linear(relu(linear(x, 256)), 128));
  if (train) {
    Var labels = g.input("labels", {batch}, DType::I32);
    g.output(softmax_ce(linear(h, 10), labels), "loss");
    if (!make_trainable(m->p, m->p.find("loss"), sgd(0.01, 0.9))) return nullptr;
  } else {
    g.output(softmax(linear(h, 10)), "y");
  }
  auto ex = Executor::prepare(m->p);
  if (!ex) return nullptr;
  m->ex = std::move(ex.value());
  float* xs = m->ex->tensor("x")->f32();
  for (int64_t i = 0; i < batch * 784; ++i) xs[i] = static_cast<float>(i % 255) / 255.f;
  if (train)
    for (int64_t i = 0; i < batch; ++i) m->ex->tensor("labels")->i32()[i] = static_cast<int32_t>(i % 10);
  return m;
}

void count(benchmark::State& st, const Mlp& m) {
  const Program& run = m.ex->program();
  size_t bytes = 0;
  for (TensorId id : run.tensors())
    if (run.desc(id).role == Role::TEMPORARY) bytes += static_cast<size_t>(run.desc(id).type.shape.numel()) * 4;
  st.counters["instructions"] = static_cast<double>(run.code().size());
  st.counters["temp_bytes"] = static_cast<double>(bytes);
  st.counters["arena_bytes"] = static_cast<double>(m.ex->memory_plan().arena_bytes);
}

void BM_opt_mlp_forward_b1(benchmark::State& st) {
  auto m = prepare_mlp(1, false, static_cast<int>(st.range(0)));
  if (!m) return st.SkipWithError("prepare failed");
  for (auto _ : st) m->ex->run();
  count(st, *m);
}
BENCHMARK(BM_opt_mlp_forward_b1)->ArgName("O")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

void BM_opt_mlp_train_b64(benchmark::State& st) {
  auto m = prepare_mlp(64, true, static_cast<int>(st.range(0)));
  if (!m) return st.SkipWithError("prepare failed");
  for (auto _ : st) m->ex->train_step();
  count(st, *m);
}
BENCHMARK(BM_opt_mlp_train_b64)->ArgName("O")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace nnasm
