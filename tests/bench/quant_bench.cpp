// Issue 30's reduced-precision MLP: the batch-1 784-256-128-10 (make run's model) with f32
// weights (LINEAR), with bf16 ones (LINEAR_BF16, every layer) and with i8 ones (LINEAR_I8), one
// thread, the three in alternating blocks (quant_bench.h's alternate: nnasm_bf16_ratio and
// nnasm_i8_ratio are their times over f32's; the targets are 0.65 and 0.5 or less). The layer against oneDNN is BM_quant_layer_vs_onednn
// (baselines_onednn.cpp).
#include "tests/bench/quant_bench.h"

namespace nnasm::baselines {
namespace {

void BM_quant_mlp(benchmark::State& st) {
  auto f32 = listing_program("tests/bench/quant/mlp_f32_1x784.nnasm");
  auto bf16 = listing_program("tests/bench/quant/mlp_bf16_1x784.nnasm");
  auto i8 = listing_program("tests/bench/quant/mlp_i8_1x784.nnasm");
  if (!f32 || !bf16 || !i8) {
    st.SkipWithError("cannot prepare tests/bench/quant/mlp_{f32,bf16,i8}_1x784.nnasm (run from the repository root)");
    return;
  }
  st.SetLabel(first_layer(*f32) + " vs " + first_layer(*bf16) + " vs " + first_layer(*i8));
  alternate(st, {{"nnasm_f32", [&] { f32->ex->run(); }},
                 {"nnasm_bf16", [&] { bf16->ex->run(); }},
                 {"nnasm_i8", [&] { i8->ex->run(); }}});
}
BENCHMARK(BM_quant_mlp)->Iterations(2000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace nnasm::baselines
