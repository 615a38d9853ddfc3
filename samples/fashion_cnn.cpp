// Train a LeNet-5-style convolutional network on Fashion-MNIST: 1×28×28 → conv 5×5, 6 channels,
// pad 2 → ReLU → max-pool 2 → conv 5×5, 16 channels → ReLU → max-pool 2 → 120 → ReLU → 84 →
// ReLU → 10, softmax cross-entropy, Adam 1e-3 with cosine decay, batch 64, 10 epochs. The
// optimizer fuses each ReLU into the convolution or LINEAR before it. Prints the final line
// `test accuracy: NN.N%`, then the test accuracy with its layers quantized to bf16 and to int8
// (engine/quantize.h); writes the training program, a CSV log and an SVG plot
// (samples/fashion_common.h does the training). Copy both files and change lenet().
//
//   build/samples/fashion_cnn [--epochs 10] [--optimizer adam|sgd] [--lr 0.001] [--seed 1]
//                             [--out-dir .] [--data-dir DIR]
#include "samples/fashion_common.h"

using namespace nnasm;

namespace {

Var conv(Var x, int64_t channels, const std::string& name, int64_t pad) {
  Conv2dOptions o;
  o.name = name;
  o.pad = {pad, pad};
  return conv2d(x, channels, {5, 5}, o);
}

// x [batch, 1, 28, 28] → logits [batch, 10]. Recorded twice: at batch 64 and at batch 1.
Var lenet(Var x) {
  Var h = max_pool2d(relu(conv(x, 6, "conv1", 2)), {2, 2});  // [b, 6, 14, 14]
  h = max_pool2d(relu(conv(h, 16, "conv2", 0)), {2, 2});      // [b, 16, 5, 5]
  h = reshape(h, {-1, 16 * 5 * 5});
  h = relu(linear(h, 120, {"fc1"}));
  h = relu(linear(h, 84, {"fc2"}));
  return linear(h, 10, {"fc3"});
}

}  // namespace

int main(int argc, char** argv) {
  return samples::fashion_main(argc, argv,
                               {"fashion_cnn", "Fashion-MNIST LeNet-5 (nnasm)", "LeNet-5", Shape{1, 28, 28}, lenet,
                                [](Executor& trained, const Dataset& test) {
                                  return samples::quantized_accuracy(trained, test, Shape{1, 28, 28}, lenet);
                                }});
}
