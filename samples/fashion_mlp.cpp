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
#include "samples/fashion_common.h"

using namespace nnasm;

namespace {

// The model, written once and recorded twice: at the training batch size and at batch 1.
Var mlp(Var x) {
  Var h = relu(linear(x, 256, {"fc1"}));
  h = relu(linear(h, 128, {"fc2"}));
  return linear(h, 10, {"fc3"});
}

}  // namespace

int main(int argc, char** argv) {
  return samples::fashion_main(argc, argv, {"fashion_mlp", "Fashion-MNIST MLP (nnasm)", "784-256-128-10", Shape{784}, mlp,
                                           [](Executor& trained, const Dataset& test) {
                                             return samples::quantized_accuracy(trained, test, Shape{784}, mlp);
                                           }});
}
