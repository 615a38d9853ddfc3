// CONV2D alone at the shapes small game and audio models use (batch 1, NCHW, 3×3, pad 1):
// 3→16 channels on 32×32, 16→16 on 16×16, and a depthwise 3×3 over 32 channels on 32×32; JIT at
// the best level, with the kernel names as the label. oneDNN's rows for the same shapes
// (BM_conv_*_onednn) are in baselines_onednn.cpp.
#include <benchmark/benchmark.h>

#include "tests/bench/baselines.h"
#include "tests/bench/bench_program.h"
#include "tests/bench/conv_shapes.h"

namespace nnasm {
namespace {

void run_conv(benchmark::State& st, const baselines::ConvShape& s) {
  auto b = bench_program([&](Graph& g) {
    Conv2dOptions o;
    o.pad = {s.pad, s.pad};
    o.groups = s.groups;
    g.output(conv2d(g.input("x", {1, s.c, s.h, s.w}), s.o, {s.k, s.k}, o), "y");
  });
  if (!b) {
    st.SkipWithError("build failed");
    return;
  }
  std::string kernels;
  for (size_t i = 0; i < b->ex->program().code().size(); ++i) kernels += (i ? " " : "") + std::string(b->ex->kernel_name(i));
  st.SetLabel(kernels);
  for (auto _ : st) b->ex->run();
  baselines::set_flops(st, s.flops());
}

const int registered = [] {
  for (const baselines::ConvShape& s : baselines::conv_shapes())
    benchmark::RegisterBenchmark(("BM_conv_" + s.name + "_nnasm").c_str(), [s](benchmark::State& st) { run_conv(st, s); })
        ->Unit(benchmark::kMicrosecond);
  return 0;
}();

}  // namespace
}  // namespace nnasm
