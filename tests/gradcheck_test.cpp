// Gradient checks: every op with a backward rule is checked against central finite differences by
// the public checker (engine/gradcheck.h), on small random shapes with broadcasting, every
// transpose flag, middle axes and non-default immediates, with inputs kept away from kinks and
// ties. The case table is keyed by opcode and the suite is stamped from all_ops(), so an op that
// gains a rule without a case fails here. Then: the errors autodiff gives when a gradient cannot
// be had, the zero gradients of FILL and STEP, and the checker itself (it catches a wrong
// gradient, leaves the program alone, is deterministic).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <random>

#include "engine/autodiff.h"
#include "engine/gradcheck.h"
#include "serialize/listing.h"
#include "shell/shell.h"

namespace nnasm {
namespace {

// ---------------------------------------------------------------------------------------------
// Input values: generators and fills by tensor name

using Gen = std::function<float(std::mt19937&)>;
using Fill = std::function<void(Executor&, std::mt19937&)>;

Gen uniform(double lo, double hi) {
  return [=](std::mt19937& rng) { return static_cast<float>(std::uniform_real_distribution<double>(lo, hi)(rng)); };
}
// ±[lo, hi]: away from 0 (kinks of RELU, ABS, ...).
Gen signed_between(double lo, double hi) {
  return [=](std::mt19937& rng) {
    const float m = uniform(lo, hi)(rng);
    return rng() & 1 ? m : -m;
  };
}
// Uniform in [lo, hi] but at least `margin` away from every point of `kinks`.
Gen away_from(double lo, double hi, std::vector<double> kinks, double margin = 0.1) {
  return [=](std::mt19937& rng) {
    for (;;) {
      const float v = uniform(lo, hi)(rng);
      if (std::all_of(kinks.begin(), kinks.end(), [&](double k) { return std::fabs(v - k) >= margin; })) return v;
    }
  };
}

Fill put(const std::string& name, Gen gen) {
  return [=](Executor& ex, std::mt19937& rng) {
    Tensor* t = ex.tensor(name);
    for (int64_t i = 0; i < t->numel(); ++i) t->f32()[i] = gen(rng);
  };
}
// Distinct values 0.2 apart in a random order: no ties for REDUCE_MAX, even after a nudge.
Fill distinct(const std::string& name) {
  return [=](Executor& ex, std::mt19937& rng) {
    Tensor* t = ex.tensor(name);
    std::vector<int64_t> order(static_cast<size_t>(t->numel()));
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i = 0; i < order.size(); ++i)
      t->f32()[i] = static_cast<float>(0.2 * static_cast<double>(order[i]) - 0.1 * static_cast<double>(order.size()));
  };
}
Fill class_ids(const std::string& name, int classes) {
  return [=](Executor& ex, std::mt19937& rng) {
    Tensor* t = ex.tensor(name);
    for (int64_t i = 0; i < t->numel(); ++i) t->i32()[i] = static_cast<int32_t>(rng() % static_cast<unsigned>(classes));
  };
}
// Indices into an axis of length n, negative ones and repeats among them (a row gathered twice
// gets both gradients).
Fill indices(const std::string& name, int n) {
  return [=](Executor& ex, std::mt19937& rng) {
    Tensor* t = ex.tensor(name);
    for (int64_t i = 0; i < t->numel(); ++i) t->i32()[i] = static_cast<int32_t>(rng() % (2u * n)) - n;
  };
}
// Rows of probabilities along the last axis.
Fill probabilities(const std::string& name) {
  return [=](Executor& ex, std::mt19937& rng) {
    Tensor* t = ex.tensor(name);
    const int64_t c = t->desc.type.shape[t->desc.type.shape.rank - 1];
    for (int64_t r = 0; r < t->numel() / c; ++r) {
      float* row = t->f32() + r * c;
      double sum = 0;
      for (int64_t j = 0; j < c; ++j) sum += row[j] = uniform(0.1, 1)(rng);
      for (int64_t j = 0; j < c; ++j) row[j] = static_cast<float>(row[j] / sum);
    }
  };
}
Fill all_of(std::vector<Fill> fills) {
  return [=](Executor& ex, std::mt19937& rng) {
    for (const Fill& f : fills) f(ex, rng);
  };
}

// ---------------------------------------------------------------------------------------------
// The case table

struct Built {
  Var y;
  std::vector<Var> wrt;
};

struct GradCase {
  GradCase(std::string w, std::function<Built(Graph&)> b, Fill f = {})
      : what(std::move(w)), build(std::move(b)), fill(std::move(f)) {}
  std::string what;
  std::function<Built(Graph&)> build;
  Fill fill;  // empty: the checker's default uniform(−1, 1) inputs
  double step = 1e-3, rtol = 1e-2, atol = 1e-3;
};

using Cases = std::vector<GradCase>;

Cases matmul_cases() {
  Cases v;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const std::string flags = fmt::format("transA={} transB={}", ta, tb);
      v.push_back({flags, [=](Graph& g) {
                     Var a = g.input("a", ta ? Shape{4, 3} : Shape{3, 4});
                     Var b = g.input("b", tb ? Shape{5, 4} : Shape{4, 5});
                     return Built{matmul(a, b, ta, tb), {a, b}};
                   }});
      // Batch dimensions [2,1] and [3] broadcast to [2,3]: both gradients sum over a stretched one.
      v.push_back({flags + " batched", [=](Graph& g) {
                     Var a = g.input("a", ta ? Shape{2, 1, 4, 3} : Shape{2, 1, 3, 4});
                     Var b = g.input("b", tb ? Shape{3, 2, 4} : Shape{3, 4, 2});
                     return Built{matmul(a, b, ta, tb), {a, b}};
                   }});
    }
  v.push_back({"a shared by every batch", [](Graph& g) {
                 Var a = g.input("a", {3, 4});
                 Var b = g.input("b", {2, 4, 2});
                 return Built{matmul(a, b), {a, b}};
               }});
  // A fused activation (the act-fusion pass writes it): its derivative comes from the output, as
  // LINEAR's. Smooth ones, so no nudge crosses a kink.
  for (const char* act : {"tanh", "sigmoid"})
    v.push_back({fmt::format("act={} transB=1", act), [act](Graph& g) {
                   Var a = g.input("a", {3, 4});
                   Var b = g.input("b", {5, 4});
                   const Activation f = std::string(act) == "tanh" ? Activation::TANH : Activation::SIGMOID;
                   Var y = g.record(Opcode::MATMUL, {a, b},
                                    {{"transB", imm_i(1)}, {"act", imm_i(static_cast<int64_t>(f))}}, Loc::here());
                   return Built{y, {a, b}};
                 }});
  return v;
}

GradCase fused(Activation act, float alpha) {
  return {fmt::format("act={} act_alpha={}", activation_name(act), alpha),
          [=](Graph& g) {
            Var x = g.input("x", {3, 4});
            Var w = g.param("w", {4, 5}, {InitKind::UNIFORM, -1, 1});
            Var b = g.param("b", {5}, {InitKind::UNIFORM, -1, 1});
            return Built{linear(x, w, b, act, alpha), {x, w, b}};
          },
          all_of({put("x", uniform(-0.1, 0.1)), put("w", uniform(-0.1, 0.1)), put("b", signed_between(0.5, 1.5))})};
}

