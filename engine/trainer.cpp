// The training loop: batches in, train_step, statistics out.
#include "engine/trainer.h"

#include <chrono>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "jit/rng.h"

namespace nnasm {
namespace {

struct Bound {
  float* x;
  int32_t* labels;
  const float* logits;
  const float* loss;
  int64_t batch, sample_size, classes;
};

Result<Bound> bind(Executor& ex, const LabeledData& data, const TrainOptions& opt) {
  Tensor *x = ex.tensor(opt.input), *l = ex.tensor(opt.labels), *z = ex.tensor(opt.logits), *loss = ex.tensor(opt.loss);
  if (!x || !l || !z || !loss)
    return Status::errorf("trainer: the program needs tensors %{}, %{}, %{} and %{}", opt.input, opt.labels, opt.logits,
                          opt.loss);
  const Shape &xs = x->desc.type.shape, &zs = z->desc.type.shape;
  if (xs.rank < 1 || x->desc.type.dtype != DType::F32)
    return Status::errorf("trainer: %{} must be f32 [batch, ...], is {}", opt.input, x->desc.type.str());
  const int64_t batch = xs[0];
  if (l->desc.type.dtype != DType::I32 || l->desc.type.shape != Shape{batch})
    return Status::errorf("trainer: %{} must be i32[{}], is {}", opt.labels, batch, l->desc.type.str());
  if (zs.rank != 2 || zs[0] != batch)
    return Status::errorf("trainer: %{} must be f32[{},classes], is {}", opt.logits, batch, z->desc.type.str());
  if (xs.numel() / batch != data.sample_size)
    return Status::errorf("trainer: samples have {} values but %{} takes {} per row", data.sample_size, opt.input,
                          xs.numel() / batch);
  return Bound{x->f32(), l->i32(), z->f32(), loss->f32(), batch, data.sample_size, zs[1]};
}

// Copies samples order[first, first + count) into the bound batch; rows past count are zero.
void load_batch(const Bound& b, const LabeledData& d, const int64_t* order, int64_t count) {
  for (int64_t r = 0; r < b.batch; ++r) {
    float* dst = b.x + r * b.sample_size;
    if (r < count) {
      const int64_t i = order[r];
      std::memcpy(dst, d.x + i * b.sample_size, static_cast<size_t>(b.sample_size) * sizeof(float));
      b.labels[r] = d.labels[i];
    } else {
      std::memset(dst, 0, static_cast<size_t>(b.sample_size) * sizeof(float));
      b.labels[r] = 0;
    }
  }
}

// Rows of the current batch (the first `count`) whose argmax logit is the label.
int64_t correct(const Bound& b, int64_t count) {
  int64_t ok = 0;
  for (int64_t r = 0; r < count; ++r) {
    const float* z = b.logits + r * b.classes;
    int64_t best = 0;
    for (int64_t c = 1; c < b.classes; ++c)
      if (z[c] > z[best]) best = c;
    ok += best == b.labels[r];
  }
  return ok;
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

Result<double> evaluate(Executor& ex, const LabeledData& data, const TrainOptions& opt) {
  Result<Bound> b = bind(ex, data, opt);
  if (!b) return b.status();
  if (data.n <= 0) return Status::error("evaluate: no samples");
  const bool was_training = ex.training();
  ex.set_training(false);
  std::vector<int64_t> order(static_cast<size_t>(data.n));
  std::iota(order.begin(), order.end(), 0);
  int64_t ok = 0;
  for (int64_t first = 0; first < data.n; first += b->batch) {
    const int64_t count = std::min(b->batch, data.n - first);
    load_batch(*b, data, order.data() + first, count);
    ex.run(Section::FORWARD);
    ok += correct(*b, count);
  }
  ex.set_training(was_training);
  return static_cast<double>(ok) / static_cast<double>(data.n);
}

Result<std::vector<EpochLog>> train(Executor& ex, const LabeledData& data, const LabeledData& test,
                                    const TrainOptions& opt, Progress* progress) {
  if (!ex.program().has_section(Section::UPDATE))
    return Status::error("train: the program has no update section (see make_trainable)");
  Result<Bound> b = bind(ex, data, opt);
  if (!b) return b.status();
  const int64_t batches = data.n / b->batch;
  if (batches == 0) return Status::errorf("train: {} samples make no batch of {}", data.n, b->batch);
  std::vector<int64_t> order(static_cast<size_t>(data.n));
  std::iota(order.begin(), order.end(), 0);
  Rng rng(opt.seed * 0x9e3779b97f4a7c15ULL + 1);  // the same shuffles on every platform
  std::vector<EpochLog> log;
  for (int e = 0; e < opt.epochs; ++e) {
    for (int64_t i = data.n - 1; i > 0; --i) std::swap(order[i], order[rng.below(static_cast<uint64_t>(i + 1))]);
    if (progress) progress->begin_epoch(e, opt.epochs, batches);
    NNASM_TRY(ex.set_training(true));
    const double t0 = now();
    double loss_sum = 0;
    int64_t ok = 0;
    for (int64_t k = 0; k < batches; ++k) {
      load_batch(*b, data, order.data() + k * b->batch, b->batch);
      ex.train_step();
      loss_sum += *b->loss;
      ok += correct(*b, b->batch);
      if (progress) {
        const double seen = static_cast<double>((k + 1) * b->batch);
        progress->batch(k, loss_sum / static_cast<double>(k + 1), static_cast<double>(ok) / seen,
                        seen / std::max(1e-9, now() - t0));
      }
    }
    EpochLog l;
    l.epoch = e + 1;
    l.seconds = now() - t0;
    l.train_loss = loss_sum / static_cast<double>(batches);
    l.train_acc = static_cast<double>(ok) / static_cast<double>(batches * b->batch);
    l.samples_per_sec = static_cast<double>(batches * b->batch) / std::max(1e-9, l.seconds);
    Result<double> acc = test.n > 0 ? evaluate(ex, test, opt) : Result<double>(0.0);
    if (!acc) return acc.status();
    l.test_acc = *acc;
    if (progress) progress->end_epoch(EpochSummary{l.train_loss, l.train_acc, l.test_acc, l.seconds});
    log.push_back(l);
  }
  return log;
}

}  // namespace nnasm
