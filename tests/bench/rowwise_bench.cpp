// Row-wise and reduction kernels (jit/rowwise.h): SOFTMAX 64×1000 and 1×10, REDUCE_SUM
// 1024×1024 along either axis, SOFTMAX_CE with class ids 64×10 and 64×1000. Each as the generated
// kernel at the machine's best ISA level, the reference kernel (JIT off) and an Eigen expression,
// measured in the same run; the JIT entry also reports ref_x and eigen_x (how many times faster
// it is, timed back to back in that entry, min of several runs each). Eigen is compiled with the
// project's flags (baseline x86-64, no -march), as the library's reference kernels are.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <string>

#include <Eigen/Core>

#include "engine/executor.h"
#include "shell/shell.h"
#include "tests/bench/bench_program.h"

namespace nnasm {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct Built {
  Context ctx;
  Program p{ctx};
  std::unique_ptr<Executor> ex;
};

struct RwBench {
  std::string name;
  int64_t rows, cols;
  std::function<Var(Graph&)> graph;          // input "x" [rows, cols] (and "t" ids [rows])
  std::function<void(const RowMat&, const Eigen::VectorXi&, Eigen::VectorXf&, RowMat&)> eigen;
};

std::unique_ptr<Built> build(bool jit, const RwBench& op, std::string* kernel) {
  auto b = std::make_unique<Built>();
  b->ctx.set_jit(JitConfig{jit, Isa::AVX512});
  Graph g(b->p);
  g.output(op.graph(g), "y");
  if (!g.status()) return nullptr;
  auto ex = Executor::prepare(b->p);
  if (!ex) return nullptr;
  b->ex = std::move(ex.value());
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-3, 3);
  if (Tensor* t = b->ex->tensor("x"))
    for (int64_t i = 0; i < t->numel(); ++i) t->f32()[i] = u(rng);
  if (Tensor* t = b->ex->tensor("t"))
    for (int64_t i = 0; i < t->numel(); ++i) t->i32()[i] = static_cast<int32_t>(i % op.cols);
  *kernel = b->ex->kernel_name(b->ex->program().code().size() - 1);
  return b;
}

std::vector<RwBench> ops() {
  auto softmax_eigen = [](const RowMat& x, const Eigen::VectorXi&, Eigen::VectorXf&, RowMat& y) {
    y = (x.colwise() - x.rowwise().maxCoeff()).array().exp().matrix();
    y.array().colwise() /= y.rowwise().sum().array();
  };
  auto ce_eigen = [](const RowMat& x, const Eigen::VectorXi& t, Eigen::VectorXf& v, RowMat&) {
    const Eigen::VectorXf m = x.rowwise().maxCoeff();
    const Eigen::VectorXf lse = (x.colwise() - m).array().exp().rowwise().sum().log().matrix();
    float loss = 0;
    for (Eigen::Index r = 0; r < x.rows(); ++r) loss -= x(r, t(r)) - m(r) - lse(r);
    v(0) = loss / static_cast<float>(x.rows());
  };
  auto ce_graph = [](int64_t rows, int64_t cols) {
    return [rows, cols](Graph& g) { return softmax_ce(g.input("x", {rows, cols}), g.input("t", {rows}, DType::I32)); };
  };
  return {
      {"SOFTMAX_64x1000", 64, 1000, [](Graph& g) { return softmax(g.input("x", {64, 1000})); }, softmax_eigen},
      {"SOFTMAX_1x10", 1, 10, [](Graph& g) { return softmax(g.input("x", {1, 10})); }, softmax_eigen},
      {"REDUCE_SUM_1Kx1K_last", 1024, 1024, [](Graph& g) { return reduce_sum(g.input("x", {1024, 1024}), -1); },
       [](const RowMat& x, const Eigen::VectorXi&, Eigen::VectorXf& v, RowMat&) { v = x.rowwise().sum(); }},
      {"REDUCE_SUM_1Kx1K_first", 1024, 1024, [](Graph& g) { return reduce_sum(g.input("x", {1024, 1024}), 0); },
       [](const RowMat& x, const Eigen::VectorXi&, Eigen::VectorXf& v, RowMat&) { v = x.colwise().sum().transpose(); }},
      {"SOFTMAX_CE_64x10", 64, 10, ce_graph(64, 10), ce_eigen},
      {"SOFTMAX_CE_64x1000", 64, 1000, ce_graph(64, 1000), ce_eigen},
  };
}

struct EigenData {
  RowMat x, y;
  Eigen::VectorXi t;
  Eigen::VectorXf v;
  explicit EigenData(const RwBench& op)
      : x(RowMat::Random(op.rows, op.cols) * 3.f), y(op.rows, op.cols), t(op.rows), v(std::max(op.rows, op.cols)) {
    for (Eigen::Index i = 0; i < t.size(); ++i) t(i) = static_cast<int>(i % op.cols);
  }
  void run(const RwBench& op) {
    op.eigen(x, t, v, y);
    benchmark::DoNotOptimize(y.data());
    benchmark::DoNotOptimize(v.data());
  }
};

void bench_engine(benchmark::State& st, const RwBench& op, bool jit) {
  std::string kernel;
  auto b = build(jit, op, &kernel);
  if (!b) {
    st.SkipWithError("build failed");
    return;
  }
  st.SetLabel(kernel);
  for (auto _ : st) b->ex->run();
  st.SetBytesProcessed(st.iterations() * op.rows * op.cols * 4);
  if (jit) {
    std::string ref_kernel;
    auto r = build(false, op, &ref_kernel);
    EigenData d(op);
    const double t_jit = best_time([&] { b->ex->run(); });
    st.counters["ref_x"] = best_time([&] { r->ex->run(); }) / t_jit;
    st.counters["eigen_x"] = best_time([&] { d.run(op); }) / t_jit;
  }
}

void bench_eigen(benchmark::State& st, const RwBench& op) {
  EigenData d(op);
  for (auto _ : st) d.run(op);
  st.SetBytesProcessed(st.iterations() * op.rows * op.cols * 4);
}

const int registered = [] {
  for (const RwBench& op : ops()) {
    benchmark::RegisterBenchmark(("BM_RW_" + op.name + "/jit").c_str(),
                                 [op](benchmark::State& st) { bench_engine(st, op, true); })
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("BM_RW_" + op.name + "/ref").c_str(),
                                 [op](benchmark::State& st) { bench_engine(st, op, false); })
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("BM_RW_" + op.name + "/eigen").c_str(), [op](benchmark::State& st) { bench_eigen(st, op); })
        ->Unit(benchmark::kMicrosecond);
  }
  return 0;
}();

}  // namespace
}  // namespace nnasm