Cases linear_cases() {
  return {{"rank-3 x",
           [](Graph& g) {
             Var x = g.input("x", {2, 3, 4});
             Var w = g.param("w", {4, 5}, {InitKind::UNIFORM, -1, 1});
             Var b = g.param("b", {5}, {InitKind::UNIFORM, -1, 1});
             return Built{linear(x, w, b), {x, w, b}};
           }},
          {"one row", [](Graph& g) {
             Var x = g.input("x", {3});
             Var w = g.param("w", {3, 2}, {InitKind::UNIFORM, -1, 1});
             Var b = g.param("b", {2}, {InitKind::UNIFORM, -1, 1});
             return Built{linear(x, w, b), {x, w, b}};
           }},
          // Fused activations: x and W small, |b| in [0.5, 1.5], so that the pre-activation stays
          // away from the kinks (clipped_relu's threshold 2 included) whatever the nudge.
          fused(Activation::RELU, 0),
          fused(Activation::LEAKYRELU, 0.2f),
          fused(Activation::CLIPPED_RELU, 2.f),
          fused(Activation::SIGMOID, 0),
          fused(Activation::TANH, 0)};
}

// CONV2D with weights and bias as params; small x and W and |b| in [0.5, 1.5] keep a fused
// activation's pre-activation away from its kinks.
GradCase conv(const std::string& what, Shape xs, Shape ws, bool bias, Conv2dOptions opt) {
  return {what,
          [=](Graph& g) {
            Var x = g.input("x", xs);
            Var w = g.param("w", ws, {InitKind::UNIFORM, -1, 1});
            Var b = bias ? g.param("b", {ws.dims[0]}, {InitKind::UNIFORM, -1, 1}) : Var();
            std::vector<Var> wrt{x, w};
            if (bias) wrt.push_back(b);
            return Built{conv2d(x, w, b, opt), wrt};
          },
          opt.act == Activation::NONE
              ? Fill{}
              : all_of({put("x", uniform(-0.1, 0.1)), put("w", uniform(-0.1, 0.1)), put("b", signed_between(0.5, 1.5))})};
}

Conv2dOptions conv_opts(std::vector<int64_t> stride, std::vector<int64_t> pad, std::vector<int64_t> dilation,
                        int64_t groups, Activation act = Activation::NONE) {
  Conv2dOptions o;
  o.stride = stride, o.pad = pad, o.dilation = dilation, o.groups = groups, o.act = act;
  return o;
}

Cases conv_cases() {
  return {conv("3x3 pad 1", {2, 3, 5, 6}, {4, 3, 3, 3}, true, conv_opts({1, 1}, {1, 1}, {1, 1}, 1)),
          conv("stride 2, dilation 2, no bias", {1, 2, 9, 8}, {3, 2, 3, 2}, false, conv_opts({2, 1}, {1, 0}, {2, 2}, 1)),
          conv("depthwise", {1, 4, 5, 5}, {4, 1, 3, 3}, true, conv_opts({1, 1}, {1, 1}, {1, 1}, 4)),
          conv("two groups 1x1", {2, 4, 3, 3}, {6, 2, 1, 1}, true, conv_opts({1, 1}, {0, 0}, {1, 1}, 2)),
          conv("act=relu", {1, 2, 4, 4}, {3, 2, 3, 3}, true, conv_opts({1, 1}, {1, 1}, {1, 1}, 1, Activation::RELU)),
          conv("act=tanh", {1, 2, 4, 4}, {3, 2, 3, 3}, true, conv_opts({1, 1}, {1, 1}, {1, 1}, 1, Activation::TANH))};
}

// CONV2D_BWD_DATA as a layer of its own (ONNX ConvTranspose): dy and w are params, x only gives
// the shape. Odd sizes, stride 2 with padding (a transposed convolution's usual upsampling), and
// groups with dilation and unequal strides.
GradCase conv_bwd_data(const std::string& what, Shape dys, Shape ws, Shape xs, std::vector<int64_t> stride,
                       std::vector<int64_t> pad, std::vector<int64_t> dilation, int64_t groups) {
  return {what, [=](Graph& g) {
            Var dy = g.param("dy", dys, {InitKind::UNIFORM, -1, 1});
            Var w = g.param("w", ws, {InitKind::UNIFORM, -1, 1});
            Var x = g.input("x", xs);
            Var dx = g.record(Opcode::CONV2D_BWD_DATA, {dy, w, x},
                              {{"stride", imm_ints(stride)}, {"pad", imm_ints(pad)}, {"dilation", imm_ints(dilation)},
                               {"groups", imm_i(groups)}},
                              Loc::here());
            return Built{dx, {dy, w}};
          }};
}

Cases conv_bwd_data_cases() {
  return {conv_bwd_data("3x3 stride 2 pad 1, odd sizes", {2, 4, 4, 3}, {4, 3, 3, 3}, {2, 3, 7, 5}, {2, 2}, {1, 1},
                        {1, 1}, 1),
          conv_bwd_data("groups 2, dilation [2,1], stride [1,2], pad [2,0]", {1, 6, 9, 2}, {6, 2, 2, 3}, {1, 4, 7, 6},
                        {1, 2}, {2, 0}, {2, 1}, 2)};
}

// Pooling on x [2,3,5,6]: overlapping and padded windows, the default stride, and ceil_mode's
// partial last windows (one past the image, one past the right padding). Max pooling's inputs
// are distinct (0.2 apart), so no nudge changes a window's argmax.
Cases pool_cases(bool max) {
  struct Geometry {
    const char* what;
    std::vector<int64_t> kernel, stride, pad;
    bool ceil = false;
  };
  const Geometry geoms[] = {{"2x2, stride = kernel", {2, 2}, {}, {0, 0}},
                            {"3x3 stride 2 pad 1", {3, 3}, {2, 2}, {1, 1}},
                            {"3x2 stride 1 (overlapping)", {3, 2}, {1, 1}, {1, 0}},
                            {"2x2 ceil_mode (a partial last row)", {2, 2}, {}, {0, 0}, true},
                            {"3x3 stride 2 pad 1 ceil_mode (a window past the padding)", {3, 3}, {2, 2}, {1, 1}, true}};
  Cases v;
  for (const Geometry& geo : geoms)
    for (bool include_pad : {true, false}) {
      if (max && !include_pad) continue;
      v.push_back({fmt::format("{}{}", geo.what, include_pad ? "" : " count_include_pad=0"),
                   [=](Graph& g) {
                     Var x = g.input("x", {2, 3, 5, 6});
                     Var y = max ? max_pool2d(x, geo.kernel, geo.stride, geo.pad, geo.ceil)
                                 : avg_pool2d(x, geo.kernel, geo.stride, geo.pad, include_pad, geo.ceil);
                     return Built{y, {x}};
                   },
                   max ? distinct("x") : Fill{}});
    }
  return v;
}

// A binary op on inputs a and b of the given shapes.
GradCase binary(const std::string& what, Shape sa, Shape sb, std::function<Var(Var, Var)> f, Fill fill = {}) {
  return {what,
          [=](Graph& g) {
            Var a = g.input("a", sa), b = g.input("b", sb);
            return Built{f(a, b), {a, b}};
          },
          fill};
}

// A unary op on input x of shape [2,3,4] (or `s`).
GradCase unary(const std::string& what, std::function<Var(Var)> f, Fill fill = {}, Shape s = Shape{2, 3, 4}) {
  return {what,
          [=](Graph& g) {
            Var x = g.input("x", s);
            return Built{f(x), {x}};
          },
          fill};
}

