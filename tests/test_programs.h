// Small programs shared by the engine tests: built with shell functions, so each test states the
// model the way a user would.
#pragma once
#include <memory>

#include "engine/executor.h"
#include "shell/shell.h"

namespace nnasm {

// One program that uses every op of the first op set at least once; inputs "a" f32[3,5] and
// "b" f32[5], output "y".
inline Var record_every_op(Graph& g) {
  Var a = g.input("a", {3, 5});
  Var b = g.input("b", {5});
  Var w = g.param("w", {5, 4}, {InitKind::UNIFORM, -1, 1});
  Var bias = g.param("bias", {4}, {InitKind::CONSTANT, 0.5, 0});
  Var h = linear(a, w, bias);                                   // [3,4]
  Var m = matmul(a, transpose(a, {1, 0}));                       // [3,3]
  Var m2 = matmul(a, a, false, true);                            // [3,3]
  Var e = add(a, b, 0.5f, 2.f) - b * a / (abs(b) + fill(b, 1)); // [3,5]
  Var u = maximum(e, minimum(a, b));
  u = scale(neg(u), 0.5f) + exp(tanh(u)) + log(square(u) + fill(u, 1)) + sqrt(abs(u));
  u = relu(u) + leakyrelu(u, 0.1f) + elu(u) + clipped_relu(u, 2) + sigmoid(u) + gelu(u) + gelu(u, true) + swish(u, 1.5f);
  Var r = reduce_sum(u, 1, true) + reduce_mean(u, -1, true) + reduce_max(u, 1, true);  // [3,1]
  Var s = softmax(u) + logsoftmax(u, 0) + r;                                           // [3,5]
  Var c = concat({s, copy(s)}, 1);                                                      // [3,10]
  Var z = slice(reshape(c, {3, 2, 5}), 1, 0, 1);                                        // [3,1,5]
  Var y = reshape(z, {3, 5}) + slice(concat({h, h}, 1), 1, 1, 6) + reduce_sum(m - m2, 1, true);  // [3,5]
  g.output(y, "y");
  return y;
}

}  // namespace nnasm
