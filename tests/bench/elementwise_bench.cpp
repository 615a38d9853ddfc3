// Elementwise kernels on 2^20 floats (and one ADAM step on 2^20 weights): the generated kernel at
// the machine's best ISA level, the reference kernel (JIT off) and an Eigen array expression, each
// its own benchmark, measured in the same run. The JIT entry also reports ref_x and eigen_x: how
// many times faster it is than the other two, timed back to back in that entry (min of several
// runs each), so the ratio does not depend on what else the machine did between entries. Eigen is
// compiled with the project's flags (baseline x86-64, no -march), as the library's reference
// kernels are.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <string>

#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>

#include "engine/executor.h"
#include "shell/shell.h"
#include "tests/bench/bench_program.h"

namespace nnasm {
namespace {

constexpr int64_t N = int64_t(1) << 20;

struct Built {
  Context ctx;
  Program p{ctx};
  std::unique_ptr<Executor> ex;
};

// ADAM on N weights: w, g, m, v (N each), lr, t; updates w, m, v in place.
Status adam_program(Program& p) {
  std::vector<TensorId> in;
  for (const char* name : {"w", "g", "m", "v", "lr", "t"}) {
    TensorDesc d;
    d.name = name;
    d.type = TensorType{DType::F32, in.size() < 4 ? Shape{N} : Shape{}};
    d.role = Role::INPUT;
    Result<TensorId> id = p.declare(d);
    if (!id) return id.status();
    in.push_back(id.value());
  }
  return p.append(make_instruction(Opcode::ADAM, in, {in[0], in[2], in[3]}));
}

// A program of one op on inputs a (and b), or the program `prog` makes; JIT on at the best level
// or off. Inputs are uniform in [−3, 3], except v in [0, 1], lr = 1e−3 and t = 10.
std::unique_ptr<Built> build(bool jit, const std::function<Var(Graph&)>& f,
                             const std::function<Status(Program&)>& prog, std::string* kernel) {
  auto b = std::make_unique<Built>();
  b->ctx.set_jit(JitConfig{jit, Isa::AVX512});
  if (prog) {
    if (!prog(b->p)) return nullptr;
  } else {
    Graph g(b->p);
    g.output(f(g), "y");
    if (!g.status()) return nullptr;
  }
  auto ex = Executor::prepare(b->p);
  if (!ex) return nullptr;
  b->ex = std::move(ex.value());
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-3, 3), pos(0, 1);
  for (const char* name : {"a", "b", "w", "g", "m", "v"})
    if (Tensor* t = b->ex->tensor(name))
      for (int64_t i = 0; i < t->numel(); ++i) t->f32()[i] = name[0] == 'v' ? pos(rng) : u(rng);
  if (Tensor* t = b->ex->tensor("lr")) t->f32()[0] = 1e-3f;
  if (Tensor* t = b->ex->tensor("t")) t->f32()[0] = 10;
  *kernel = b->ex->kernel_name(b->ex->program().code().size() - 1);
  return b;
}

struct EigenData {
  Eigen::ArrayXf a = Eigen::ArrayXf::Random(N) * 3.f, b = Eigen::ArrayXf::Random(N) * 3.f, y = Eigen::ArrayXf(N);
  Eigen::RowVectorXf bias = Eigen::RowVectorXf::Random(1024);
  Eigen::ArrayXf m = Eigen::ArrayXf::Random(N), v = (Eigen::ArrayXf::Random(N) + 1.f) / 2.f;
};

struct OpBench {
  std::string name;
  std::function<Var(Graph&)> graph;
  std::function<void(EigenData&)> eigen;
  int streams;  // arrays of N floats read or written per run
  std::function<Status(Program&)> program = nullptr;  // instead of graph
};

std::vector<OpBench> ops() {
  using M = Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
  return {
      {"ADD_1M", [](Graph& g) { return g.input("a", {N}) + g.input("b", {N}); }, [](EigenData& d) { d.y = d.a + d.b; },
       3},
      {"ADD_bias_row_1Kx1K", [](Graph& g) { return g.input("a", {1024, 1024}) + g.input("b", {1024}); },
       [](EigenData& d) {
         M(d.y.data(), 1024, 1024) = M(d.a.data(), 1024, 1024).rowwise() + d.bias;
       },
       2},
      {"RELU_1M", [](Graph& g) { return relu(g.input("a", {N})); }, [](EigenData& d) { d.y = d.a.max(0.f); }, 2},
      {"EXP_1M", [](Graph& g) { return exp(g.input("a", {N})); }, [](EigenData& d) { d.y = d.a.exp(); }, 2},
      {"SIGMOID_1M", [](Graph& g) { return sigmoid(g.input("a", {N})); }, [](EigenData& d) { d.y = d.a.logistic(); },
       2},
      {"TANH_1M", [](Graph& g) { return tanh(g.input("a", {N})); }, [](EigenData& d) { d.y = d.a.tanh(); }, 2},
      {"GELU_1M", [](Graph& g) { return gelu(g.input("a", {N})); },
       [](EigenData& d) { d.y = 0.5f * d.a * (1.f + (d.a * 0.70710678f).erf()); }, 2},
      // One ADAM step on 1M weights (w, m, v read and written, g read); Eigen: the same formula,
      // y as w, a as g.
      {"ADAM_1M", nullptr,
       [](EigenData& d) {
         const float b1 = 0.9f, b2 = 0.999f, lr = 1e-3f, eps = 1e-8f;
         const float c1 = static_cast<float>(1 - std::pow(0.9, 10.0)), c2 = static_cast<float>(1 - std::pow(0.999, 10.0));
         d.m = b1 * d.m + (1 - b1) * d.a;
         d.v = b2 * d.v + (1 - b2) * d.a * d.a;
         d.y -= lr * (d.m / c1) / ((d.v / c2).sqrt() + eps);
       },
       7, adam_program},
  };
}

void bench_engine(benchmark::State& st, const OpBench& op, bool jit) {
  std::string kernel;
  auto b = build(jit, op.graph, op.program, &kernel);
  if (!b) {
    st.SkipWithError("build failed");
    return;
  }
  st.SetLabel(kernel);
  for (auto _ : st) b->ex->run();
  st.SetBytesProcessed(st.iterations() * op.streams * 4 * N);
  if (jit) {
    std::string ref_kernel;
    auto r = build(false, op.graph, op.program, &ref_kernel);
    auto d = std::make_unique<EigenData>();
    const double t_jit = best_time([&] { b->ex->run(); });
    st.counters["ref_x"] = best_time([&] { r->ex->run(); }) / t_jit;
    st.counters["eigen_x"] = best_time([&] {
                               op.eigen(*d);
                               benchmark::DoNotOptimize(d->y.data());
                             }) /
                             t_jit;
  }
}

void bench_eigen(benchmark::State& st, const OpBench& op) {
  auto d = std::make_unique<EigenData>();
  for (auto _ : st) {
    op.eigen(*d);
    benchmark::DoNotOptimize(d->y.data());
  }
  st.SetBytesProcessed(st.iterations() * op.streams * 4 * N);
}

// A chain of elementwise ops (an LSTM-like gate: 6 instructions, 15 arrays of N floats read or
// written one by one) that chain-fusion makes one CALC (3 arrays), timed fused; unfused_x: how
// many times faster than the same chain op by op (opt level 0). Both JIT at the best level.
void bench_chain(benchmark::State& st) {
  auto record = [](Graph& g) {
    Var a = g.input("a", {N}), b = g.input("b", {N});
    g.output(add(sigmoid(a) * tanh(b), scale(a, 0.5f), 1.f, -1.f) * a, "y");
  };
  std::unique_ptr<BenchProgram> fused = bench_program(record, JitConfig{true, Isa::AVX512}, 1);
  std::unique_ptr<BenchProgram> chain = bench_program(record, JitConfig{true, Isa::AVX512}, 0);
  if (!fused || !chain || fused->ex->program().code().size() != 1) {
    st.SkipWithError("build failed, or the chain was not fused");
    return;
  }
  st.SetLabel(fused->ex->kernel_name(0));
  for (auto _ : st) fused->ex->run();
  st.SetBytesProcessed(st.iterations() * 3 * 4 * N);
  st.counters["unfused_x"] = best_time([&] { chain->ex->run(); }) / best_time([&] { fused->ex->run(); });
}

const int registered = [] {
  benchmark::RegisterBenchmark("BM_CALC_chain_1M/jit", bench_chain)->Unit(benchmark::kMicrosecond);
  for (const OpBench& op : ops()) {
    benchmark::RegisterBenchmark(("BM_" + op.name + "/jit").c_str(), [op](benchmark::State& st) { bench_engine(st, op, true); })
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("BM_" + op.name + "/ref").c_str(), [op](benchmark::State& st) { bench_engine(st, op, false); })
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("BM_" + op.name + "/eigen").c_str(), [op](benchmark::State& st) { bench_eigen(st, op); })
        ->Unit(benchmark::kMicrosecond);
  }
  return 0;
}();

}  // namespace
}  // namespace nnasm
