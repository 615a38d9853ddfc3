// Optimizers end to end (engine/optimizer.h): each one, with clipping and with each learning-rate
// schedule, trains a tiny model step by step in lockstep with a hand-written double-precision
// reference of PyTorch's torch.optim formulas; a seeded XOR net learns; a training listing
// printed and parsed back trains to the same weights, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/autodiff.h"
#include "engine/executor.h"
#include "engine/optimizer.h"
#include "serialize/listing.h"
#include "shell/shell.h"

namespace nnasm {
namespace {

// What a listing stores of a float immediate.
double f32(double v) { return static_cast<float>(v); }

// ---------------------------------------------------------------------------------------------
// The reference: loss = mean((x·W + b − t)²) with x [4,3], W [3,2], b [2], t [4,2], and the
// update rules of torch.optim (SGD, Adam, AdamW, RMSprop), clip_grad_norm_ and the schedule of
// LR_SCHEDULE's contract (linear warm-up, then constant, StepLR-like or cosine), in double.

constexpr int ROWS = 4, IN = 3, OUT = 2, NW = IN * OUT, NP = NW + OUT;

const float X[ROWS * IN] = {0.5f, -1, 2, 1.5f, 0.25f, -0.5f, -2, 1, 0.75f, 0.125f, -0.375f, 1.25f};
const float T[ROWS * OUT] = {1, -1, 0.5f, 2, -1.5f, 0.25f, 0, 1};

// Gradient of the loss with respect to [W (row-major), b], at params `w`.
std::vector<double> reference_gradient(const std::vector<double>& w) {
  std::vector<double> g(NP, 0);
  for (int r = 0; r < ROWS; ++r)
    for (int j = 0; j < OUT; ++j) {
      double y = w[NW + j];
      for (int k = 0; k < IN; ++k) y += X[r * IN + k] * w[k * OUT + j];
      const double dy = 2 * (y - T[r * OUT + j]) / (ROWS * OUT);
      for (int k = 0; k < IN; ++k) g[k * OUT + j] += X[r * IN + k] * dy;
      g[NW + j] += dy;
    }
  return g;
}

double schedule_lr(const OptimizerSpec& o, int t) {
  const LrSchedule& s = o.schedule;
  const double base = f32(o.lr), w = static_cast<double>(s.warmup);
  double lr = base;
  if (s.warmup > 0 && t <= s.warmup) {
    lr = base * t / w;
  } else if (s.kind == LrSchedule::Kind::STEP) {
    lr = base * std::pow(f32(s.gamma), std::floor((t - w - 1) / static_cast<double>(s.step_size)));
  } else if (s.kind == LrSchedule::Kind::COSINE) {
    const double p = std::min(1.0, (t - w) / (static_cast<double>(s.total) - w));
    lr = f32(s.min) + (base - f32(s.min)) * (1 + std::cos(std::acos(-1.0) * p)) / 2;
  }
  return f32(lr);  // the schedule's output is an f32 tensor
}

struct Reference {
  OptimizerSpec o;
  std::vector<double> w, buf, m, v;
  int t = 0;
  bool clipped = false;  // clipping changed a gradient at least once

  Reference(const OptimizerSpec& spec, std::vector<double> init)
      : o(spec), w(std::move(init)), buf(NP, 0), m(NP, 0), v(NP, 0) {}

