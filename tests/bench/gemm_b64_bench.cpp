// The 784→256 layer at batch 64 (64×784·784×256) for nnasm and Eigen: the row that the
// competitor baselines (baselines_*.cpp, BM_gemm_b64_784x256_<library>) line up with, next to
// gemm_bench.cpp's batch-1 BM_gemm_gemv_784x256_*. Set up as gemm_bench.cpp does: nnasm at the
// best ISA the CPU has, its label the kernel that ran; Eigen built like the rest of the tree.
#include <benchmark/benchmark.h>

#include <Eigen/Core>

#include "engine/executor.h"
#include "shell/shell.h"
#include "tests/bench/baselines.h"

namespace nnasm {
namespace {

using baselines::kLayerBatch;
using baselines::kLayerIn;
using baselines::kLayerOut;

constexpr double kFlops = 2.0 * kLayerBatch * kLayerIn * kLayerOut;

void BM_gemm_b64_784x256_nnasm(benchmark::State& st) {
  Context ctx;
  ctx.set_jit(JitConfig{true, Isa::AVX512});
  Program p{ctx};
  Graph g(p);
  g.output(matmul(g.input("x", {kLayerBatch, kLayerIn}), g.input("w", {kLayerIn, kLayerOut})), "y");
  auto ex = std::move(Executor::prepare(p).value());
  for (TensorId id : p.inputs()) {
    Tensor& t = ctx.at(id);
    for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = static_cast<float>((i * 7919) % 255) / 255.f - 0.5f;
  }
  st.SetLabel(ex->kernel_name(0));
  for (auto _ : st) ex->run();
  baselines::set_flops(st, kFlops);
  st.SetBytesProcessed(st.iterations() * kLayerIn * kLayerOut * 4);
}
BENCHMARK(BM_gemm_b64_784x256_nnasm)->Unit(benchmark::kMicrosecond);

void BM_gemm_b64_784x256_eigen(benchmark::State& st) {
  using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  M x = M::Random(kLayerBatch, kLayerIn), w = M::Random(kLayerIn, kLayerOut), y(kLayerBatch, kLayerOut);
  for (auto _ : st) {
    y.noalias() = x * w;
    benchmark::DoNotOptimize(y.data());
  }
  baselines::set_flops(st, kFlops);
  st.SetBytesProcessed(st.iterations() * kLayerIn * kLayerOut * 4);
}
BENCHMARK(BM_gemm_b64_784x256_eigen)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace nnasm
