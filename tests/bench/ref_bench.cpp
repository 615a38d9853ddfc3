// Reference-kernel benchmarks (JIT off; what NNASM_JIT=0 platforms run): the MLP at batch 1 and 64, one
// GEMM and one elementwise op, each next to an Eigen baseline measured in the same run, so the
// ratio is what matters (the JIT issue replaces these kernels).
#include <benchmark/benchmark.h>

#include <Eigen/Core>

#include "engine/executor.h"
#include "shell/shell.h"
#include "tests/bench/bench_program.h"

namespace nnasm {
namespace {

std::unique_ptr<BenchProgram> build(const std::function<void(Graph&)>& f) {
  // The reference kernels: this file measures them against Eigen.
  return bench_program(f, JitConfig{false, Isa::AVX512});
}

void BM_ref_mlp_784_256_10(benchmark::State& st) {
  const int64_t batch = st.range(0);
  auto b = build([&](Graph& g) { g.output(softmax(linear(relu(linear(g.input("x", {batch, 784}), 256)), 10)), "y"); });
  for (auto _ : st) b->ex->run();
  st.SetItemsProcessed(st.iterations() * batch);
}
BENCHMARK(BM_ref_mlp_784_256_10)->Arg(1)->Arg(64);

void BM_mlp_784_256_10_eigen(benchmark::State& st) {
  const int64_t batch = st.range(0);
  using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  M x = M::Random(batch, 784), w1 = M::Random(784, 256), w2 = M::Random(256, 10), h(batch, 256), y(batch, 10);
  Eigen::RowVectorXf b1 = Eigen::RowVectorXf::Random(256), b2 = Eigen::RowVectorXf::Random(10);
  for (auto _ : st) {
    h.noalias() = x * w1;
    h = (h.rowwise() + b1).cwiseMax(0.f);
    y.noalias() = h * w2;
    y.rowwise() += b2;
    Eigen::VectorXf m = y.rowwise().maxCoeff();
    y = (y.colwise() - m).array().exp();
    y.array().colwise() /= y.array().rowwise().sum();
    benchmark::DoNotOptimize(y.data());
  }
  st.SetItemsProcessed(st.iterations() * batch);
}
BENCHMARK(BM_mlp_784_256_10_eigen)->Arg(1)->Arg(64);

void BM_ref_matmul_256(benchmark::State& st) {
  auto b = build([](Graph& g) { g.output(matmul(g.input("a", {256, 256}), g.input("b", {256, 256})), "y"); });
  for (auto _ : st) b->ex->run();
  st.SetItemsProcessed(st.iterations() * 2 * 256 * 256 * 256);  // flops
}
BENCHMARK(BM_ref_matmul_256);

void BM_matmul_256_eigen(benchmark::State& st) {
  Eigen::MatrixXf a = Eigen::MatrixXf::Random(256, 256), b = a, y(256, 256);
  for (auto _ : st) {
    y.noalias() = a * b;
    benchmark::DoNotOptimize(y.data());
  }
  st.SetItemsProcessed(st.iterations() * 2 * 256 * 256 * 256);
}
BENCHMARK(BM_matmul_256_eigen);

void BM_ref_add_1M(benchmark::State& st) {
  auto b = build([](Graph& g) { g.output(g.input("a", {1024, 1024}) + g.input("b", {1024, 1024}), "y"); });
  for (auto _ : st) b->ex->run();
  st.SetBytesProcessed(st.iterations() * 3 * 4 * (1 << 20));
}
BENCHMARK(BM_ref_add_1M);

void BM_add_1M_eigen(benchmark::State& st) {
  Eigen::ArrayXf a = Eigen::ArrayXf::Random(1 << 20), b = a, y(1 << 20);
  for (auto _ : st) {
    y = a + b;
    benchmark::DoNotOptimize(y.data());
  }
  st.SetBytesProcessed(st.iterations() * 3 * 4 * (1 << 20));
}
BENCHMARK(BM_add_1M_eigen);

}  // namespace
}  // namespace nnasm