  void step() {
    ++t;
    const double lr = schedule_lr(o, t);
    std::vector<double> g = reference_gradient(w);
    if (o.clip_norm > 0) {  // torch.nn.utils.clip_grad_norm_
      double ss = 0;
      for (double x : g) ss += x * x;
      const double coef = f32(o.clip_norm) / (std::sqrt(ss) + 1e-6);
      if (coef < 1) {
        clipped = true;
        for (double& x : g) x *= coef;
      }
    }
    const double wd = f32(o.weight_decay);
    for (int i = 0; i < NP; ++i) {
      double d = g[i];
      switch (o.kind) {
        case OptimizerSpec::Kind::SGD: {  // torch.optim.SGD, dampening 0
          const double mu = f32(o.momentum);
          d += wd * w[i];
          if (mu != 0) {
            buf[i] = t == 1 ? d : mu * buf[i] + d;
            d = o.nesterov ? d + mu * buf[i] : buf[i];
          }
          w[i] -= lr * d;
          break;
        }
        case OptimizerSpec::Kind::ADAM:
        case OptimizerSpec::Kind::ADAMW: {  // torch.optim.Adam / AdamW, amsgrad off
          const double b1 = f32(o.beta1), b2 = f32(o.beta2), eps = f32(o.eps);
          if (o.kind == OptimizerSpec::Kind::ADAMW)
            w[i] *= 1 - lr * wd;
          else
            d += wd * w[i];
          m[i] = b1 * m[i] + (1 - b1) * d;
          v[i] = b2 * v[i] + (1 - b2) * d * d;
          const double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
          w[i] -= (lr / bc1) * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + eps);
          break;
        }
        case OptimizerSpec::Kind::RMSPROP: {  // torch.optim.RMSprop, not centered, no momentum
          const double a = f32(o.alpha), eps = f32(o.eps);
          d += wd * w[i];
          v[i] = a * v[i] + (1 - a) * d * d;
          w[i] -= lr * d / (std::sqrt(v[i]) + eps);
          break;
        }
      }
    }
  }
};

// ---------------------------------------------------------------------------------------------
// The engine side: the same model as a program

struct Tiny {
  Context ctx{2024};
  Program p{ctx};
  Graph g{p};
  std::unique_ptr<Executor> ex;
  Status status;