// TO_NCHWC or TO_NCHW on x with its one immediate.
Var reorder(Var x, Opcode op, const char* key, int64_t value) {
  return x.graph()->record(op, {x}, {{key, imm_i(value)}}, Loc::here());
}

// CALC: its gradient comes from the rules of the ops in its expression.
Cases calc_cases() {
  auto three = [](const char* expr) {
    return [expr](Graph& g) {
      Var a = g.input("a", {3, 4}), b = g.input("b", {4}), c = g.input("c", {3, 1});
      return Built{calc({a, b, c}, expr), {a, b, c}};
    };
  };
  return {
      {"broadcast inputs, one named twice", three("mul(tanh(add(%0,%1,alpha=0.5,beta=2)),sigmoid(sub(%0,%2)))")},
      {"smooth ops and constants",
       three("add(mul(swish(%0,beta=1.5),gelu(%1,approx=tanh)),div(log(add(square(%2),1)),sqrt(add(exp(%0),2))),"
             "beta=-0.5)")},
      // Inputs ±[0.2, 1]: away from the kinks at 0 (and clipped_relu's at 2).
      {"kinks kept away",
       three("add(mul(leakyrelu(%0,slope=0.2),relu(neg(%1))),scale(add(abs(%2),clipped_relu(elu(%0,alpha=0.7),"
             "threshold=2)),alpha=3),beta=0.5)"),
       all_of({put("a", signed_between(0.2, 1)), put("b", signed_between(0.2, 1)), put("c", signed_between(0.2, 1))})},
      {"a mask (no gradient through step), one input wanted",
       [](Graph& g) {
         Var a = g.input("a", {2, 3}), b = g.input("b", {2, 3});
         return Built{calc({a, b}, "mul(exp(%0),step(%1))"), {a}};
       },
       all_of({put("a", uniform(-1, 1)), put("b", signed_between(0.2, 1))})},
      {"the ops added for imported models",
       three("add(mul(erf(%0),softplus(%1)),mul(selu(%2),hardsigmoid(reciprocal(add(square(%0),1)))))"),
       put("c", signed_between(0.2, 1))},  // away from selu's kink at 0
      {"the result is a broadcast input",
       [](Graph& g) {
         Var a = g.input("a", {2, 3}), b = g.input("b", {3});
         return Built{calc({a, b}, "%1"), {a, b}};
       }},
  };
}

// Winners clear: a is ±[0.5, 1.5], b within ±0.3, so each side wins somewhere and no pair ties.
Fill no_ties() { return all_of({put("a", signed_between(0.5, 1.5)), put("b", uniform(-0.3, 0.3))}); }

// Each reduction along the middle axis of [2,3,4], with and without keepdims, and the last axis.
Cases reduce_cases(Var (*f)(At, int64_t, bool), Fill fill = {}) {
  Cases v;
  for (bool keep : {false, true})
    for (int64_t axis : {1, -1})
      v.push_back(unary(
          fmt::format("axis={} keepdims={}", axis, keep), [=](Var x) { return f(x, axis, keep); }, fill));
  return v;
}

// REDUCE_PROD along the middle axis of [2,3,4] (rows of 3) and the last (rows of 4): away from 0,
// then with exact zeros, one in some rows and two in others (a product is linear in each entry, so
// central differences are exact there too).
Cases prod_cases() {
  Cases v = reduce_cases(reduce_prod, put("x", signed_between(0.5, 1.5)));
  const Fill zeros = [](Executor& ex, std::mt19937& rng) {
    Tensor* t = ex.tensor("x");
    for (int64_t i = 0; i < t->numel(); ++i) t->f32()[i] = signed_between(0.5, 1.5)(rng);
    for (int64_t i : {0, 5, 12, 13, 22}) t->f32()[i] = 0;  // rows of 4: one, one, two, one
  };
  for (int64_t axis : {1, -1})
    v.push_back(unary(fmt::format("zeros, axis={}", axis), [axis](Var x) { return reduce_prod(x, axis); }, zeros));
  return v;
}

// BATCHNORM2D on x of shape `xs` with random γ, β and running statistics; `training` sets the
// program's mode (the gradient through the batch statistics, or the affine inference map).
GradCase batchnorm(const std::string& what, Shape xs, bool training) {
  return {what,
          [=](Graph& g) {
            g.program().set_training(training);
            Var x = g.input("x", xs);
            BatchNormOptions o;
            o.name = "bn";
            o.eps = 1e-3f;
            o.momentum = 0.25f;
            Var y = batchnorm2d(x, o);
            return Built{y, {x, Var(&g, g.program().find("bn.gamma")), Var(&g, g.program().find("bn.beta"))}};
          },
          all_of({put("x", uniform(-1, 1)), put("bn.gamma", signed_between(0.5, 1.5)), put("bn.beta", uniform(-1, 1)),
                  put("bn.running_mean", uniform(-0.5, 0.5)), put("bn.running_var", uniform(0.5, 1.5))})};
}

// DROPOUT: one fixed mask (the checker pins the run index), in training or inference mode.
GradCase dropout_case(const std::string& what, float rate, bool training) {
  return {what, [=](Graph& g) {
            g.program().set_training(training);
            Var x = g.input("x", {3, 5, 7});
            return Built{dropout(x, rate), {x}};
          }};
}

// LSTM, GRU and RNN (through LSTM_BWD, GRU_BWD, RNN_BWD) on odd sizes, T 4, N 3, I 3, H 5: both
// directions, reverse, batch_first, initial states, lengths 4, 2 and 0 (a sequence the layer
// never steps), and each op's variant (LSTM's peepholes, GRU's linear_before_reset, RNN's relu).
// `outputs` says which outputs the loss reads (bit 0 y, 1 the last h, 2 the last c): the others
// get no gradient, and the rule feeds zeros for them.
struct RecurrentGrad {
  const char* direction;
  bool batch_first, initial, lens, variant;
  unsigned outputs;
};

