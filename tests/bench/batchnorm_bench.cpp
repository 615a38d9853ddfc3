// BATCHNORM2D on a CNN-sized activation, [64, 16, 16, 16] (a batch of 64 after a 16-channel
// layer), in training mode: the forward pass alone (batch statistics, running averages, the map)
// and a training step (forward, the square-mean loss, BATCHNORM2D_BWD, SGD on γ and β), on the
// generated kernels and on the reference kernels.
#include <benchmark/benchmark.h>

#include "engine/optimizer.h"
#include "tests/bench/bench_program.h"

namespace nnasm {
namespace {

std::unique_ptr<BenchProgram> bn_program(bool jit, bool train) {
  auto b = bench_program(
      [train](Graph& g) {
        Var y = batchnorm2d(g.input("x", {64, 16, 16, 16}));
        if (train) g.output(reduce_mean(reshape(square(y), {64 * 16 * 16 * 16}), 0), "loss");
        else g.output(y, "y");
      },
      jit ? JitConfig{true, Isa::AVX512} : JitConfig{false, Isa::REF});
  if (!b) return nullptr;
  if (train && !make_trainable(b->p, b->p.find("loss"), sgd(0.01f))) return nullptr;
  if (train) {
    auto ex = Executor::prepare(b->p);
    if (!ex) return nullptr;
    b->ex = std::move(ex.value());
  }
  b->ex->set_training(true);
  return b;
}

void run_bn(benchmark::State& st, bool jit, bool train) {
  auto b = bn_program(jit, train);
  if (!b) {
    st.SkipWithError("build failed");
    return;
  }
  for (auto _ : st) {
    if (train) b->ex->train_step();
    else b->ex->run();
  }
  st.SetItemsProcessed(st.iterations() * 64 * 16 * 16 * 16);
}

void BM_batchnorm_train_forward_nnasm(benchmark::State& st) { run_bn(st, true, false); }
void BM_batchnorm_train_forward_ref(benchmark::State& st) { run_bn(st, false, false); }
void BM_batchnorm_train_step_nnasm(benchmark::State& st) { run_bn(st, true, true); }
void BM_batchnorm_train_step_ref(benchmark::State& st) { run_bn(st, false, true); }
BENCHMARK(BM_batchnorm_train_forward_nnasm)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_batchnorm_train_forward_ref)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_batchnorm_train_step_nnasm)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_batchnorm_train_step_ref)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace nnasm