  explicit Tiny(const OptimizerSpec& o) {
    Var x = g.input("x", {ROWS, IN});
    Var t = g.input("t", {ROWS, OUT});
    Var w = g.param("w", {IN, OUT}, {InitKind::UNIFORM, -1, 1});
    Var b = g.param("b", {OUT}, {InitKind::UNIFORM, -1, 1});
    Var loss = mse(linear(x, w, b), t);
    g.output(loss, "loss");
    if (!(status = g.status())) return;
    if (!(status = make_trainable(p, loss.id(), o))) return;
    auto r = Executor::prepare(p);
    if (!(status = r.status())) return;
    ex = std::move(r.value());
    std::copy(X, X + ROWS * IN, ex->tensor("x")->f32());
    std::copy(T, T + ROWS * OUT, ex->tensor("t")->f32());
  }
  std::vector<double> params() const {
    std::vector<double> v;
    for (const char* name : {"w", "b"}) {
      const Tensor* t = ex->tensor(name);
      for (int64_t i = 0; i < t->numel(); ++i) v.push_back(t->f32()[i]);
    }
    return v;
  }
};

struct Config {
  const char* name;
  OptimizerSpec spec;
};

OptimizerSpec with_schedule(OptimizerSpec o, LrSchedule::Kind kind, int64_t warmup, int64_t step_size = 1,
                            double gamma = 0.1, int64_t total = 1, double min = 0) {
  o.schedule.kind = kind;
  o.schedule.warmup = warmup;
  o.schedule.step_size = step_size;
  o.schedule.gamma = gamma;
  o.schedule.total = total;
  o.schedule.min = min;
  return o;
}
OptimizerSpec clipped(OptimizerSpec o, double max_norm) {
  o.clip_norm = max_norm;
  return o;
}
OptimizerSpec decayed(OptimizerSpec o, double wd) {
  o.weight_decay = wd;
  return o;
}

std::vector<Config> configs() {
  using K = LrSchedule::Kind;
  OptimizerSpec rms = rmsprop(0.01, 0.9);
  return {
      {"sgd", sgd(0.1)},
      {"sgd_momentum", sgd(0.1, 0.9)},
      {"sgd_nesterov", sgd(0.1, 0.9, true)},
      {"sgd_weight_decay", sgd(0.1, 0, false, 0.05)},
      {"sgd_momentum_decay", sgd(0.05, 0.5, false, 0.1)},
      {"adam", adam(0.05)},
      {"adam_l2", adam(0.05, 0.1)},
      {"adamw", adamw(0.05, 0.1)},
      {"rmsprop", rms},
      {"rmsprop_decay", decayed(rms, 0.05)},
      {"adam_clipped", clipped(adam(0.05), 0.5)},
      {"sgd_momentum_clipped", clipped(sgd(0.1, 0.9), 0.25)},
      {"constant_warmup", with_schedule(sgd(0.2), K::CONSTANT, 3)},
      {"step_schedule", with_schedule(sgd(0.2, 0.5), K::STEP, 0, 2, 0.5)},
      {"step_warmup", with_schedule(adam(0.1), K::STEP, 2, 3, 0.25)},
      {"cosine", with_schedule(sgd(0.2), K::COSINE, 0, 1, 0.1, 6, 0.02)},
      {"cosine_warmup", with_schedule(rms, K::COSINE, 2, 1, 0.1, 7, 0.001)},
  };
}

void PrintTo(const Config& c, std::ostream* os) { *os << c.name; }

class OptimizerReference : public ::testing::TestWithParam<Config> {};

TEST_P(OptimizerReference, MatchesTorchFormulasStepByStep) {
  const OptimizerSpec& o = GetParam().spec;
  Tiny m(o);
  ASSERT_TRUE(m.status) << m.status.message();
  Reference ref(o, m.params());
  const std::vector<double> start = m.params();
  for (int step = 1; step <= 10; ++step) {
    m.ex->train_step();
    ref.step();
    const std::vector<double> got = m.params();
    for (int i = 0; i < NP; ++i)
      ASSERT_NEAR(got[i], ref.w[i], 2e-5 * (1 + std::fabs(ref.w[i]))) << "step " << step << ", param " << i;
    EXPECT_EQ(m.ex->tensor("opt.t")->f32()[0], static_cast<float>(step));
    EXPECT_EQ(m.ex->tensor("opt.lr")->f32()[0], static_cast<float>(schedule_lr(o, step))) << "step " << step;
  }
  if (o.clip_norm > 0) {
    EXPECT_TRUE(ref.clipped) << "the case never clips: choose a smaller max_norm";
  }
  // Training moved the weights and lowered the loss.
  double moved = 0;
  for (int i = 0; i < NP; ++i) moved += std::fabs(m.params()[i] - start[i]);
  EXPECT_GT(moved, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Optimizers, OptimizerReference, ::testing::ValuesIn(configs()),
                         [](const ::testing::TestParamInfo<Config>& p) { return std::string(p.param.name); });

TEST(Optimizer, UpdateSectionListsTheWholeStep) {
  OptimizerSpec o = clipped(with_schedule(adamw(0.01, 0.02), LrSchedule::Kind::COSINE, 5, 1, 0.1, 100, 0.001), 1);
  Tiny m(o);
  ASSERT_TRUE(m.status) << m.status.message();
  const std::string text = program_print(m.p);
  EXPECT_NE(text.find("mode training"), std::string::npos);
  const size_t update = text.find("update:\n");
  ASSERT_NE(update, std::string::npos) << text;
  const std::string u = text.substr(update);
  for (const char* want :
       {"ADVANCE      @opt.t -> @opt.t", "LR_SCHEDULE  @opt.t -> %opt.lr  kind=cosine base=0.01 warmup=5",
        "total=100 min=0.001", "CLIP_GRAD_NORM %w.grad, %b.grad -> %w.grad, %b.grad  max_norm=1",
        "ADAMW        @w, %w.grad, @w.m, @w.v, %opt.lr, @opt.t -> @w, @w.m, @w.v", "weight_decay=0.02"})
    EXPECT_NE(u.find(want), std::string::npos) << want << "\n" << u;
  // A second optimizer is refused, by add_optimizer and by make_trainable, and changes nothing.
  EXPECT_FALSE(add_optimizer(m.p, sgd(0.1), {{m.p.find("w"), m.p.find("w.grad")}}));
  const size_t code = m.p.code().size();
  const Status again = make_trainable(m.p, m.p.find("loss"), sgd(0.1));
  ASSERT_FALSE(again);
  EXPECT_EQ(again.message(), "make_trainable: the program already trains (it has an update section)");
  EXPECT_EQ(m.p.code().size(), code);
}

// An unknown loss name (find() gives NO_TENSOR) is an error Status naming the call, never an
// exception out of the library; nothing is appended to the program.
TEST(Optimizer, UnknownLossIsAnError) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {2, 3});
  Var t = g.input("t", {2, 4});
  g.output(mse(linear(x, 4), t), "loss");
  ASSERT_TRUE(g.status()) << g.status().message();
  const size_t code = p.code().size();
  const Status s = make_trainable(p, p.find("no_such_loss"), sgd(0.1));
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("make_trainable: backward: the loss is not a tensor of this program"), std::string::npos)
      << s.message();
  const auto b = backward(p, NO_TENSOR);
  ASSERT_FALSE(b.is_ok());
  EXPECT_NE(b.status().message().find("backward: the loss is not a tensor"), std::string::npos) << b.status().message();
  EXPECT_EQ(p.code().size(), code);
  EXPECT_FALSE(p.has_section(Section::BACKWARD));
}

