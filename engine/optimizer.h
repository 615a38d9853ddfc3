// Optimizers as code: add_optimizer appends the update: section — a step counter, the learning-
// rate schedule, optional global-norm clipping and one step instruction per param — and declares
// the optimizer's state (moments, counters) as ordinary state tensors in the map, so a listing
// shows the whole training step and a model file can hold it.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "isa/program.h"
#include "isa/status.h"

namespace nnasm {

struct LrSchedule {
  enum class Kind { CONSTANT, STEP, COSINE } kind = Kind::CONSTANT;  // LR_SCHEDULE's kind order
  int64_t warmup = 0;     // steps of linear warm-up from 0
  int64_t step_size = 1;  // STEP: multiply by gamma every step_size steps
  double gamma = 0.1;
  int64_t total = 1;      // COSINE: steps until the rate reaches min
  double min = 0;
};

struct OptimizerSpec {
  enum class Kind { SGD, ADAM, ADAMW, RMSPROP } kind = Kind::ADAM;
  double lr = 1e-3;
  double momentum = 0;  // SGD
  bool nesterov = false;
  double weight_decay = 0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // ADAM, ADAMW (eps also RMSPROP)
  double alpha = 0.99;                           // RMSPROP
  double clip_norm = 0;                          // > 0: clip gradients to this global norm
  LrSchedule schedule;
  std::string name = "opt";  // prefix of the optimizer's own tensors (@opt.t, %opt.lr)
};

OptimizerSpec sgd(double lr, double momentum = 0, bool nesterov = false, double weight_decay = 0);
OptimizerSpec adam(double lr = 1e-3, double weight_decay = 0);
OptimizerSpec adamw(double lr = 1e-3, double weight_decay = 0.01);
OptimizerSpec rmsprop(double lr = 1e-2, double alpha = 0.99);

// Appends the update section for (param, gradient) pairs. Requires: no update section yet, and
// sensible hyper-parameters (lr, weight decay, momentum, eps, clip_norm finite and >= 0; betas in
// [0, 1); RMSprop's alpha in [0, 1]; schedule lengths >= 1): an error names the one that is not.
// Declares state tensors @PARAM.m / .v / .mom / .sq and @NAME.t (zeros).
Status add_optimizer(Program& p, const OptimizerSpec& opt, const std::vector<std::pair<TensorId, TensorId>>& grads);

// The whole training step at once: backward(loss), add_optimizer, and training mode. Errors: the
// loss is not a tensor of p or not a scalar f32[], a hyper-parameter as add_optimizer, or the
// program already trains (an update section, from an earlier call or a parsed training listing).
Status make_trainable(Program& p, TensorId loss, const OptimizerSpec& opt);

}  // namespace nnasm