GradCase recurrent(Opcode op, const RecurrentGrad& c) {
  const std::string what = fmt::format("{} batch_first={} initial={} lens={} variant={} outputs={}", c.direction,
                                       int(c.batch_first), int(c.initial), int(c.lens), int(c.variant), c.outputs);
  const bool lstm = op == Opcode::LSTM;
  const int64_t T = 4, N = 3, I = 3, H = 5, G = lstm ? 4 : op == Opcode::GRU ? 3 : 1;
  const int64_t D = std::string(c.direction) == "bidirectional" ? 2 : 1;
  Fill fill;
  if (c.lens)
    fill = [](Executor& ex, std::mt19937&) {
      const int32_t lens[] = {4, 2, 0};
      std::copy(lens, lens + 3, ex.tensor("lens")->i32());
    };
  GradCase gc{what, [=](Graph& g) {
            Var x = g.input("x", c.batch_first ? Shape{N, T, I} : Shape{T, N, I});
            Var w = g.param("w", {D, G * H, I}, {InitKind::UNIFORM, -0.7, 0.7});
            Var r = g.param("r", {D, G * H, H}, {InitKind::UNIFORM, -0.7, 0.7});
            Var b = g.param("b", {D, 2 * G * H}, {InitKind::UNIFORM, -0.5, 0.5});
            std::vector<Var> in{x, w, r, b}, wrt{x, w, r, b};
            const Shape state = c.batch_first ? Shape{N, D, H} : Shape{D, N, H};
            if (c.initial) {
              in.push_back(g.input("h0", state));
              if (lstm) in.push_back(g.input("c0", state));
              wrt.insert(wrt.end(), in.begin() + 4, in.end());
            }
            if (c.lens) in.push_back(g.input("lens", {N}, DType::I32));
            if (lstm && c.variant) {
              in.push_back(g.param("p", {D, 3 * H}, {InitKind::UNIFORM, -1, 1}));
              wrt.push_back(in.back());
            }
            std::vector<std::pair<std::string, Imm>> imms{
                {"direction", imm_i(imm_choice(op, "direction", c.direction))},
                {"batch_first", imm_i(c.batch_first)},
                {"initial", imm_i(c.initial)},
                {"lens", imm_i(c.lens)}};
            if (lstm) imms.push_back({"peephole", imm_i(c.variant)});
            if (op == Opcode::GRU) imms.push_back({"linear_before_reset", imm_i(c.variant)});
            if (op == Opcode::RNN) imms.push_back({"activation", imm_i(imm_choice(op, "activation", c.variant ? "relu" : "tanh"))});
            Var y = g.record(op, in, imms, Loc::here());
            if (!g.status()) return Built{y, wrt};
            const std::vector<TensorId> outs = g.program().code().back().out;
            std::vector<Var> read;
            for (size_t k = 0; k < outs.size(); ++k)
              if (c.outputs >> k & 1) read.push_back(reshape(Var(&g, outs[k]), {-1}));
            return Built{read.size() == 1 ? read[0] : concat(read, 0), wrt};
          },
          fill};
  if (op == Opcode::RNN && c.variant) gc.step = 2e-4;  // relu's kink: a smaller step crosses it less often
  return gc;
}

Cases recurrent_cases(Opcode op) {
  const unsigned all = op == Opcode::LSTM ? 7 : 3;
  Cases v;
  for (const RecurrentGrad& c : {RecurrentGrad{"forward", false, false, false, false, all},
                                 RecurrentGrad{"reverse", true, true, true, true, all},
                                 RecurrentGrad{"bidirectional", false, true, true, false, all},
                                 RecurrentGrad{"bidirectional", true, false, false, true, 1},
                                 RecurrentGrad{"forward", false, true, true, true, 2}})
    v.push_back(recurrent(op, c));
  return v;
}

