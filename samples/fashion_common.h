// What the Fashion-MNIST samples share: the command line, recording the training program around
// a model function, training, the CSV log and SVG plot, and the batch-1 latency of the trained
// model recorded again at batch 1. A sample is its model and a call of fashion_main. Header-only,
// so that a sample copied out of the tree takes it along.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "engine/executor.h"
#include "engine/optimizer.h"
#include "engine/quantize.h"
#include "engine/trainer.h"
#include "serialize/atomic_file.h"
#include "serialize/csv_log.h"
#include "serialize/fashion_mnist.h"
#include "serialize/listing.h"
#include "serialize/model_file.h"
#include "serialize/svg_plot.h"
#include "shell/shell.h"

namespace nnasm::samples {

// [batch, sample...]: a batch of samples shaped `sample`.
inline Shape batched(int64_t batch, const Shape& sample) {
  Shape s;
  s.rank = sample.rank + 1;
  s[0] = batch;
  for (int d = 0; d < sample.rank; ++d) s[d + 1] = sample[d];
  return s;
}

// Copies the params and state of `trained` into the tensors of the same names of `p`, prepared
// over a context of its own: a model recorded again (at batch 1, stepped per frame) runs with the
// trained values. The state a run carries to the next (Program::carried_state, a recurrent
// layer's h stepped per frame) is the new program's own and stays as it is.
inline Status copy_trained(const Executor& trained, Program& p) {
  Context& ctx = *Context::of(p);
  const std::vector<TensorId> carried = p.carried_state();
  for (TensorId id : p.tensors()) {
    const TensorDesc& d = p.desc(id);
    if (d.role != Role::PARAM && d.role != Role::STATE) continue;
    if (std::find(carried.begin(), carried.end(), id) != carried.end()) continue;
    const Tensor* from = trained.tensor(d.name);
    if (!from || !(from->desc.type == d.type)) return Status::errorf("no trained values for @{}", d.name);
    std::copy(from->f32(), from->f32() + from->numel(), ctx.at(id).f32());
  }
  ctx.params_changed();
  return Status::ok();
}

// The median of `times` (destroys their order).
inline double median(std::vector<double> times) {
  std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2), times.end());
  return times[times.size() / 2];
}

// Records `model` on a [1, sample_shape...] input named x (softmax on top), copies the params of
// `trained` into it by name, and returns the median time of one forward run in microseconds.
inline Result<double> latency_batch1(Executor& trained, Shape sample_shape, const std::function<Var(Var)>& model,
                                     int runs = 2000) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  g.output(softmax(model(g.input("x", batched(1, sample_shape)))), "probs");
  if (!g.status()) return g.status();
  auto ex = Executor::prepare(p);
  if (!ex) return ex.status();
  NNASM_TRY(copy_trained(trained, p));
  std::vector<double> us;
  for (int rep = 0; rep < runs; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    ex.value()->run();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(std::move(us));
}

