// Train a multilayer perceptron on Fashion-MNIST, from C++ shell functions to a trained model:
// 784 → 256 → ReLU → 128 → ReLU → 10, softmax cross-entropy, Adam (or SGD with momentum), batch
// 64. The forward, backward and update code are one program; its listing is written next to a
// CSV log and an SVG plot of the training curves. Copy this to train a model of your own.
//
//   build/samples/fashion_mlp [--epochs 10] [--optimizer adam|sgd] [--lr 0.001] [--seed 1]
//                             [--out-dir .] [--data-dir DIR]
#include <algorithm>
#include <chrono>
#include <cstdio>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "engine/executor.h"
#include "engine/optimizer.h"
#include "engine/trainer.h"
#include "serialize/atomic_file.h"
#include "serialize/csv_log.h"
#include "serialize/fashion_mnist.h"
#include "serialize/listing.h"
#include "serialize/svg_plot.h"
#include "shell/shell.h"

using namespace nnasm;

namespace {

// The model, written once and recorded twice: at the training batch size and at batch 1.
Var mlp(Var x) {
  Var h = relu(linear(x, 256, {"fc1"}));
  h = relu(linear(h, 128, {"fc2"}));
  return linear(h, 10, {"fc3"});
}

int fail(const std::string& msg) {
  fmt::print(stderr, "fashion_mlp: error: {}\n", msg);
  return 1;
}

// Median time of one batch-1 forward run, in microseconds, with the trained weights.
Result<double> latency_batch1(Executor& trained) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  g.output(softmax(mlp(g.input("x", {1, 784}))), "probs");
  if (!g.status()) return g.status();
  auto ex = Executor::prepare(p);
  if (!ex) return ex.status();
  for (TensorId id : p.tensors()) {
    const TensorDesc& d = p.desc(id);
    if (d.role != Role::PARAM) continue;
    const Tensor* from = trained.tensor(d.name);
    if (!from || !(from->desc.type == d.type)) return Status::errorf("no trained weights for @{}", d.name);
    std::copy(from->f32(), from->f32() + from->numel(), ctx.at(id).f32());
  }
  std::vector<double> us;
  for (int rep = 0; rep < 2000; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    ex.value()->run();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(us.begin(), us.begin() + static_cast<std::ptrdiff_t>(us.size() / 2), us.end());
  return us[us.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Train an MLP on Fashion-MNIST with nnasm"};
  int epochs = 10;
  std::string optimizer = "adam", out_dir = ".", data_dir;
  double lr = 0;
  uint64_t seed = 1;
  app.add_option("--epochs", epochs, "Epochs to train")->check(CLI::Range(1, 1000));
  app.add_option("--optimizer", optimizer, "adam or sgd (momentum 0.9)")->check(CLI::IsMember({"adam", "sgd"}));
  app.add_option("--lr", lr, "Learning rate (default: 0.001 for adam, 0.01 for sgd)");
  app.add_option("--seed", seed, "Seed for initialization and shuffling");
  app.add_option("--out-dir", out_dir, "Where the listing, CSV log and SVG plot go");
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
  Context ctx(seed);
  Program program(ctx);
  Graph g(program);
  Var x = g.input("x", {64, 784});
  Var labels = g.input("labels", {64}, DType::I32);
  Var logits = mlp(x);
  g.output(logits, "logits");
  g.output(softmax_ce(logits, labels), "loss");
  if (!g.status()) return fail(g.status().message());
  OptimizerSpec opt = optimizer == "adam" ? adam(lr > 0 ? lr : 1e-3) : sgd(lr > 0 ? lr : 0.01, 0.9);
  // Cosine decay to zero over the run: the last epochs fine-tune instead of bouncing around.
  opt.schedule.kind = LrSchedule::Kind::COSINE;
  opt.schedule.total = epochs * (train_set.n / 64);
  if (Status s = make_trainable(program, program.find("loss"), opt); !s) return fail(s.message());

  const std::string listing = out_dir + "/fashion_mlp.nnasm";
  if (Status s = write_file_atomic(listing, program_print(program)); !s) return fail(s.message());

  auto ex = Executor::prepare(program);
  if (!ex) return fail(ex.status().message());
  const LabeledData train_data{train_set.images.data(), train_set.labels.data(), train_set.n, 784};
  const LabeledData test_data{test_set.images.data(), test_set.labels.data(), test_set.n, 784};
  TrainOptions topt;
  topt.epochs = epochs;
  topt.seed = seed;
  Progress progress(stdout);
  fmt::print("training 784-256-128-10 on {} images: {}{}, lr {} with cosine decay, batch 64, {} epochs\n",
             train_set.n, optimizer, optimizer == "sgd" ? " (momentum 0.9)" : "", opt.lr, epochs);
  std::fflush(stdout);
  auto log = train(*ex.value(), train_data, test_data, topt, &progress);
  if (!log) return fail(log.status().message());

  std::vector<std::vector<double>> rows;
  PlotSeries loss{"train loss", {}, ""}, train_acc{"train accuracy", {}, ""}, test_acc{"test accuracy", {}, ""};
  for (const EpochLog& l : log.value()) {
    rows.push_back({static_cast<double>(l.epoch), l.train_loss, l.train_acc, l.test_acc, l.seconds});
    loss.points.emplace_back(l.epoch, l.train_loss);
    train_acc.points.emplace_back(l.epoch, 100 * l.train_acc);
    test_acc.points.emplace_back(l.epoch, 100 * l.test_acc);
  }
  const std::string csv = out_dir + "/fashion_mlp.csv", svg = out_dir + "/fashion_mlp.svg";
  if (Status s = csv_write(csv, {"epoch", "train_loss", "train_acc", "test_acc", "seconds"}, rows); !s)
    return fail(s.message());
  PlotSpec plot{"Fashion-MNIST MLP (nnasm)", "epoch", {{"loss", "cross-entropy", {loss}}, {"accuracy", "%", {train_acc, test_acc}}}};
  if (Status s = svg_plot_write(svg, plot); !s) return fail(s.message());

  Result<double> us = latency_batch1(*ex.value());
  if (!us) return fail(us.status().message());
  fmt::print("inference latency at batch 1: {:.1f} us (median of 2000 runs)\n", *us);
  fmt::print("wrote {} (the training program), {} and {}\n", listing, csv, svg);
  fmt::print("test accuracy: {:.1f}%\n", 100 * log.value().back().test_acc);
  return 0;
}