const std::map<Opcode, Cases>& gradcheck_table() {
  static const std::map<Opcode, Cases> t = {
      {Opcode::MATMUL, matmul_cases()},
      {Opcode::LINEAR, linear_cases()},
      {Opcode::CONV2D, conv_cases()},
      {Opcode::CONV2D_BWD_DATA, conv_bwd_data_cases()},
      {Opcode::LSTM, recurrent_cases(Opcode::LSTM)},
      {Opcode::GRU, recurrent_cases(Opcode::GRU)},
      {Opcode::RNN, recurrent_cases(Opcode::RNN)},
      {Opcode::CAST,
       {unary("f32 to f32 (a copy)", [](Var x) { return cast(x, DType::F32); }),
        {"f32 to i32 and back: no gradient through the integers",
         [](Graph& g) {
           Var x = g.input("x", {3, 4});
           return Built{x * cast(cast(x, DType::I32), DType::F32), {x}};
         },
         put("x", away_from(-3, 3, {-2, -1, 0, 1, 2}))}}},
      {Opcode::MAXPOOL2D, pool_cases(true)},
      {Opcode::AVGPOOL2D, pool_cases(false)},
      {Opcode::BATCHNORM2D,
       {batchnorm("training [3,2,3,4]", {3, 2, 3, 4}, true), batchnorm("training [5,3]", {5, 3}, true),
        batchnorm("training [2,3,5]", {2, 3, 5}, true), batchnorm("inference [2,3,2,2]", {2, 3, 2, 2}, false)}},
      {Opcode::DROPOUT,
       {dropout_case("training rate=0.3", 0.3f, true), dropout_case("training rate=0.75", 0.75f, true),
        dropout_case("inference", 0.5f, false)}},
      {Opcode::ADD,
       {binary("[3,4]+[4] alpha=0.5 beta=-2", {3, 4}, {4}, [](Var a, Var b) { return add(a, b, 0.5f, -2.f); }),
        binary("[2,3]+[]", {2, 3}, {}, [](Var a, Var b) { return a + b; })}},
      {Opcode::SUB, {binary("[3,4]-[3,1]", {3, 4}, {3, 1}, [](Var a, Var b) { return a - b; })}},
      {Opcode::MUL,
       {binary("[2,1,3]*[3,1]", {2, 1, 3}, {3, 1}, [](Var a, Var b) { return a * b; }),
        binary("[2,3]*[2,3]", {2, 3}, {2, 3}, [](Var a, Var b) { return a * b; })}},
      {Opcode::DIV,
       {binary("[3,4]/[4]", {3, 4}, {4}, [](Var a, Var b) { return a / b; }, put("b", signed_between(0.5, 1.5))),
        binary("[4]/[3,4]", {4}, {3, 4}, [](Var a, Var b) { return a / b; }, put("b", signed_between(0.5, 1.5)))}},
      {Opcode::MAXIMUM,
       {binary("[3,4] vs [4]", {3, 4}, {4}, [](Var a, Var b) { return maximum(a, b); }, no_ties()),
        binary("[2,1,3] vs [3,1]", {2, 1, 3}, {3, 1}, [](Var a, Var b) { return maximum(a, b); }, no_ties())}},
      {Opcode::MINIMUM,
       {binary("[3,4] vs [4]", {3, 4}, {4}, [](Var a, Var b) { return minimum(a, b); }, no_ties()),
        binary("[2,1,3] vs [3,1]", {2, 1, 3}, {3, 1}, [](Var a, Var b) { return minimum(a, b); }, no_ties())}},
      {Opcode::SCALE, {unary("alpha=-1.5", [](Var x) { return scale(x, -1.5f); })}},
      {Opcode::NEG, {unary("", [](Var x) { return neg(x); })}},
      {Opcode::EXP, {unary("", [](Var x) { return exp(x); })}},
      {Opcode::LOG, {unary("positive", [](Var x) { return log(x); }, put("x", uniform(0.5, 2)))}},
      {Opcode::SQRT, {unary("positive", [](Var x) { return sqrt(x); }, put("x", uniform(0.5, 2)))}},
      {Opcode::ABS, {unary("away from 0", [](Var x) { return abs(x); }, put("x", signed_between(0.1, 1.5)))}},
      {Opcode::SQUARE, {unary("", [](Var x) { return square(x); })}},
      {Opcode::RELU, {unary("away from 0", [](Var x) { return relu(x); }, put("x", signed_between(0.1, 1.5)))}},
      {Opcode::LEAKYRELU,
       {unary("slope=0.2", [](Var x) { return leakyrelu(x, 0.2f); }, put("x", signed_between(0.1, 1.5)))}},
      {Opcode::ELU, {unary("alpha=0.5", [](Var x) { return elu(x, 0.5f); }, put("x", signed_between(0.1, 2)))}},
      {Opcode::CLIPPED_RELU,
       {unary("threshold=1.5", [](Var x) { return clipped_relu(x, 1.5f); }, put("x", away_from(-1, 2.5, {0, 1.5})))}},
      {Opcode::SIGMOID, {unary("", [](Var x) { return sigmoid(x); }, put("x", uniform(-3, 3)))}},
      {Opcode::TANH, {unary("", [](Var x) { return tanh(x); }, put("x", uniform(-2, 2)))}},
      {Opcode::GELU,
       {unary("erf form", [](Var x) { return gelu(x); }, put("x", uniform(-3, 3))),
        unary("tanh form", [](Var x) { return gelu(x, true); }, put("x", uniform(-3, 3)))}},
      {Opcode::SWISH,
       {unary("beta=1.75", [](Var x) { return swish(x, 1.75f); }, put("x", uniform(-3, 3))),
        unary("beta=-0.5", [](Var x) { return swish(x, -0.5f); }, put("x", uniform(-3, 3)))}},
      {Opcode::SOFTMAX,
       {unary("middle axis", [](Var x) { return softmax(x, 1); }, put("x", uniform(-2, 2))),
        unary("last axis", [](Var x) { return softmax(x); }, put("x", uniform(-2, 2)))}},
      {Opcode::LOGSOFTMAX,
       {unary("middle axis", [](Var x) { return logsoftmax(x, 1); }, put("x", uniform(-2, 2))),
        unary("first axis", [](Var x) { return logsoftmax(x, 0); }, put("x", uniform(-2, 2)))}},
      {Opcode::REDUCE_SUM, reduce_cases(reduce_sum)},
      {Opcode::REDUCE_MEAN, reduce_cases(reduce_mean)},
      {Opcode::REDUCE_MAX, reduce_cases(reduce_max, distinct("x"))},
      {Opcode::REDUCE_MIN, reduce_cases(reduce_min, distinct("x"))},
      {Opcode::REDUCE_PROD, prod_cases()},
      {Opcode::RESHAPE, {unary("[2,3,4] -> [6,-1]", [](Var x) { return reshape(x, {6, -1}); })}},
      {Opcode::TRANSPOSE, {unary("perm=[2,0,1]", [](Var x) { return transpose(x, {2, 0, 1}); })}},
      {Opcode::CONCAT,
       {{"three along axis 1",
         [](Graph& g) {
           Var a = g.input("a", {2, 3, 2}), b = g.input("b", {2, 1, 2}), c = g.input("c", {2, 2, 2});
           return Built{concat({a, b, c}, 1), {a, b, c}};
         }},
        {"one input used twice",
         [](Graph& g) {
           Var a = g.input("a", {2, 3}), b = g.input("b", {4, 3});
           return Built{concat({a, b, a}, 0), {a, b}};
         }},
        {"NCHW along channels",
         [](Graph& g) {
           Var a = g.input("a", {2, 3, 2, 3}), b = g.input("b", {2, 1, 2, 3});
           return Built{concat({a, b}, 1), {a, b}};
         }}}},
      {Opcode::FLATTEN,
       {unary("axis=1 (default)", [](Var x) { return flatten(x); }, {}, Shape{2, 3, 2, 2}),
        unary("axis=-1", [](Var x) { return flatten(x, -1); })}},
      {Opcode::UPSAMPLE_NEAREST,
       {unary("scale=[2,3]", [](Var x) { return upsample_nearest(x, {2, 3}); }, {}, Shape{1, 2, 3, 2}),
        unary("scale=[1,2]", [](Var x) { return upsample_nearest(x, {1, 2}); }, {}, Shape{2, 1, 2, 3}),
        unary("scale=[3,1]", [](Var x) { return upsample_nearest(x, {3, 1}); }, {}, Shape{1, 1, 2, 3})}},
      {Opcode::GLOBAL_AVGPOOL,
       {unary("[2,3,3,4]", [](Var x) { return global_avg_pool(x); }, {}, Shape{2, 3, 3, 4}),
        unary("1x1 planes", [](Var x) { return global_avg_pool(x); }, {}, Shape{2, 3, 1, 1})}},
      // The blocked layout's reorders (no shell functions: the layout pass writes them). Each
      // one's gradient is the other; the padding lanes of TO_NCHW's input get zeros.
      {Opcode::TO_NCHWC,
       {unary("block=8, 3 channels", [](Var x) { return reorder(x, Opcode::TO_NCHWC, "block", 8); }, {},
              Shape{2, 3, 2, 3}),
        unary("block=16, 17 channels", [](Var x) { return reorder(x, Opcode::TO_NCHWC, "block", 16); }, {},
              Shape{1, 17, 2, 1})}},
      {Opcode::TO_NCHW,
       {unary("13 channels of 2 blocks of 8", [](Var x) { return reorder(x, Opcode::TO_NCHW, "channels", 13); }, {},
              Shape{1, 2, 2, 3, 8}),
        unary("5 channels of a block of 16", [](Var x) { return reorder(x, Opcode::TO_NCHW, "channels", 5); }, {},
              Shape{2, 1, 1, 2, 16})}},
      {Opcode::SLICE,
       {unary("axis=1 [1:3]", [](Var x) { return slice(x, 1, 1, 3); }),
        unary("axis=-1 [-3:-1]", [](Var x) { return slice(x, -1, -3, -1); })}},
      {Opcode::PAD,
       {unary("pads=[1,0,2,0,1,1] value=0.5", [](Var x) { return pad(x, {1, 0, 2, 0, 1, 1}, 0.5f); })}},
      {Opcode::EXPAND,
       {unary("[3,1] -> [2,3,4]", [](Var x) { return expand(x, {2, 3, 4}); }, {}, Shape{3, 1}),
        unary("[] -> [2,2]", [](Var x) { return expand(x, {2, 2}); }, {}, Shape())}},
      {Opcode::COPY, {unary("", [](Var x) { return copy(x); })}},
      {Opcode::SOFTMAX_CE,
       {{"i32 class ids",
         [](Graph& g) {
           Var x = g.input("x", {4, 5}), t = g.input("t", {4}, DType::I32);
           return Built{softmax_ce(x, t), {x}};
         },
         all_of({put("x", uniform(-2, 2)), class_ids("t", 5)})},
        {"f32 probabilities, rank 3",
         [](Graph& g) {
           Var x = g.input("x", {2, 3, 4}), t = g.input("t", {2, 3, 4});
           return Built{softmax_ce(x, t), {x}};
         },
         all_of({put("x", uniform(-2, 2)), probabilities("t")})}}},
      {Opcode::MSE, {binary("both inputs", {3, 4}, {3, 4}, [](Var a, Var b) { return mse(a, b); })}},
      {Opcode::BCE_LOGITS,
       {binary("both inputs", {3, 4}, {3, 4}, [](Var a, Var b) { return bce_logits(a, b); },
               all_of({put("a", uniform(-3, 3)), put("b", uniform(0, 1))}))}},
      {Opcode::CALC, calc_cases()},
      {Opcode::WHERE,
       {{"cond [3,1] with [3,4] and [4]",
         [](Graph& g) {
           Var c = g.input("c", {3, 1}), a = g.input("a", {3, 4}), b = g.input("b", {4});
           return Built{where(c, a, b), {a, b}};
         },
         all_of({put("c", [](std::mt19937& rng) { return static_cast<float>(rng() % 2); }), put("a", uniform(-1, 1)),
                 put("b", uniform(-1, 1))})},
        {"i32 cond, a scalar b (masked_fill)",
         [](Graph& g) {
           Var c = g.input("c", {2, 3}, DType::I32), a = g.input("a", {2, 3}), b = g.input("b", {});
           return Built{where(c, a, b), {a, b}};
         },
         [](Executor& ex, std::mt19937& rng) {
           Tensor* t = ex.tensor("c");
           for (int64_t i = 0; i < t->numel(); ++i) t->i32()[i] = static_cast<int32_t>(rng() % 3) - 1;
         }}}},
      {Opcode::POW,
       {binary("[3,4]^[4], a > 0", {3, 4}, {4}, [](Var a, Var b) { return pow(a, b); },
               all_of({put("a", uniform(0.5, 2)), put("b", uniform(-2, 2))})),
        {"negative a, whole-number b (a const)",
         [](Graph& g) {
           Var a = g.input("a", {2, 3});
           Var k = g.constant("k", {3}, {2, 3, -1});
           return Built{pow(a, k), {a}};
         },
         put("a", signed_between(0.5, 1.5))}}},
      {Opcode::ERF, {unary("", [](Var x) { return erf(x); }, put("x", uniform(-2, 2)))}},
      {Opcode::CLAMP,
       {unary("min=-0.5 max=1", [](Var x) { return clamp(x, -0.5f, 1); }, put("x", away_from(-2, 2, {-0.5, 1}))),
        unary("min only", [](Var x) { return clamp(x, 0.25f, INFINITY); }, put("x", away_from(-1, 1, {0.25})))}},
      {Opcode::RECIPROCAL, {unary("away from 0", [](Var x) { return reciprocal(x); }, put("x", signed_between(0.5, 2)))}},
      {Opcode::SOFTPLUS, {unary("", [](Var x) { return softplus(x); }, put("x", uniform(-3, 3)))}},
      {Opcode::HARDSIGMOID,
       {unary("defaults", [](Var x) { return hardsigmoid(x); }, put("x", away_from(-4, 4, {-2.5, 2.5}))),
        unary("alpha=1/6", [](Var x) { return hardsigmoid(x, 1.f / 6, 0.5f); }, put("x", away_from(-4, 4, {-3, 3})))}},
      {Opcode::HARDSWISH, {unary("", [](Var x) { return hardswish(x); }, put("x", away_from(-5, 5, {-3, 3})))}},
      {Opcode::SELU, {unary("away from 0", [](Var x) { return selu(x); }, put("x", signed_between(0.1, 2)))}},
      {Opcode::PRELU,
       {binary("[2,3,4] with a per-channel [3,1]", {2, 3, 4}, {3, 1}, [](Var a, Var b) { return prelu(a, b); },
               all_of({put("a", signed_between(0.1, 1.5)), put("b", uniform(-0.5, 0.5))}))}},
      {Opcode::SIN, {unary("", [](Var x) { return sin(x); }, put("x", uniform(-4, 4)))}},
      {Opcode::COS, {unary("", [](Var x) { return cos(x); }, put("x", uniform(-4, 4)))}},
      {Opcode::GATHER,
       {{"embedding rows (axis 0)",
         [](Graph& g) {
           Var d = g.input("d", {5, 3}), i = g.input("i", {2, 4}, DType::I32);
           return Built{gather(d, i), {d}};
         },
         indices("i", 5)},
        {"axis=-2 of rank 3",
         [](Graph& g) {
           Var d = g.input("d", {2, 4, 3}), i = g.input("i", {5}, DType::I32);
           return Built{gather(d, i, -2), {d}};
         },
         indices("i", 4)}}},
  };
  return t;
}