// The share of the test set `p` (logits [batch, 10] from x [batch, 28·28 values]) classifies right.
inline Result<double> test_accuracy(const Program& p, const Dataset& test) {
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

// Records `model` for inference at batch 500, copies the params of `trained` into it, quantizes
// it to bf16 and to int8 with quantize_program's defaults (a synthetic calibration batch, the
// type's error bound: what `nnasm quantize` does) and prints each one's test accuracy next to
// the f32 one, with how many layers changed and the weights' bytes.
inline Status quantized_accuracy(Executor& trained, const Dataset& test, Shape sample_shape,
                                 const std::function<Var(Var)>& model) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  g.output(model(g.input("x", batched(500, sample_shape))), "logits");
  NNASM_TRY(g.status());
  {
    auto ex = Executor::prepare(p);  // gives the params storage to copy the trained values into
    if (!ex) return ex.status();
    NNASM_TRY(copy_trained(trained, p));
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
    if (!rep) return rep.status().with_prefix(fmt::format("quantizing to {}: ", quant_type_name(t)));
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

// Writes PREFIX.csv (one row per epoch) and PREFIX.svg (loss and accuracy curves).
inline Status write_training_log(const std::string& prefix, const std::string& title, const std::vector<EpochLog>& log) {
  std::vector<std::vector<double>> rows;
  PlotSeries loss{"train loss", {}, ""}, train_acc{"train accuracy", {}, ""}, test_acc{"test accuracy", {}, ""};
  for (const EpochLog& l : log) {
    rows.push_back({static_cast<double>(l.epoch), l.train_loss, l.train_acc, l.test_acc, l.seconds});
    loss.points.emplace_back(l.epoch, l.train_loss);
    train_acc.points.emplace_back(l.epoch, 100 * l.train_acc);
    test_acc.points.emplace_back(l.epoch, 100 * l.test_acc);
  }
  NNASM_TRY(csv_write(prefix + ".csv", {"epoch", "train_loss", "train_acc", "test_acc", "seconds"}, rows));
  PlotSpec plot{title, "epoch", {{"loss", "cross-entropy", {loss}}, {"accuracy", "%", {train_acc, test_acc}}}};
  return svg_plot_write(prefix + ".svg", plot);
}

struct FashionSample {
  std::string name;                  // files NAME.nnasm, NAME.csv, NAME.svg; messages "NAME: error: …"
  std::string title;                 // the plot's title
  std::string description;           // e.g. "784-256-128-10"
  Shape sample_shape;                // one image as the model reads it: {784} or {1, 28, 28}
  std::function<Var(Var)> model;     // logits [batch, 10] from x [batch, sample_shape...]
  // Optional, after training and the batch-1 latency: the sample's own figures from the trained
  // executor and the test set (fashion_lstm's per-frame step latency, quantized_accuracy).
  std::function<Status(Executor& trained, const Dataset& test)> report = nullptr;
};

// The sample's main: options --epochs --optimizer --lr --seed --out-dir --data-dir; trains with
// batch 64 and cosine decay to zero; prints the final line "test accuracy: NN.N%". Exit code 0,
// 1 on any error (printed), CLI11's on bad options.
inline int fashion_main(int argc, char** argv, const FashionSample& spec) {
  auto fail = [&](const std::string& msg) {
    fmt::print(stderr, "{}: error: {}\n", spec.name, msg);
    return 1;
  };
  CLI::App app{fmt::format("Train {} on Fashion-MNIST with nnasm", spec.description)};
  int epochs = 10;
  std::string optimizer = "adam", out_dir = ".", data_dir;
  double lr = 0;
  uint64_t seed = 1;
  app.add_option("--epochs", epochs, "Epochs to train")->check(CLI::Range(1, 1000));
  app.add_option("--optimizer", optimizer, "adam or sgd (momentum 0.9)")->check(CLI::IsMember({"adam", "sgd"}));
  app.add_option("--lr", lr, "Learning rate (default: 0.001 for adam, 0.01 for sgd)");
  app.add_option("--seed", seed, "Seed for initialization and shuffling");
  app.add_option("--out-dir", out_dir, "Where the listing, model file, CSV log and SVG plot go");
  app.add_option("--data-dir", data_dir, "Fashion-MNIST IDX files (default: $NNASM_FASHION_MNIST or the Debian package's)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  Dataset train_set, test_set;
  if (Status s = fashion_mnist_load(data_dir, true, &train_set); !s) return fail(s.message());
  if (Status s = fashion_mnist_load(data_dir, false, &test_set); !s) return fail(s.message());

  // Record the training program: model, loss, then backward and update code.
  constexpr int64_t BATCH = 64;
  Context ctx(seed);
  Program program(ctx);
  Graph g(program);
  Var x = g.input("x", batched(BATCH, spec.sample_shape));
  Var labels = g.input("labels", {BATCH}, DType::I32);
  Var logits = spec.model(x);
  g.output(logits, "logits");
  g.output(softmax_ce(logits, labels), "loss");
  if (!g.status()) return fail(g.status().message());
  OptimizerSpec opt = optimizer == "adam" ? adam(lr > 0 ? lr : 1e-3) : sgd(lr > 0 ? lr : 0.01, 0.9);
  // Cosine decay to zero over the run: the last epochs fine-tune instead of bouncing around.
  opt.schedule.kind = LrSchedule::Kind::COSINE;
  opt.schedule.total = epochs * (train_set.n / BATCH);
  if (Status s = make_trainable(program, program.find("loss"), opt); !s) return fail(s.message());

  const std::string prefix = out_dir + "/" + spec.name;
  if (Status s = write_file_atomic(prefix + ".nnasm", program_print(program)); !s) return fail(s.message());

  auto ex = Executor::prepare(program);
  if (!ex) return fail(ex.status().message());
  const int64_t size = spec.sample_shape.numel();
  if (size != 784) return fail(fmt::format("a sample of {} floats; Fashion-MNIST images have 784", size));
  const LabeledData train_data{train_set.images.data(), train_set.labels.data(), train_set.n, size};
  const LabeledData test_data{test_set.images.data(), test_set.labels.data(), test_set.n, size};
  TrainOptions topt;
  topt.epochs = epochs;
  topt.seed = seed;
  Progress progress(stdout);
  fmt::print("training {} on {} images: {}{}, lr {} with cosine decay, batch {}, {} epochs\n", spec.description,
             train_set.n, optimizer, optimizer == "sgd" ? " (momentum 0.9)" : "", opt.lr, BATCH, epochs);
  std::fflush(stdout);
  auto log = train(*ex.value(), train_data, test_data, topt, &progress);
  if (!log) return fail(log.status().message());
  if (Status s = write_training_log(prefix, spec.title, log.value()); !s) return fail(s.message());
  // The trained model, optimizer state included: `nnasm info|dump|run|bench` read it, and training
  // can resume from it (ModelSaveOptions::run_index keeps the dropout stream in step).
  if (Status s = model_save(program, prefix + ".nnm", {ex.value()->run_index()}); !s) return fail(s.message());

  Result<double> us = latency_batch1(*ex.value(), spec.sample_shape, spec.model);
  if (!us) return fail(us.status().message());
  fmt::print("inference latency at batch 1: {:.1f} us (median of 2000 runs)\n", *us);
  if (spec.report)
    if (Status s = spec.report(*ex.value(), test_set); !s) return fail(s.message());
  fmt::print("wrote {0}.nnasm (the training program), {0}.nnm (the trained model), {0}.csv and {0}.svg\n", prefix);
  fmt::print("test accuracy: {:.1f}%\n", 100 * log.value().back().test_acc);
  return 0;
}

}  // namespace nnasm::samples
