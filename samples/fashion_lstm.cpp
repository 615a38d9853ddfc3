// Train an LSTM on Fashion-MNIST read as a sequence: each image is 28 steps of 28 pixels, its rows
// from top to bottom (x [28, batch, 28]); an LSTM with 128 hidden units reads them, and a linear
// layer turns its last h into 10 logits. Softmax cross-entropy, Adam 1e-3 with cosine decay,
// batch 64, 10 epochs (samples/fashion_common.h does the training). Then the trained weights go
// into the same model recorded to step once per run (RecurrentOptions::step: x is one row [1, 28],
// the LSTM's h and c are state tensors kept between runs), as a game would run it once per frame:
// the sample checks that 28 steps give the whole-sequence model's logits and prints the median
// time of one step.
//
//   build/samples/fashion_lstm [--epochs 10] [--optimizer adam|sgd] [--lr 0.001] [--seed 1]
//                              [--out-dir .] [--data-dir DIR]
#include <cmath>

#include "samples/fashion_common.h"

using namespace nnasm;

namespace {

constexpr int64_t ROWS = 28, COLS = 28, HIDDEN = 128;

RecurrentOptions lstm_options(bool step) {
  RecurrentOptions o;
  o.name = "lstm";  // @lstm.l0.w, .r, .b: the same names in both programs
  o.step = step;
  return o;
}

// x [batch, 28, 28] (the images as the loader gives them) → logits [batch, 10].
Var classifier(Var x) {
  const Recurrent r = lstm(transpose(x, {1, 0, 2}), HIDDEN, lstm_options(false));  // steps = rows
  return linear(reshape(r.h, {-1, HIDDEN}), 10, {"fc"});                          // h [1, batch, 128]
}

// The step program with the trained weights: checks it against the batch-64 model on the first
// test batch, then times one step.
Status report_step(Executor& trained, const Dataset& test) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var row = g.input("x", {1, COLS});
  g.output(linear(lstm(row, HIDDEN, lstm_options(true)).y, 10, {"fc"}), "logits");
  if (!g.status()) return g.status();
  auto made = Executor::prepare(p);
  if (!made) return made.status();
  Executor& step = *made.value();
  NNASM_TRY(samples::copy_trained(trained, p));
  float* x = static_cast<float*>(step.data(step.program().find("x")));
  const float* logits = static_cast<const float*>(step.data(step.program().find("logits")));

  // The first test batch through the trained (whole-sequence, batch-64) program.
  const Program& tp = trained.program();
  const TensorId tx = tp.find("x"), tl = tp.find("labels"), tlogits = tp.find("logits");
  const int64_t batch = tp.desc(tx).type.shape[0];
  if (test.n < batch) return Status::errorf("the test set has {} images, fewer than a batch", test.n);
  std::copy(test.images.begin(), test.images.begin() + batch * ROWS * COLS, static_cast<float*>(trained.data(tx)));
  std::copy(test.labels.begin(), test.labels.begin() + batch, static_cast<int32_t*>(trained.data(tl)));
  trained.run();
  const float* want = static_cast<const float*>(trained.data(tlogits));
  double worst = 0;
  for (int64_t b = 0; b < batch; ++b) {
    step.reset_state();  // a new sequence
    for (int64_t r = 0; r < ROWS; ++r) {
      std::copy_n(&test.images[static_cast<size_t>((b * ROWS + r) * COLS)], COLS, x);
      step.run();
    }
    for (int k = 0; k < 10; ++k) worst = std::max(worst, std::fabs(double(logits[k]) - want[b * 10 + k]));
  }
  // Generated kernels may sum in another order at batch 1 than at batch 64: close, not bitwise.
  if (!(worst < 1e-3)) return Status::errorf("the step program's logits differ from the model's by {}", worst);
  fmt::print("step program (one row per run): {} test images give the model's logits (max difference {:.1e})\n",
             batch, worst);

  constexpr int RUNS = 28 * 1000;
  std::vector<double> us;
  us.reserve(RUNS);
  for (int k = 0; k < RUNS; ++k) {
    const int64_t image = (k / ROWS) % test.n, r = k % ROWS;
    if (r == 0) step.reset_state();
    std::copy_n(&test.images[static_cast<size_t>((image * ROWS + r) * COLS)], COLS, x);
    const auto t0 = std::chrono::steady_clock::now();
    step.run();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  fmt::print("per-frame step latency at batch 1: {:.2f} us (median of {} runs)\n", samples::median(std::move(us)), RUNS);
  return Status::ok();
}

}  // namespace

int main(int argc, char** argv) {
  return samples::fashion_main(argc, argv,
                               {"fashion_lstm", "Fashion-MNIST LSTM(128), rows as steps (nnasm)", "LSTM(128) over 28 rows",
                                Shape{ROWS, COLS}, classifier, report_step});
}