bool has_rule(Opcode op) {
  const GradFn rule = op_hooks(op).grad;
  return rule != nullptr && rule != no_gradient;
}

std::vector<Opcode> ops_with_rules() {
  std::vector<Opcode> v;
  for (const OpInfo& info : all_ops())
    if (has_rule(info.op)) v.push_back(info.op);
  return v;
}

std::vector<TensorId> ids(const std::vector<Var>& vs) {
  std::vector<TensorId> out;
  for (const Var& v : vs) out.push_back(v.id());
  return out;
}

bool forward_uses(const Program& p, Opcode op) {
  const auto [b, e] = p.section_range(Section::FORWARD);
  for (size_t i = b; i < e; ++i)
    if (p.code()[i].op == op) return true;
  return false;
}

class GradCheck : public ::testing::TestWithParam<Opcode> {};

TEST_P(GradCheck, MatchesFiniteDifferences) {
  const Opcode op = GetParam();
  auto it = gradcheck_table().find(op);
  ASSERT_NE(it, gradcheck_table().end()) << op_info(op).mnemonic << " has a backward rule but no gradcheck case";
  ASSERT_FALSE(it->second.empty());
  uint64_t seed = 1;
  for (const GradCase& c : it->second) {
    SCOPED_TRACE(fmt::format("{} {}", op_info(op).mnemonic, c.what));
    Context ctx(seed);
    Program p(ctx);
    Graph g(p);
    const Built b = c.build(g);
    ASSERT_TRUE(g.status()) << g.status().message();
    ASSERT_TRUE(forward_uses(p, op)) << "test error: the case does not use the op";
    GradCheckOptions o;
    o.step = c.step;
    o.rtol = c.rtol;
    o.atol = c.atol;
    o.seed = seed;
    if (c.fill) {
      o.fill = [&c, seed](Executor& ex) {
        std::mt19937 rng(static_cast<uint32_t>(seed));
        c.fill(ex, rng);
      };
    }
    Result<GradCheckReport> r = check_gradients(p, b.y.id(), ids(b.wrt), o);
    ASSERT_TRUE(r) << r.status().message();
    EXPECT_TRUE(r->ok) << "worst: " << r->worst << " (max abs error " << r->max_abs_error << ")";
    EXPECT_GT(r->checked, 0);
    EXPECT_TRUE(std::isfinite(r->max_abs_error));
    ++seed;
  }
}

INSTANTIATE_TEST_SUITE_P(OpsWithRules, GradCheck, ::testing::ValuesIn(ops_with_rules()),
                         [](const ::testing::TestParamInfo<Opcode>& p) {
                           return std::string(op_info(p.param).mnemonic);
                         });

