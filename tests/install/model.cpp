// A C++ consumer of the installed nnasm (tests/install/consumer_test.sh builds it with CMake and
// with pkg-config): y = softmax(relu(linear(x, 16))) recorded with shell functions, prepared and
// run, then checked against a plain loop over the same weights. Prints "model: ok <checksum>".
#include <cmath>
#include <cstdio>

#include <nnasm/engine/executor.h>
#include <nnasm/serialize/listing.h>
#include <nnasm/shell/shell.h>

using namespace nnasm;

int main() {
  constexpr int kRows = 2, kIn = 8, kOut = 16;
  Context ctx;
  Program program(ctx);
  Graph g(program);
  Var x = g.input("x", {kRows, kIn});
  g.output(softmax(relu(linear(x, kOut))), "y");
  if (!g.status()) return std::fprintf(stderr, "model: %s\n", g.status().message().c_str()), 1;
  auto ex = Executor::prepare(program);
  if (!ex) return std::fprintf(stderr, "model: %s\n", ex.status().message().c_str()), 1;
  Executor& e = *ex.value();
  float* in = e.tensor("x")->f32();
  for (int i = 0; i < kRows * kIn; ++i) in[i] = 0.125f * float(i % 7) - 0.25f;
  e.run();

  // The oracle: the same weights (he_normal w0 : f32[8,16], zero b0) through a plain loop.
  const float* w = e.tensor("w0")->f32();
  const float* b = e.tensor("b0")->f32();
  const float* y = e.tensor("y")->f32();
  double checksum = 0, worst = 0;
  for (int r = 0; r < kRows; ++r) {
    double h[kOut], max = 0, sum = 0;
    for (int j = 0; j < kOut; ++j) {
      double acc = b[j];
      for (int i = 0; i < kIn; ++i) acc += double(in[r * kIn + i]) * w[i * kOut + j];
      h[j] = acc > 0 ? acc : 0;
      max = std::fmax(max, h[j]);
    }
    for (int j = 0; j < kOut; ++j) sum += h[j] = std::exp(h[j] - max);
    for (int j = 0; j < kOut; ++j) {
      worst = std::fmax(worst, std::fabs(h[j] / sum - y[r * kOut + j]));
      checksum += y[r * kOut + j];
    }
  }
  if (!(worst < 1e-5) || std::fabs(checksum - kRows) > 1e-4) {
    std::fprintf(stderr, "model: y differs from the plain loop by %g (rows sum to %.6f, not %d)\n", worst,
                 checksum, kRows);
    return 1;
  }
  std::printf("model: ok %.6f\n%s", checksum, program_print(program).c_str());
  return 0;
}
