// The generated GEMM and GEMV (jit/gemm.h) next to Eigen, measured in the same run: square
// SGEMM (the FLOPS counter is in FLOP/s, to compare with the CPU's peak per core), the
// batch-1 layer 1×784·784×256, and the MLP 784-256-128-10 forward at batch 1 and 64 through the
// executor. nnasm runs at the best ISA the CPU has; Eigen is built like the rest of the tree
// (no -march flags: SSE2 packets). Each nnasm benchmark's label names the kernel that ran.
// (A native-ISA Eigen in this file is not possible cleanly: Eigen picks its packet code from
// the __AVX*__ macros when its headers are included, so a target attribute on one function
// cannot switch it, and a second instantiation in the same program would break the ODR.)
#include <benchmark/benchmark.h>

#include <Eigen/Core>

#include "engine/executor.h"
#include "shell/shell.h"
#include "tests/bench/baselines.h"
#include "tests/bench/bench_program.h"

namespace nnasm {
namespace {

std::unique_ptr<BenchProgram> build(const std::function<void(Graph&)>& f) { return bench_program(f); }

void set_flops(benchmark::State& st, double flops_per_iter) {
  st.counters["FLOPS"] = benchmark::Counter(flops_per_iter * static_cast<double>(st.iterations()),
                                            benchmark::Counter::kIsRate, benchmark::Counter::OneK::kIs1000);
}

void BM_gemm_square_nnasm(benchmark::State& st) {
  const int64_t n = st.range(0);
  auto b = build([&](Graph& g) { g.output(matmul(g.input("a", {n, n}), g.input("b", {n, n})), "y"); });
  st.SetLabel(b->ex->kernel_name(0));
  for (auto _ : st) b->ex->run();
  set_flops(st, 2.0 * n * n * n);
}
BENCHMARK(BM_gemm_square_nnasm)->Apply(baselines::square_sizes);

void BM_gemm_square_eigen(benchmark::State& st) {
  const int64_t n = st.range(0);
  using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  M a = M::Random(n, n), b = M::Random(n, n), y(n, n);
  for (auto _ : st) {
    y.noalias() = a * b;
    benchmark::DoNotOptimize(y.data());
  }
  set_flops(st, 2.0 * n * n * n);
}
BENCHMARK(BM_gemm_square_eigen)->Apply(baselines::square_sizes);

// The batch-1 game case: one 784→256 layer (802 KB of fp32 weights, L2-resident when warm).
void BM_gemm_gemv_784x256_nnasm(benchmark::State& st) {
  auto b = build([&](Graph& g) { g.output(matmul(g.input("x", {1, 784}), g.input("w", {784, 256})), "y"); });
  st.SetLabel(b->ex->kernel_name(0));
  for (auto _ : st) b->ex->run();
  set_flops(st, 2.0 * 784 * 256);
  st.SetBytesProcessed(st.iterations() * 784 * 256 * 4);
}
BENCHMARK(BM_gemm_gemv_784x256_nnasm)->Unit(benchmark::kMicrosecond);

void BM_gemm_gemv_784x256_eigen(benchmark::State& st) {
  using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  M x = M::Random(1, 784), w = M::Random(784, 256), y(1, 256);
  for (auto _ : st) {
    y.noalias() = x * w;
    benchmark::DoNotOptimize(y.data());
  }
  set_flops(st, 2.0 * 784 * 256);
  st.SetBytesProcessed(st.iterations() * 784 * 256 * 4);
}
BENCHMARK(BM_gemm_gemv_784x256_eigen)->Unit(benchmark::kMicrosecond);

// The sample MLP's forward (784-256-128-10, ReLU, softmax) through the executor.
void BM_gemm_mlp_784_256_128_10_nnasm(benchmark::State& st) {
  const int64_t batch = st.range(0);
  auto b = build([&](Graph& g) {
    g.output(softmax(linear(relu(linear(relu(linear(g.input("x", {batch, 784}), 256)), 128)), 10)), "y");
  });
  std::string kernels;
  for (size_t i = 0; i < b->ex->program().code().size(); ++i) kernels += (i ? " " : "") + std::string(b->ex->kernel_name(i));
  st.SetLabel(kernels);
  for (auto _ : st) b->ex->run();
  st.SetItemsProcessed(st.iterations() * batch);
}
BENCHMARK(BM_gemm_mlp_784_256_128_10_nnasm)->Arg(1)->Arg(64)->Unit(benchmark::kMicrosecond);

void BM_gemm_mlp_784_256_128_10_eigen(benchmark::State& st) {
  const int64_t batch = st.range(0);
  using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  M x = M::Random(batch, 784), w1 = M::Random(784, 256), w2 = M::Random(256, 128), w3 = M::Random(128, 10);
  M h1(batch, 256), h2(batch, 128), y(batch, 10);
  Eigen::RowVectorXf b1 = Eigen::RowVectorXf::Random(256), b2 = Eigen::RowVectorXf::Random(128),
                     b3 = Eigen::RowVectorXf::Random(10);
  for (auto _ : st) {
    h1.noalias() = x * w1;
    h1 = (h1.rowwise() + b1).cwiseMax(0.f);
    h2.noalias() = h1 * w2;
    h2 = (h2.rowwise() + b2).cwiseMax(0.f);
    y.noalias() = h2 * w3;
    y.rowwise() += b3;
    Eigen::VectorXf m = y.rowwise().maxCoeff();
    y = (y.colwise() - m).array().exp();
    y.array().colwise() /= y.array().rowwise().sum();
    benchmark::DoNotOptimize(y.data());
  }
  st.SetItemsProcessed(st.iterations() * batch);
}
BENCHMARK(BM_gemm_mlp_784_256_128_10_eigen)->Arg(1)->Arg(64)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace nnasm
