// A small trainer for classification programs: shuffled mini-batches, epochs, accuracy on the
// fly, evaluation on a test set in inference mode, progress on a terminal. It only moves data
// into the program's input tensors and runs the prepared sections; the model, its loss and its
// optimizer are all instructions in the program (see engine/optimizer.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/executor.h"
#include "engine/progress.h"

namespace nnasm {

// n samples of `sample_size` floats each, and one class id per sample. Not owned.
struct LabeledData {
  const float* x = nullptr;
  const int32_t* labels = nullptr;
  int64_t n = 0;
  int64_t sample_size = 0;
};

struct TrainOptions {
  int epochs = 10;
  uint64_t seed = 1;  // shuffling
  // Tensors of the program: the batch input (f32 [batch, ...]), the class ids (i32 [batch]), the
  // logits (f32 [batch, classes]) and the scalar loss.
  std::string input = "x", labels = "labels", logits = "logits", loss = "loss";
};

struct EpochLog {
  int epoch = 0;  // 1-based
  double train_loss = 0, train_acc = 0, test_acc = 0;
  double seconds = 0, samples_per_sec = 0;
};

// Fraction of `data` whose argmax logit equals the label, running the forward section in
// inference mode batch by batch (a last partial batch is padded, its padding ignored). Restores
// the executor's mode. Errors: missing or mis-shaped tensors, sample size mismatch.
Result<double> evaluate(Executor& ex, const LabeledData& data, const TrainOptions& opt);

// Trains for opt.epochs epochs of shuffled full batches (a last partial batch is dropped, as
// PyTorch's drop_last), evaluating on `test` after each; reports through `progress` if given.
// Requires a program with backward and update sections (make_trainable). Errors as evaluate.
Result<std::vector<EpochLog>> train(Executor& ex, const LabeledData& train, const LabeledData& test,
                                    const TrainOptions& opt, Progress* progress);

}  // namespace nnasm
