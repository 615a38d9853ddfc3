// The classic expression Y = X1 + softmax(relu(X2 + 3·X3)), written with shell functions: it
// records a linear instruction stream, prints it as a listing, then runs it on the reference
// kernels and prints the result. Copy this to start a model of your own.
#include <cstdio>

#include <fmt/format.h>

#include "engine/executor.h"
#include "serialize/listing.h"
#include "shell/shell.h"

using namespace nnasm;

int main() {
  Context ctx;
  Program program(ctx);
  Graph g(program);

  // Shell functions record; nothing is computed here.
  Var x1 = g.input("x1", {2, 4});
  Var x2 = g.input("x2", {2, 4});
  Var x3 = g.input("x3", {2, 4});
  Var y = x1 + softmax(relu(x2 + 3.f * x3));
  g.output(y, "y");
  if (!g.status()) {
    fmt::print(stderr, "{}\n", g.status().message());
    return 1;
  }

  fmt::print("; the recorded instruction stream\n{}\n", program_print(program));

  auto ex = Executor::prepare(program);
  if (!ex) {
    fmt::print(stderr, "error: {}\n", ex.status().message());
    return 1;
  }
  Executor& run = *ex.value();
  const float v1[] = {0, 1, 2, 3, 4, 5, 6, 7};
  const float v2[] = {1, -1, 0.5f, 2, -2, 0, 1, 3};
  const float v3[] = {0.5f, 0.25f, -1, 0, 1, 1, -0.5f, 0.1f};
  for (int i = 0; i < 8; ++i) {
    run.tensor("x1")->f32()[i] = v1[i];
    run.tensor("x2")->f32()[i] = v2[i];
    run.tensor("x3")->f32()[i] = v3[i];
  }
  run.run();

  const float* out = run.tensor("y")->f32();
  fmt::print("y = x1 + softmax(relu(x2 + 3*x3)):\n");
  for (int r = 0; r < 2; ++r) fmt::print("  [{:.6f}]\n", fmt::join(out + 4 * r, out + 4 * r + 4, ", "));
  return 0;
}
