// CONV2D alone at the shapes small game and audio models use (batch 1, NCHW, 3×3, pad 1):
// 3→16 channels on 32×32, 16→16 on 16×16, and a depthwise 3×3 over 32 channels on 32×32, and at
// ResNet-18's last two stages (256 channels on 14×14, 512 on 7×7); JIT at the best level, with
// the kernel names as the label. oneDNN's rows for the same shapes (BM_conv_*_onednn) are in
// baselines_onednn.cpp. BM_conv_*_direct times the direct kernel's row mode alone
// (ops/conv/conv_direct.h, with its padding copy, as CONV2D runs it) on small maps and 1×1s, where
// CONV2D takes im2col + GEMM or flat mode instead, so that the choices are measured in one run.
#include <benchmark/benchmark.h>

#include <vector>

#include "jit/cpu.h"
#include "ops/conv/conv_direct.h"
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

void run_direct(benchmark::State& st, const baselines::ConvShape& s) {
  const Isa isa = cpu_info().best;
  DirectConv d{s.c, s.o, s.h, s.w, s.k, s.k, 1, 1};
  d.bias = true;
  d.lanes = isa == Isa::AVX512 ? 16 : 8;
  KernelCache cache;
  Result<std::shared_ptr<const JitKernel>> k = direct_conv_kernel(d, isa, cache);
  if (!k || !k.value()) {
    st.SkipWithError("no direct kernel at this level");
    return;
  }
  std::vector<float> x(static_cast<size_t>(s.c * s.h * s.w), 0.5f), w(static_cast<size_t>(s.o * s.c * s.k * s.k), 0.01f),
      b(static_cast<size_t>(s.o), 0.1f), y(static_cast<size_t>(s.o * s.h * s.w)), xp(static_cast<size_t>(d.padded_floats()));
  st.SetLabel(k.value()->name());
  for (auto _ : st) {
    direct_conv_pad(d, x.data(), s.h, s.w, s.pad, s.pad, xp.data());
    call_kernel(k.value()->fn(), {xp.data(), w.data(), b.data()}, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  baselines::set_flops(st, s.flops());
}

const int registered = [] {
  for (const baselines::ConvShape& s : baselines::conv_shapes()) {
    benchmark::RegisterBenchmark(("BM_conv_" + s.name + "_nnasm").c_str(), [s](benchmark::State& st) { run_conv(st, s); })
        ->Unit(benchmark::kMicrosecond);
    if (s.groups == 1 && (s.w <= 16 || s.k == 1))
      benchmark::RegisterBenchmark(("BM_conv_" + s.name + "_direct").c_str(), [s](benchmark::State& st) { run_direct(st, s); })
          ->Unit(benchmark::kMicrosecond);
  }
  return 0;
}();

}  // namespace
}  // namespace nnasm
