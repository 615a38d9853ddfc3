// Train a multilayer perceptron on Fashion-MNIST, from C++ shell functions to a trained model:
// 784 → 256 → ReLU → 128 → ReLU → 10, softmax cross-entropy, Adam (or SGD with momentum), batch
// 64. The forward, backward and update code are one program; its listing is written next to a
// CSV log and an SVG plot of the training curves (samples/fashion_common.h does the training).
// Copy both files to train a model of your own: change mlp(). After training it prints the test
// accuracy of the trained model with its dense layers in reduced precision (engine/quantize.h:
// quantize_program, what `nnasm quantize` does) next to the f32 one.
//
//   build/samples/fashion_mlp [--epochs 10] [--optimizer adam|sgd] [--lr 0.001] [--seed 1]
//                             [--out-dir .] [--data-dir DIR]
#include "engine/quantize.h"
#include "samples/fashion_common.h"

using namespace nnasm;

namespace {

// The model, written once and recorded twice: at the training batch size and at batch 1.
Var mlp(Var x) {
  Var h = relu(linear(x, 256, {"fc1"}));
  h = relu(linear(h, 128, {"fc2"}));
  return linear(h, 10, {"fc3"});
}

// The share of the test set `p` (logits [batch, 10] from x [batch, 784]) classifies right.
Result<double> test_accuracy(const Program& p, const Dataset& test) {
  auto ex = Executor::prepare(p);
  if (!ex) return ex.status();
  Tensor* x = ex.value()->tensor("x");
  const Tensor* logits = ex.value()->tensor("logits");
  const int64_t batch = x->desc.type.shape[0];
  int64_t right = 0, seen = 0;
  for (int64_t first = 0; first + batch <= test.n; first += batch, seen += batch) {
    std::copy_n(test.images.begin() + first * 784, batch * 784, x->f32());
    ex.value()->run();
    for (int64_t r = 0; r < batch; ++r) {
      const float* row = logits->f32() + r * 10;
      right += std::max_element(row, row + 10) - row == test.labels[first + r];
    }
  }
  return seen ? static_cast<double>(right) / static_cast<double>(seen) : 0.0;
}

// The trained model recorded again for inference, quantized to each type with quantize_program's
// defaults (a synthetic calibration batch, the type's error bound), and its test accuracy.
Status quantized_accuracy(Executor& trained, const Dataset& test) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  g.output(mlp(g.input("x", {500, 784})), "logits");
  NNASM_TRY(g.status());
  {
    auto ex = Executor::prepare(p);  // gives the params storage to copy the trained values into
    if (!ex) return ex.status();
    NNASM_TRY(samples::copy_trained(trained, p));
  }
  Result<double> f32 = test_accuracy(p, test);
  if (!f32) return f32.status();
  fmt::print("test accuracy with f32 weights: {:.2f}%\n", 100 * *f32);
  for (QuantType t : {QuantType::BF16, QuantType::INT8}) {
    Context qctx;
    Program q(qctx);
    QuantizeOptions o;
    o.to = t;
    Result<QuantizeReport> rep = quantize_program(p, o, &q);
    if (!rep) {
      fmt::print("test accuracy with {} weights: none ({})\n", quant_type_name(t), rep.status().message());
      continue;
    }
    Result<double> acc = test_accuracy(q, test);
    if (!acc) return acc.status();
    size_t reduced = 0;
    for (const QuantizedLayer& l : rep->layers) reduced += l.chosen != "f32";
    fmt::print("test accuracy with {} weights: {:.2f}% ({} of {} layers, weights {} -> {} bytes)\n",
               quant_type_name(t), 100 * *acc, reduced, rep->layers.size(), rep->weight_bytes_before,
               rep->weight_bytes_after);
  }
  return Status::ok();
}

}  // namespace

int main(int argc, char** argv) {
  return samples::fashion_main(argc, argv, {"fashion_mlp", "Fashion-MNIST MLP (nnasm)", "784-256-128-10", Shape{784}, mlp,
                                           quantized_accuracy});
}