// What make_trainable cannot train with is an error naming it, and leaves the program as it was:
// a loss that is not a scalar f32[], a negative or NaN learning rate, nonsensical hyper-parameters.
TEST(Optimizer, NonsenseIsRefusedByName) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {2, 3});
  Var t = g.input("t", {2, 4});
  Var y = linear(x, 4);
  g.output(y, "y");
  g.output(mse(y, t), "loss");
  ASSERT_TRUE(g.status()) << g.status().message();
  const std::string before = program_print(p);
  auto refused = [&](TensorId loss, const OptimizerSpec& o, const std::string& want) {
    const Status s = make_trainable(p, loss, o);
    EXPECT_FALSE(s) << want;
    EXPECT_NE(s.message().find(want), std::string::npos) << s.message();
    EXPECT_EQ(program_print(p), before) << want;
  };
  refused(p.find("y"), sgd(0.1), "make_trainable: the loss %y must be a scalar f32[], it is f32[2,4]");
  const TensorId loss = p.find("loss");
  refused(loss, sgd(-1), "make_trainable: optimizer opt: learning rate (lr) is -1, expected a finite value >= 0");
  refused(loss, adam(std::nan("")), "learning rate (lr) is nan");
  refused(loss, sgd(0.1, -0.5), "momentum is -0.5");
  refused(loss, sgd(0.1, 0, true), "nesterov needs momentum > 0");
  refused(loss, adamw(0.01, -0.1), "weight_decay is -0.1");
  refused(loss, rmsprop(0.01, 1.5), "alpha is 1.5");
  OptimizerSpec o = adam(0.01);
  o.beta2 = 1;
  refused(loss, o, "beta2 is 1");
  o = adam(0.01);
  o.clip_norm = -1;
  refused(loss, o, "clip_norm is -1");
  o = sgd(0.1);
  o.schedule.kind = LrSchedule::Kind::COSINE;
  o.schedule.total = 0;
  refused(loss, o, "schedule total is 0");
  EXPECT_FALSE(add_optimizer(p, sgd(-1), {}));
  EXPECT_FALSE(p.training());
  EXPECT_TRUE(make_trainable(p, loss, sgd(0.1)));
}

// ---------------------------------------------------------------------------------------------
// Learning: XOR with a 2-8-1 MLP, tanh, BCE on logits, Adam — seeded, so it converges the same
// way every time.

