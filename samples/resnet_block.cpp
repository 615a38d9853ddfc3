// A ResNet basic block written with shell functions, for inference at batch 1:
//
//   y = relu(bn2(conv2(relu(bn1(conv1(x))))) + x)     conv 3×3, 16 channels, pad 1, no bias
//
// It prints the listing as recorded, then as the optimizer rewrites it for prepare (-O1): each
// BATCHNORM2D folded into the convolution before it (bn-fold: the weights and bias are computed
// from γ, β and the running statistics by a few small instructions), the first ReLU fused into
// that convolution's store (act-fusion), and the residual ADD with its ReLU one CALC
// (chain-fusion). Then it runs both programs on the same input and prints how far apart they
// are and how long each takes. Copy this to start a convolutional model of your own.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "engine/executor.h"
#include "engine/passes/pass.h"
#include "serialize/listing.h"
#include "shell/shell.h"

using namespace nnasm;

namespace {

Var conv_bn(Var x, const std::string& name) {
  Conv2dOptions c;
  c.name = name;
  c.pad = {1, 1};
  c.bias = false;
  BatchNormOptions b;
  b.name = name + "_bn";
  return batchnorm2d(conv2d(x, 16, {3, 3}, c), b);
}

Var basic_block(Var x) {
  Var h = relu(conv_bn(x, "conv1"));
  return relu(conv_bn(h, "conv2") + x);
}

int fail(const std::string& msg) {
  fmt::print(stderr, "resnet_block: error: {}\n", msg);
  return 1;
}

// Median microseconds of one forward run.
double median_us(Executor& ex, int runs = 500) {
  std::vector<double> us;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    ex.run();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(us.begin(), us.begin() + static_cast<std::ptrdiff_t>(us.size() / 2), us.end());
  return us[us.size() / 2];
}

}  // namespace

int main() {
  Context ctx(1);
  Program program(ctx);
  Graph g(program);
  g.output(basic_block(g.input("x", {1, 16, 32, 32})), "y");
  if (!g.status()) return fail(g.status().message());
  fmt::print("; the block as recorded\n{}\n", program_print(program));

  // What prepare runs at -O1, printed with the optimizer's reasons.
  Program optimized = program;
  OptimizeReport report;
  if (Status s = optimize(optimized, 1, &report); !s) return fail(s.message());
  fmt::print("; as prepare runs it: {} -> {} instructions\n{}\n", report.instructions_before, report.instructions_after,
             program_print(optimized, [&](size_t i) { return optimized.code()[i].note; }));

  // Both versions on one input, the running statistics set to something other than 0 and 1 so
  // that the fold has work to do.
  std::vector<float> out[2];
  double us[2];
  for (int level : {0, 1}) {
    ctx.set_opt_level(level);
    auto ex = Executor::prepare(program);
    if (!ex) return fail(ex.status().message());
    for (const char* bn : {"conv1_bn", "conv2_bn"}) {
      Tensor* mean = ex.value()->tensor(fmt::format("{}.running_mean", bn));
      Tensor* var = ex.value()->tensor(fmt::format("{}.running_var", bn));
      if (!mean || !var) return fail("no running statistics");
      for (int64_t c = 0; c < mean->numel(); ++c) {
        mean->f32()[c] = 0.1f * static_cast<float>(c % 5) - 0.2f;
        var->f32()[c] = 0.5f + 0.1f * static_cast<float>(c % 7);
      }
    }
    Tensor* x = ex.value()->tensor("x");
    for (int64_t i = 0; i < x->numel(); ++i) x->f32()[i] = std::sin(0.01f * static_cast<float>(i));
    ex.value()->run();
    const Tensor* y = ex.value()->tensor("y");
    out[level].assign(y->f32(), y->f32() + y->numel());
    us[level] = median_us(*ex.value());
  }
  double diff = 0;
  for (size_t i = 0; i < out[0].size(); ++i) diff = std::max(diff, static_cast<double>(std::fabs(out[0][i] - out[1][i])));
  fmt::print("largest difference between -O0 and -O1 outputs: {:.3g}\n", diff);
  fmt::print("batch-1 forward: {:.1f} us at -O0, {:.1f} us at -O1 (median of 500 runs)\n", us[0], us[1]);
  return 0;
}
