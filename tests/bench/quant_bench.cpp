// Issue 30's reduced-precision MLP: the batch-1 784-256-128-10 (make run's model) with f32
// weights (LINEAR) and with bf16 ones (LINEAR_BF16, every layer), one thread, the two in
// alternating blocks (baselines.h's alternate: nnasm_bf16_ratio is bf16's time over f32's; the
// issue's target is 0.65 or less). The layer against oneDNN is BM_quant_layer_vs_onednn
// (baselines_onednn.cpp).
#include "tests/bench/quant_bench.h"

namespace nnasm::baselines {
namespace {

void BM_quant_mlp(benchmark::State& st) {
  auto f32 = listing_program("tests/bench/quant/mlp_f32_1x784.nnasm");
  auto bf16 = listing_program("tests/bench/quant/mlp_bf16_1x784.nnasm");
  if (!f32 || !bf16) {
    st.SkipWithError("cannot prepare tests/bench/quant/mlp_{f32,bf16}_1x784.nnasm (run from the repository root)");
    return;
  }
  st.SetLabel(std::string(f32->ex->kernel_name(0)) + " vs " + bf16->ex->kernel_name(0));
  alternate(st, {{"nnasm_f32", [&] { f32->ex->run(); }}, {"nnasm_bf16", [&] { bf16->ex->run(); }}});
}
BENCHMARK(BM_quant_mlp)->Iterations(2000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace nnasm::baselines