TEST(GradCheckTable, EveryOpWithARuleHasACase) {
  for (const OpInfo& info : all_ops()) {
    if (has_rule(info.op)) {
      EXPECT_EQ(gradcheck_table().count(info.op), 1u) << info.mnemonic << " has a backward rule but no gradcheck case";
    } else {
      EXPECT_EQ(gradcheck_table().count(info.op), 0u) << info.mnemonic << " has a case but no backward rule";
    }
  }
  // The ops this file expects to have no rule, so that a rule lost by accident shows up too.
  for (Opcode op : {Opcode::ACT_BWD, Opcode::SOFTMAX_CE_BWD, Opcode::BATCHNORM2D_BWD, Opcode::ADVANCE,
                    Opcode::LR_SCHEDULE, Opcode::CLIP_GRAD_NORM, Opcode::SGD, Opcode::ADAM, Opcode::ADAMW,
                    Opcode::RMSPROP, Opcode::MAXPOOL2D_BWD, Opcode::AVGPOOL2D_BWD, Opcode::GATHER_BWD,
                    Opcode::CONV_WEIGHTS_NCHWC, Opcode::DWCONV2D_NCHWC, Opcode::MAXPOOL2D_NCHWC,
                    Opcode::AVGPOOL2D_NCHWC, Opcode::GLOBAL_AVGPOOL_NCHWC, Opcode::CONV_WEIGHTS_WINOGRAD,
                    Opcode::CONV2D_WINOGRAD, Opcode::ASSIGN, Opcode::LSTM_BWD, Opcode::GRU_BWD,
                    Opcode::RNN_BWD, Opcode::LINEAR_BF16,
                    Opcode::LINEAR_WEIGHTS_I8, Opcode::LINEAR_I8, Opcode::CONV_WEIGHTS_I8, Opcode::CONV2D_I8,
                    Opcode::CONV_WEIGHTS_BF16, Opcode::CONV2D_BF16})
    EXPECT_EQ(op_hooks(op).grad, nullptr) << op_info(op).mnemonic;
  for (Opcode op : {Opcode::FILL, Opcode::STEP, Opcode::EQUAL, Opcode::LESS, Opcode::LESS_EQUAL, Opcode::GREATER,
                    Opcode::GREATER_EQUAL, Opcode::FLOOR, Opcode::CEIL, Opcode::ROUND, Opcode::SIGN, Opcode::ARGMAX,
                    Opcode::ARGMIN})
    EXPECT_EQ(op_hooks(op).grad, no_gradient) << op_info(op).mnemonic;
  EXPECT_GE(ops_with_rules().size(), 39u);
}

// ---------------------------------------------------------------------------------------------
// When there is no gradient to be had

// A fused activation whose derivative needs the pre-activation, which LINEAR does not keep.
TEST(GradErrors, LinearWithASmoothActivationSaysUnfuseIt) {
  for (Activation act : {Activation::GELU, Activation::SWISH, Activation::ELU}) {
    Context ctx;
    Program p(ctx);
    Graph g(p);
    Var x = g.input("x", {2, 3});
    Var w = g.param("w", {3, 4}, {InitKind::UNIFORM, -1, 1}), b = g.param("b", {4});
    Var y = reduce_sum(linear(x, w, b, act, 1.f));
    ASSERT_TRUE(g.status()) << g.status().message();
    const Result<std::vector<TensorId>> gr = grad(p, y.id(), {x.id()});
    ASSERT_FALSE(gr.is_ok());
    EXPECT_NE(gr.status().message().find(fmt::format("LINEAR with act={} has no backward rule: unfuse it",
                                                     activation_name(act))),
              std::string::npos)
        << gr.status().message();
  }
}

TEST(GradErrors, OpWithoutARuleOnThePathIsNamed) {
  {
    Context ctx;
    Program p(ctx);
    Graph g(p);
    Var x = g.input("x", {2, 3}), dy = g.input("dy", {2, 3}), z = g.input("z", {2});
    Var h = tanh(x);
    Var d = g.record(Opcode::ACT_BWD, {dy, h}, {{"fn", imm_i(0)}}, Loc::here());
    Var y = reduce_sum(d);
    Var y2 = reduce_sum(d) + reduce_sum(square(z));
    ASSERT_TRUE(g.status()) << g.status().message();
    Result<GradCheckReport> r = check_gradients(p, y.id(), {x.id()});
    ASSERT_FALSE(r.is_ok());
    const std::string m = r.status().message();
    EXPECT_NE(m.find("instruction 1 (ACT_BWD -> %"), std::string::npos) << m;
    EXPECT_NE(m.find("no backward rule"), std::string::npos) << m;
    EXPECT_NE(m.find("gradcheck_test.cpp"), std::string::npos) << m;  // the shell call's place
    // grad() itself says the same, and leaves no backward code behind it to run.
    const Result<std::vector<TensorId>> gr = grad(p, y.id(), {x.id()});
    ASSERT_FALSE(gr.is_ok());
    EXPECT_NE(gr.status().message().find("ACT_BWD"), std::string::npos) << gr.status().message();
    // Off the path it does not matter: d y2 / d z does not flow through ACT_BWD.
    Result<GradCheckReport> ok = check_gradients(p, y2.id(), {z.id()});
    ASSERT_TRUE(ok) << ok.status().message();
    EXPECT_TRUE(ok->ok) << ok->worst;
  }
  {
    Context ctx;
    Program p(ctx);
    Graph g(p);
    Var x = g.input("x", {3, 4}), t = g.input("t", {3}, DType::I32), dl = g.input("dl", {});
    Var y = reduce_sum(reduce_sum(g.record(Opcode::SOFTMAX_CE_BWD, {x, t, dl}, {}, Loc::here())));
    ASSERT_TRUE(g.status()) << g.status().message();
    Result<GradCheckReport> r = check_gradients(p, y.id(), {x.id()});
    ASSERT_FALSE(r.is_ok());
    EXPECT_NE(r.status().message().find("instruction 0 (SOFTMAX_CE_BWD -> %"), std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find("no backward rule"), std::string::npos) << r.status().message();
  }
}

TEST(GradErrors, SoftmaxCeTargetsHaveNoGradient) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {3, 4}), t = g.input("t", {3, 4}), ids = g.input("ids", {3}, DType::I32);
  Var y = softmax_ce(x, t) + softmax_ce(x, ids);
  ASSERT_TRUE(g.status()) << g.status().message();
  const Result<std::vector<TensorId>> gt = grad(p, y.id(), {t.id()});
  ASSERT_FALSE(gt.is_ok());
  EXPECT_NE(gt.status().message().find("SOFTMAX_CE has no gradient with respect to its targets"), std::string::npos)
      << gt.status().message();
  EXPECT_NE(gt.status().message().find("SOFTMAX_CE -> %"), std::string::npos) << gt.status().message();
  Result<GradCheckReport> ct = check_gradients(p, y.id(), {t.id()});
  ASSERT_FALSE(ct.is_ok());
  EXPECT_NE(ct.status().message().find("targets"), std::string::npos) << ct.status().message();
  // i32 class ids are not differentiable at all.
  const Result<std::vector<TensorId>> gi = grad(p, y.id(), {ids.id()});
  ASSERT_FALSE(gi.is_ok());
  EXPECT_NE(gi.status().message().find("targets"), std::string::npos) << gi.status().message();
  Result<GradCheckReport> ci = check_gradients(p, y.id(), {ids.id()});
  ASSERT_FALSE(ci.is_ok());
  EXPECT_NE(ci.status().message().find("%ids is i32[3]"), std::string::npos) << ci.status().message();
  // With respect to the logits alone, both forms are fine.
  GradCheckOptions o;
  o.fill = [](Executor& ex) {
    std::mt19937 rng(3);
    probabilities("t")(ex, rng);
    class_ids("ids", 4)(ex, rng);
  };
  Result<GradCheckReport> cx = check_gradients(p, y.id(), {x.id()}, o);
  ASSERT_TRUE(cx) << cx.status().message();
  EXPECT_TRUE(cx->ok) << cx->worst;
}