struct Xor {
  Context ctx{7};
  Program p{ctx};
  Graph g{p};
  Status status;

  Xor() {
    Var x = g.input("x", {4, 2});
    Var t = g.input("t", {4, 1});
    LinearOptions l1, l2;
    l1.name = "hidden";
    l2.name = "out";
    l2.weight_init = {InitKind::XAVIER_UNIFORM, 0, 0};
    Var logit = linear(tanh(linear(x, 8, l1)), 1, l2);
    g.output(bce_logits(logit, t), "loss");
    if (!(status = g.status())) return;
    status = make_trainable(p, p.find("loss"), adam(0.05));
  }
};

void set_xor_data(Executor& ex) {
  const float x[] = {0, 0, 0, 1, 1, 0, 1, 1}, t[] = {0, 1, 1, 0};
  std::copy(x, x + 8, ex.tensor("x")->f32());
  std::copy(t, t + 4, ex.tensor("t")->f32());
}

// Trains for `steps`; returns the loss after each step's forward pass.
std::vector<float> train(Executor& ex, int steps) {
  std::vector<float> losses;
  for (int s = 0; s < steps; ++s) {
    ex.train_step();
    losses.push_back(ex.tensor("loss")->f32()[0]);
  }
  return losses;
}

TEST(Training, XorLearnsDeterministically) {
  std::vector<float> runs[2];
  for (std::vector<float>& losses : runs) {
    Xor m;
    ASSERT_TRUE(m.status) << m.status.message();
    auto ex = Executor::prepare(m.p);
    ASSERT_TRUE(ex) << ex.status().message();
    set_xor_data(*ex.value());
    losses = train(*ex.value(), 200);
  }
  EXPECT_GT(runs[0].front(), 0.5f);  // chance level is ln 2 ≈ 0.69
  EXPECT_LT(runs[0].back(), 0.01f);  // learned
  EXPECT_EQ(runs[0], runs[1]);       // and exactly the same way twice
}

// The training listing is a complete description: printed, parsed into a fresh Context with the
// same seed, it trains to the same weights, state and losses, bit for bit.
TEST(Training, ListingRoundTripTrainsIdentically) {
  Xor a;
  ASSERT_TRUE(a.status) << a.status.message();
  const std::string text = program_print(a.p);
  Context ctx(7);
  Program b(ctx);
  const Status parsed = program_parse(text, "xor.nnasm", &b);
  ASSERT_TRUE(parsed) << parsed.message() << "\n" << text;
  EXPECT_EQ(program_print(b), text);
  EXPECT_TRUE(b.training());
  EXPECT_FALSE(make_trainable(b, b.find("loss"), sgd(1)));  // already trains: refused, left alone
  EXPECT_EQ(program_print(b), text);

  auto ea = Executor::prepare(a.p), eb = Executor::prepare(b);
  ASSERT_TRUE(ea) << ea.status().message();
  ASSERT_TRUE(eb) << eb.status().message();
  set_xor_data(*ea.value());
  set_xor_data(*eb.value());
  EXPECT_EQ(train(*ea.value(), 60), train(*eb.value(), 60));
  int compared = 0;
  for (TensorId id : a.p.tensors()) {
    const TensorDesc& d = a.p.desc(id);
    if (d.role != Role::PARAM && d.role != Role::STATE) continue;
    const Tensor* ta = ea.value()->tensor(d.name);
    const Tensor* tb = eb.value()->tensor(d.name);
    ASSERT_TRUE(ta && tb) << d.name;
    ASSERT_EQ(ta->numel(), tb->numel());
    EXPECT_EQ(std::memcmp(ta->data.data(), tb->data.data(), static_cast<size_t>(ta->numel()) * 4), 0) << d.name;
    ++compared;
  }
  EXPECT_EQ(compared, 4 + 9);  // 4 params; 2 moments each and the step counter
}

}  // namespace
}  // namespace nnasm