TEST(GradErrors, FillAndStepGiveZeroGradients) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {2, 3}), w = g.input("w", {2, 3});
  // d/dx Σ(step(x)·x + fill(x, 2)·w) = step(x): the product rule's x·step'(x) term is 0.
  Var y = reduce_sum(reduce_sum(step(x) * x + fill(x, 2) * w));
  Var only_masks = reduce_sum(reduce_sum(step(x) + fill(w, 3)));
  ASSERT_TRUE(g.status()) << g.status().message();

  GradCheckOptions o;
  o.fill = [](Executor& ex) {
    std::mt19937 rng(5);
    put("x", signed_between(0.1, 1))(ex, rng);
  };
  for (TensorId out : {y.id(), only_masks.id()}) {
    Result<GradCheckReport> r = check_gradients(p, out, {x.id(), w.id()}, o);
    ASSERT_TRUE(r) << r.status().message();
    EXPECT_TRUE(r->ok) << r->worst;
  }

  const Result<std::vector<TensorId>> gy = grad(p, y.id(), {x.id()});
  const Result<std::vector<TensorId>> gm = grad(p, only_masks.id(), {x.id(), w.id()});
  ASSERT_TRUE(gy) << gy.status().message();
  ASSERT_TRUE(gm) << gm.status().message();
  auto ex = Executor::prepare(p);
  ASSERT_TRUE(ex) << ex.status().message();
  const float xv[] = {-1, 0.5f, 2, -0.25f, 3, -4};
  for (int i = 0; i < 6; ++i) {
    ex.value()->tensor("x")->f32()[i] = xv[i];
    ex.value()->tensor("w")->f32()[i] = 7;
  }
  ex.value()->run(Section::FORWARD);
  ex.value()->run(Section::BACKWARD);
  const Context& c = *Context::of(p);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(c.at(gy.value()[0]).f32()[i], xv[i] >= 0 ? 1.f : 0.f) << i;
    EXPECT_EQ(c.at(gm.value()[0]).f32()[i], 0.f) << i;
    EXPECT_EQ(c.at(gm.value()[1]).f32()[i], 0.f) << i;
  }
}

// ---------------------------------------------------------------------------------------------
// The checker itself

// y = Σ relu(x)·r at x = 0: the rule says relu'(0) = 0, the difference quotient says ½.
TEST(GradCheckTool, ReportsAMismatchAndWhere) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {4});
  g.output(relu(x), "y");
  ASSERT_TRUE(g.status()) << g.status().message();
  GradCheckOptions o;
  o.fill = [](Executor& ex) {
    const float v[] = {1, -1, 0, 2};
    std::copy(v, v + 4, ex.tensor("x")->f32());
  };
  Result<GradCheckReport> r = check_gradients(p, p.find("y"), {x.id()}, o);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_FALSE(r->ok);
  EXPECT_EQ(r->checked, 4);
  EXPECT_EQ(r->worst.rfind("d %y / d %x[2]: analytic 0, numeric ", 0), 0u) << r->worst;
  // |r| is in [0.5, 1.5], so the numeric value is ±r/2.
  EXPECT_GE(r->max_abs_error, 0.25);
  EXPECT_LE(r->max_abs_error, 0.75);
  EXPECT_NEAR(r->max_rel_error, 1.0, 1e-6);
}

TEST(GradCheckTool, LeavesTheProgramAloneAndUsesItsValues) {
  Context ctx(42);
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {2, 3});
  Var w = g.param("w", {3, 2}, {InitKind::UNIFORM, -1, 1});
  Var b = g.param("b", {2}, {InitKind::ZEROS, 0, 0});
  Var y = reduce_mean(square(tanh(linear(x, w, b))), 0);
  ASSERT_TRUE(g.status()) << g.status().message();
  // The user prepared the program and holds values of their own.
  auto ex = Executor::prepare(p);
  ASSERT_TRUE(ex) << ex.status().message();
  ex.value()->tensor("w")->f32()[0] = 0.625f;
  ex.value()->tensor("x")->f32()[4] = -0.375f;
  const std::string before = program_print(p);
  const size_t n_tensors = p.tensors().size(), n_ctx = ctx.size();

  float seen_w = 0, seen_x = 0;
  GradCheckOptions o;
  o.fill = [&](Executor& e) {
    seen_w = e.tensor("w")->f32()[0];
    seen_x = e.tensor("x")->f32()[4];
  };
  Result<GradCheckReport> r = check_gradients(p, y.id(), {x.id(), w.id(), b.id()}, o);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_TRUE(r->ok) << r->worst;
  EXPECT_EQ(r->checked, 6 + 6 + 2);
  EXPECT_EQ(seen_w, 0.625f);
  EXPECT_EQ(seen_x, -0.375f);
  EXPECT_EQ(program_print(p), before);
  EXPECT_EQ(p.tensors().size(), n_tensors);
  EXPECT_EQ(ctx.size(), n_ctx);
  EXPECT_FALSE(p.has_section(Section::BACKWARD));
  // The same check again gives the same report: everything follows the seed.
  Result<GradCheckReport> again = check_gradients(p, y.id(), {x.id(), w.id(), b.id()}, o);
  ASSERT_TRUE(again) << again.status().message();
  EXPECT_EQ(again->max_abs_error, r->max_abs_error);
  EXPECT_EQ(again->worst, r->worst);
}

TEST(GradCheckTool, WorksOnATrainingProgramAndSamplesLargeTensors) {
  Context ctx(7);
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {4, 20});
  Var t = g.input("t", {4}, DType::I32);
  Var w = g.param("w", {20, 30}, {InitKind::UNIFORM, -0.3, 0.3});
  Var b = g.param("b", {30}, {InitKind::UNIFORM, -0.3, 0.3});
  Var loss = softmax_ce(linear(x, w, b), t);
  ASSERT_TRUE(g.status()) << g.status().message();
  const Result<std::vector<std::pair<TensorId, TensorId>>> grads = backward(p, loss.id());
  ASSERT_TRUE(grads) << grads.status().message();
  ASSERT_TRUE(p.has_section(Section::BACKWARD));  // forward code can no longer be appended here
  GradCheckOptions o;
  o.max_elements = 10;
  o.fill = [](Executor& ex) {
    std::mt19937 rng(11);
    class_ids("t", 30)(ex, rng);
  };
  Result<GradCheckReport> r = check_gradients(p, loss.id(), {w.id(), b.id(), x.id()}, o);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_TRUE(r->ok) << r->worst;
  EXPECT_EQ(r->checked, 30);
}

TEST(GradCheckTool, RefusesWhatItCannotCheck) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {3});
  Var h = exp(x);
  Var y = reduce_sum(h);
  ASSERT_TRUE(g.status()) << g.status().message();
  const auto message = [&](TensorId out, std::vector<TensorId> wrt, GradCheckOptions o = {}) {
    Result<GradCheckReport> r = check_gradients(p, out, wrt, o);
    return r.is_ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_NE(message(y.id(), {h.id()}).find("%t0 is computed by the program"), std::string::npos)
      << message(y.id(), {h.id()});
  EXPECT_NE(message(y.id(), {}).find("no tensors"), std::string::npos);
  EXPECT_NE(message(y.id(), {NO_TENSOR}).find("not in this program"), std::string::npos);
  EXPECT_NE(message(NO_TENSOR, {x.id()}).find("y is not a tensor"), std::string::npos);
  GradCheckOptions bad;
  bad.step = 0;
  EXPECT_NE(message(y.id(), {x.id()}, bad).find("step > 0"), std::string::npos);
  EXPECT_EQ(message(y.id(), {x.id()}), "ok");
}

}  // namespace
}  // namespace nnasm
