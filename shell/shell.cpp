// Shell functions: each builds one Instruction and records it through Graph::record, which runs
// the op's shape inference (via Program) and keeps the first error with the caller's position.
#include "shell/shell.h"

#include <cmath>

#include <fmt/format.h>

namespace nnasm {

const TensorType& Var::type() const { return g_->program().desc(id_).type; }
const std::string& Var::name() const { return g_->program().desc(id_).name; }

Var Graph::fail(const Status& s, Loc loc) {
  if (status_) status_ = Status::errorf("{}:{}: error: {}", loc.file, loc.line, s.message());
  return Var();
}

namespace {
Var declared(Graph* g, Result<TensorId> r, Loc loc) {
  if (!r) return g->fail(r.status(), loc);
  return Var(g, r.value());
}
}  // namespace

Var Graph::input(const std::string& name, Shape shape, DType dtype, Loc loc) {
  if (!status_) return Var();
  TensorDesc d;
  d.name = name;
  d.type = TensorType{dtype, shape};
  d.role = Role::INPUT;
  return declared(this, p_->declare(std::move(d)), loc);
}

namespace {
// An f32 tensor declared up front with an init kind: a param or state.
Var declared_f32(Graph* g, Program* p, const std::string& name, Shape shape, Role role, InitSpec init, Loc loc) {
  if (!g->status()) return Var();
  TensorDesc d;
  d.name = name;
  d.type = TensorType{DType::F32, shape};
  d.role = role;
  d.init = init;
  return declared(g, p->declare(std::move(d)), loc);
}
}  // namespace

Var Graph::param(const std::string& name, Shape shape, InitSpec init, Loc loc) {
  return declared_f32(this, p_, name, shape, Role::PARAM, init, loc);
}

Var Graph::state(const std::string& name, Shape shape, InitSpec init, Loc loc) {
  return declared_f32(this, p_, name, shape, Role::STATE, init, loc);
}

Var Graph::constant(const std::string& name, Shape shape, std::vector<double> values, DType dtype, Loc loc) {
  if (!status_) return Var();
  TensorDesc d;
  d.name = name;
  d.type = TensorType{dtype, shape};
  d.role = Role::CONST;
  d.values = std::move(values);
  return declared(this, p_->declare(std::move(d)), loc);
}

void Graph::output(Var v, const std::string& name, Loc loc) {
  if (!status_ || !v.valid()) return;
  if (!name.empty()) {
    Status s = p_->rename(v.id(), name);
    if (!s) {
      fail(s, loc);
      return;
    }
  }
  p_->mark_output(v.id());
}

Var Graph::record(Opcode op, std::vector<Var> in, const std::vector<std::pair<std::string, Imm>>& imm, Loc loc) {
  const std::vector<Var> outs = record_outputs(op, std::move(in), imm, loc);
  return outs.empty() ? Var() : outs[0];
}

std::vector<Var> Graph::record_outputs(Opcode op, std::vector<Var> in,
                                       const std::vector<std::pair<std::string, Imm>>& imm, Loc loc) {
  if (!status_) return {};
  Instruction ins = make_instruction(op, {}, {});
  for (const Var& v : in) {
    if (!v.valid() || v.graph() != this) {
      fail(Status::errorf("{}: an operand does not belong to this graph", ins.info().mnemonic), loc);
      return {};
    }
    ins.in.push_back(v.id());
  }
  for (const auto& [key, value] : imm)
    if (Status s = set_imm(ins, key, value); !s) {
      fail(s, loc);
      return {};
    }
  ins.loc = SrcLoc{loc.file, loc.line, 0};
  Result<std::vector<TensorId>> outs = p_->append_new(std::move(ins));
  if (!outs) {
    fail(outs.status(), loc);
    return {};
  }
  std::vector<Var> v;
  for (TensorId id : outs.value()) v.emplace_back(this, id);
  return v;
}

Var Graph::assign(Var dst, Var src, Loc loc) {
  if (!status_) return Var();
  if (!dst.valid() || dst.graph() != this || !src.valid() || src.graph() != this)
    return fail(Status::error("ASSIGN: an operand does not belong to this graph"), loc);
  Instruction ins = make_instruction(Opcode::ASSIGN, {dst.id(), src.id()}, {dst.id()});
  ins.loc = SrcLoc{loc.file, loc.line, 0};
  if (Status s = p_->append(std::move(ins)); !s) return fail(s, loc);
  return dst;
}

namespace {
Graph* graph_of(const At& a) { return a.v.graph(); }

Var rec(const At& a, Opcode op, std::vector<Var> in, const std::vector<std::pair<std::string, Imm>>& imm = {}) {
  Graph* g = graph_of(a);
  if (!g) return Var();  // an invalid Var came in: the error is already recorded
  return g->record(op, std::move(in), imm, a.loc);
}
}  // namespace

Var matmul(At a, Var b, bool ta, bool tb) {
  return rec(a, Opcode::MATMUL, {a.v, b}, {{"transA", imm_i(ta)}, {"transB", imm_i(tb)}});
}

Var linear(At x, Var w, Var b, Activation act, float act_alpha) {
  return rec(x, Opcode::LINEAR, {x.v, w, b},
             {{"act", imm_i(static_cast<int64_t>(act))}, {"act_alpha", imm_f(act_alpha)}});
}

Var linear_i8(At x, Var w_i8, Var scale, Var b, Activation act, float act_alpha, bool tensor_scale) {
  Graph* g = graph_of(x);
  if (!g) return Var();
  const std::vector<Var> packed = g->record_outputs(Opcode::LINEAR_WEIGHTS_I8, {w_i8}, {}, x.loc);
  if (packed.size() != 2) return Var();
  const int64_t mode = tensor_scale ? NNASM_CHOICE(LINEAR_I8, x_scale, tensor) : NNASM_CHOICE(LINEAR_I8, x_scale, row);
  return rec(x, Opcode::LINEAR_I8, {x.v, packed[0], packed[1], scale, b},
             {{"act", imm_i(static_cast<int64_t>(act))}, {"act_alpha", imm_f(act_alpha)}, {"x_scale", imm_i(mode)}});
}

Var linear(At x, int64_t out_features, const LinearOptions& opt) {
  Graph* g = graph_of(x);
  if (!g || !g->status()) return Var();
  const Shape& s = x.v.shape();
  if (s.rank < 1) return g->fail(Status::errorf("linear: input {} has rank 0", x.v.type().str()), x.loc);
  Program& p = g->program();
  const std::string wn = opt.name.empty() ? p.fresh_name("w") : opt.name + ".w";
  const std::string bn = opt.name.empty() ? p.fresh_name("b") : opt.name + ".b";
  Var w = g->param(wn, Shape{s[s.rank - 1], out_features}, opt.weight_init, x.loc);
  Var b = g->param(bn, Shape{out_features}, opt.bias_init, x.loc);
  return linear(x, w, b, opt.act, opt.act_alpha);
}

namespace {

// lstm, gru and rnn: one instruction per layer (ops/recurrent/), the layers' outputs rearranged
// into PyTorch's layouts. With opt.step each layer starts from its state tensors (initial=1) and
// ASSIGN writes the new h (and c) back after it.
Recurrent recurrent(const At& x, int64_t hidden, const RecurrentOptions& opt, Opcode op, const char* fn) {
  Graph* g = graph_of(x);
  if (!g || !g->status()) return {};
  auto fail = [&](const Status& s) {
    g->fail(s, x.loc);
    return Recurrent{};
  };
  auto at = [&](Var v) { return At(v, x.loc); };
  const Shape& s = x.v.shape();
  if (s.rank != (opt.step ? 2 : 3))
    return fail(Status::errorf("{}: input {} must be [{}]", fn, x.v.type().str(),
                               opt.step ? "N,I: one step per run" : opt.batch_first ? "N,T,I" : "T,N,I"));
  if (hidden <= 0) return fail(Status::errorf("{}: hidden size {} must be positive", fn, hidden));
  if (opt.layers < 1) return fail(Status::errorf("{}: layers={} must be at least 1", fn, opt.layers));
  if (opt.step && opt.bidirectional)
    return fail(Status::errorf("{}: step=true runs one step forward per run, but a bidirectional layer reads the "
                               "whole sequence",
                               fn));
  if (op == Opcode::RNN && opt.nonlinearity != Activation::TANH && opt.nonlinearity != Activation::RELU)
    return fail(Status::errorf("{}: nonlinearity must be Activation::TANH or Activation::RELU", fn));
  const bool lstm = op == Opcode::LSTM;
  const int64_t gates = lstm ? 4 : op == Opcode::GRU ? 3 : 1, d = opt.bidirectional ? 2 : 1, h = hidden;
  const bool batch_first = opt.batch_first && !opt.step;
  const int64_t n = opt.step || batch_first ? s[0] : s[1], t = opt.step ? 1 : batch_first ? s[1] : s[0];
  Program& p = g->program();
  const std::string base = opt.name.empty() ? p.fresh_name(fn) : opt.name;
  // PyTorch's reset_parameters, the bound rounded to a float as the listing spells it, so that a
  // printed program reads back with the same weights.
  const double k = static_cast<float>(1 / std::sqrt(static_cast<double>(h)));
  const InitSpec init{InitKind::UNIFORM, -k, k};

  std::vector<std::pair<std::string, Imm>> imm = {
      {"direction", imm_i(opt.bidirectional ? NNASM_CHOICE(LSTM, direction, bidirectional)
                                            : NNASM_CHOICE(LSTM, direction, forward))},
      {"batch_first", imm_i(batch_first)},
      {"initial", imm_i(opt.step)}};
  if (op == Opcode::GRU) imm.push_back({"linear_before_reset", imm_i(opt.linear_before_reset)});
  if (op == Opcode::RNN)
    imm.push_back({"activation", imm_i(opt.nonlinearity == Activation::RELU ? NNASM_CHOICE(RNN, activation, relu)
                                                                            : NNASM_CHOICE(RNN, activation, tanh))});

  Var in = opt.step ? reshape(at(x.v), {1, n, s[1]}) : x.v;
  std::vector<Var> hs, cs;
  for (int64_t layer = 0; layer < opt.layers && g->status(); ++layer) {
    const std::string l = fmt::format("{}.l{}", base, layer);
    const int64_t i = in.shape()[2];
    std::vector<Var> operands{in, g->param(l + ".w", Shape{d, gates * h, i}, init, x.loc),
                              g->param(l + ".r", Shape{d, gates * h, h}, init, x.loc),
                              g->param(l + ".b", Shape{d, 2 * gates * h}, init, x.loc)};
    Var h0, c0;
    if (opt.step) {
      operands.push_back(h0 = g->state(l + ".h", Shape{1, n, h}, {InitKind::ZEROS, 0, 0}, x.loc));
      if (lstm) operands.push_back(c0 = g->state(l + ".c", Shape{1, n, h}, {InitKind::ZEROS, 0, 0}, x.loc));
    }
    const std::vector<Var> outs = g->record_outputs(op, operands, imm, x.loc);
    if (outs.empty()) return {};
    if (opt.step) {
      g->assign(h0, outs[1], x.loc);
      if (lstm) g->assign(c0, outs[2], x.loc);
    }
    // y [T, D, N, H] (batch_first [N, T, D, H]) as the next layer's input [T, N, D·H] ([N, T, D·H]).
    const Var& y = outs[0];
    if (batch_first) in = reshape(at(y), {n, t, d * h});
    else if (d == 1) in = reshape(at(y), {t, n, h});
    else in = reshape(at(transpose(at(y), {0, 2, 1, 3})), {t, n, d * h});
    // The last states [D, N, H] (batch_first [N, D, H]), as PyTorch's h_n rows.
    for (size_t o = 1; o < outs.size(); ++o)
      (o == 1 ? hs : cs).push_back(batch_first ? transpose(at(outs[o]), {1, 0, 2}) : outs[o]);
  }
  if (!g->status()) return {};
  auto rows = [&](const std::vector<Var>& v) { return v.size() == 1 ? v[0] : concat(v, 0, x.loc); };
  Recurrent r;
  r.y = opt.step ? reshape(at(in), {n, h}) : in;
  r.h = rows(hs);
  if (lstm) r.c = rows(cs);
  if (!g->status()) return {};
  return r;
}

}  // namespace

Recurrent lstm(At x, int64_t hidden, const RecurrentOptions& opt) {
  return recurrent(x, hidden, opt, Opcode::LSTM, "lstm");
}
Recurrent gru(At x, int64_t hidden, const RecurrentOptions& opt) { return recurrent(x, hidden, opt, Opcode::GRU, "gru"); }
Recurrent rnn(At x, int64_t hidden, const RecurrentOptions& opt) { return recurrent(x, hidden, opt, Opcode::RNN, "rnn"); }

Var conv2d(At x, int64_t out_channels, std::vector<int64_t> kernel, const Conv2dOptions& opt) {
  Graph* g = graph_of(x);
  if (!g || !g->status()) return Var();
  const Shape& s = x.v.shape();
  if (s.rank != 4) return g->fail(Status::errorf("conv2d: input {} is not NCHW (rank 4)", x.v.type().str()), x.loc);
  if (kernel.size() != 2) return g->fail(Status::error("conv2d: kernel must be {kh, kw}"), x.loc);
  if (opt.groups < 1 || s[1] % opt.groups)
    return g->fail(Status::errorf("conv2d: groups={} must divide the {} input channels", opt.groups, s[1]), x.loc);
  Program& p = g->program();
  const std::string wn = opt.name.empty() ? p.fresh_name("w") : opt.name + ".w";
  Var w = g->param(wn, Shape{out_channels, s[1] / opt.groups, kernel[0], kernel[1]}, opt.weight_init, x.loc);
  Var b;
  if (opt.bias) b = g->param(opt.name.empty() ? p.fresh_name("b") : opt.name + ".b", Shape{out_channels}, opt.bias_init, x.loc);
  return conv2d(x, w, b, opt);
}

Var batchnorm2d(At x, const BatchNormOptions& opt) {
  Graph* g = graph_of(x);
  if (!g || !g->status()) return Var();
  const Shape& s = x.v.shape();
  if (s.rank < 2)
    return g->fail(Status::errorf("batchnorm2d: input {} needs rank ≥ 2 (channels on axis 1)", x.v.type().str()), x.loc);
  Program& p = g->program();
  const std::string n = opt.name.empty() ? p.fresh_name("bn") : opt.name;
  const Shape c{s[1]};
  Var gamma = g->param(n + ".gamma", c, {InitKind::ONES, 0, 0}, x.loc);
  Var beta = g->param(n + ".beta", c, {InitKind::ZEROS, 0, 0}, x.loc);
  Var mean = g->state(n + ".running_mean", c, {InitKind::ZEROS, 0, 0}, x.loc);
  Var var = g->state(n + ".running_var", c, {InitKind::ONES, 0, 0}, x.loc);
  return g->record(Opcode::BATCHNORM2D, {x.v, gamma, beta, mean, var},
                   {{"eps", imm_f(opt.eps)}, {"momentum", imm_f(opt.momentum)}}, x.loc);
}

Var dropout(At x, float rate) {
  Graph* g = graph_of(x);
  if (!g || !g->status()) return Var();
  int64_t key = 1;
  for (const Instruction& ins : g->program().code()) key += ins.op == Opcode::DROPOUT;
  return rec(x, Opcode::DROPOUT, {x.v}, {{"rate", imm_f(rate)}, {"key", imm_i(key)}});
}

namespace {

// CONV2D's, CONV2D_I8's and CONV2D_BF16's geometry and activation immediates from opt.
std::vector<std::pair<std::string, Imm>> conv_imms(const Conv2dOptions& opt) {
  return {{"stride", imm_ints(opt.stride)},
          {"pad", imm_ints(opt.pad)},
          {"dilation", imm_ints(opt.dilation)},
          {"groups", imm_i(opt.groups)},
          {"act", imm_i(static_cast<int64_t>(opt.act))},
          {"act_alpha", imm_f(opt.act_alpha)}};
}

}  // namespace

Var conv2d(At x, Var w, Var b, const Conv2dOptions& opt) {
  Graph* g = graph_of(x);
  if (!g || !g->status()) return Var();
  std::vector<Var> in{x.v, w};
  if (b.valid()) in.push_back(b);
  return g->record(Opcode::CONV2D, in, conv_imms(opt), x.loc);
}

Var conv2d_i8(At x, Var w_i8, Var scale, Var b, const Conv2dOptions& opt, bool tensor_scale) {
  Graph* g = graph_of(x);
  if (!g || !g->status()) return Var();
  const std::vector<Var> packed = g->record_outputs(Opcode::CONV_WEIGHTS_I8, {w_i8}, {}, x.loc);
  if (packed.size() != 2) return Var();
  std::vector<Var> in{x.v, packed[0], packed[1], scale};
  if (b.valid()) in.push_back(b);
  const int64_t mode = tensor_scale ? NNASM_CHOICE(CONV2D_I8, x_scale, tensor) : NNASM_CHOICE(CONV2D_I8, x_scale, image);
  std::vector<std::pair<std::string, Imm>> imms = conv_imms(opt);
  imms.emplace_back("x_scale", imm_i(mode));
  return g->record(Opcode::CONV2D_I8, in, imms, x.loc);
}

// The transpose recorded first: on a param or constant the derive pass hoists it out of the runs.
Var conv2d_bf16(At x, Var w_bf16, Var b, const Conv2dOptions& opt) {
  Graph* g = graph_of(x);
  if (!g || !g->status()) return Var();
  const Var wt = g->record(Opcode::CONV_WEIGHTS_BF16, {w_bf16}, {}, x.loc);
  std::vector<Var> in{x.v, wt};
  if (b.valid()) in.push_back(b);
  return g->record(Opcode::CONV2D_BF16, in, conv_imms(opt), x.loc);
}

// The stride recorded is the kernel when none is given, so the listing says what runs.
Var max_pool2d(At x, std::vector<int64_t> kernel, std::vector<int64_t> stride, std::vector<int64_t> pad, bool ceil_mode) {
  if (stride.empty()) stride = kernel;
  return rec(x, Opcode::MAXPOOL2D, {x.v},
             {{"kernel", imm_ints(std::move(kernel))},
              {"stride", imm_ints(std::move(stride))},
              {"pad", imm_ints(std::move(pad))},
              {"ceil_mode", imm_i(ceil_mode)}});
}

Var avg_pool2d(At x, std::vector<int64_t> kernel, std::vector<int64_t> stride, std::vector<int64_t> pad,
               bool count_include_pad, bool ceil_mode) {
  if (stride.empty()) stride = kernel;
  return rec(x, Opcode::AVGPOOL2D, {x.v},
             {{"kernel", imm_ints(std::move(kernel))},
              {"stride", imm_ints(std::move(stride))},
              {"pad", imm_ints(std::move(pad))},
              {"count_include_pad", imm_i(count_include_pad)},
              {"ceil_mode", imm_i(ceil_mode)}});
}

Var add(At a, Var b, float alpha, float beta) {
  return rec(a, Opcode::ADD, {a.v, b}, {{"alpha", imm_f(alpha)}, {"beta", imm_f(beta)}});
}
Var sub(At a, Var b) { return rec(a, Opcode::SUB, {a.v, b}); }
Var mul(At a, Var b) { return rec(a, Opcode::MUL, {a.v, b}); }
Var div(At a, Var b) { return rec(a, Opcode::DIV, {a.v, b}); }
Var maximum(At a, Var b) { return rec(a, Opcode::MAXIMUM, {a.v, b}); }
Var minimum(At a, Var b) { return rec(a, Opcode::MINIMUM, {a.v, b}); }
Var pow(At a, Var b) { return rec(a, Opcode::POW, {a.v, b}); }
Var equal(At a, Var b) { return rec(a, Opcode::EQUAL, {a.v, b}); }
Var less(At a, Var b) { return rec(a, Opcode::LESS, {a.v, b}); }
Var less_equal(At a, Var b) { return rec(a, Opcode::LESS_EQUAL, {a.v, b}); }
Var greater(At a, Var b) { return rec(a, Opcode::GREATER, {a.v, b}); }
Var greater_equal(At a, Var b) { return rec(a, Opcode::GREATER_EQUAL, {a.v, b}); }
Var where(At cond, Var a, Var b) { return rec(cond, Opcode::WHERE, {cond.v, a, b}); }
Var operator+(At a, Var b) { return add(a, b); }
Var operator-(At a, Var b) { return sub(a, b); }
Var operator*(At a, Var b) { return mul(a, b); }
Var operator/(At a, Var b) { return div(a, b); }
Var operator*(float s, At a) { return scale(a, s); }
Var operator*(At a, float s) { return scale(a, s); }
Var operator-(At a) { return neg(a); }

Var scale(At x, float alpha) { return rec(x, Opcode::SCALE, {x.v}, {{"alpha", imm_f(alpha)}}); }
Var neg(At x) { return rec(x, Opcode::NEG, {x.v}); }
Var exp(At x) { return rec(x, Opcode::EXP, {x.v}); }
Var log(At x) { return rec(x, Opcode::LOG, {x.v}); }
Var sqrt(At x) { return rec(x, Opcode::SQRT, {x.v}); }
Var abs(At x) { return rec(x, Opcode::ABS, {x.v}); }
Var square(At x) { return rec(x, Opcode::SQUARE, {x.v}); }
Var relu(At x) { return rec(x, Opcode::RELU, {x.v}); }
Var leakyrelu(At x, float slope) { return rec(x, Opcode::LEAKYRELU, {x.v}, {{"slope", imm_f(slope)}}); }
Var elu(At x, float alpha) { return rec(x, Opcode::ELU, {x.v}, {{"alpha", imm_f(alpha)}}); }
Var clipped_relu(At x, float t) { return rec(x, Opcode::CLIPPED_RELU, {x.v}, {{"threshold", imm_f(t)}}); }
Var sigmoid(At x) { return rec(x, Opcode::SIGMOID, {x.v}); }
Var tanh(At x) { return rec(x, Opcode::TANH, {x.v}); }
Var gelu(At x, bool tanh_approx) { return rec(x, Opcode::GELU, {x.v}, {{"approx", imm_i(tanh_approx ? 1 : 0)}}); }
Var swish(At x, float beta) { return rec(x, Opcode::SWISH, {x.v}, {{"beta", imm_f(beta)}}); }
Var erf(At x) { return rec(x, Opcode::ERF, {x.v}); }
Var reciprocal(At x) { return rec(x, Opcode::RECIPROCAL, {x.v}); }
Var floor(At x) { return rec(x, Opcode::FLOOR, {x.v}); }
Var ceil(At x) { return rec(x, Opcode::CEIL, {x.v}); }
Var round(At x) { return rec(x, Opcode::ROUND, {x.v}); }
Var sign(At x) { return rec(x, Opcode::SIGN, {x.v}); }
Var softplus(At x) { return rec(x, Opcode::SOFTPLUS, {x.v}); }
Var hardsigmoid(At x, float alpha, float beta) {
  return rec(x, Opcode::HARDSIGMOID, {x.v}, {{"alpha", imm_f(alpha)}, {"beta", imm_f(beta)}});
}
Var hardswish(At x) { return rec(x, Opcode::HARDSWISH, {x.v}); }
Var selu(At x) { return rec(x, Opcode::SELU, {x.v}); }
Var sin(At x) { return rec(x, Opcode::SIN, {x.v}); }
Var cos(At x) { return rec(x, Opcode::COS, {x.v}); }
Var prelu(At x, Var slope) { return rec(x, Opcode::PRELU, {x.v, slope}); }
Var clamp(At x, float lo, float hi) { return rec(x, Opcode::CLAMP, {x.v}, {{"min", imm_f(lo)}, {"max", imm_f(hi)}}); }

Var softmax(At x, int64_t axis) { return rec(x, Opcode::SOFTMAX, {x.v}, {{"axis", imm_i(axis)}}); }
Var logsoftmax(At x, int64_t axis) { return rec(x, Opcode::LOGSOFTMAX, {x.v}, {{"axis", imm_i(axis)}}); }
Var reduce_sum(At x, int64_t axis, bool keep) {
  return rec(x, Opcode::REDUCE_SUM, {x.v}, {{"axis", imm_i(axis)}, {"keepdims", imm_i(keep)}});
}
Var reduce_mean(At x, int64_t axis, bool keep) {
  return rec(x, Opcode::REDUCE_MEAN, {x.v}, {{"axis", imm_i(axis)}, {"keepdims", imm_i(keep)}});
}
Var reduce_max(At x, int64_t axis, bool keep) {
  return rec(x, Opcode::REDUCE_MAX, {x.v}, {{"axis", imm_i(axis)}, {"keepdims", imm_i(keep)}});
}
Var reduce_min(At x, int64_t axis, bool keep) {
  return rec(x, Opcode::REDUCE_MIN, {x.v}, {{"axis", imm_i(axis)}, {"keepdims", imm_i(keep)}});
}
Var reduce_prod(At x, int64_t axis, bool keep) {
  return rec(x, Opcode::REDUCE_PROD, {x.v}, {{"axis", imm_i(axis)}, {"keepdims", imm_i(keep)}});
}
Var argmax(At x, int64_t axis, bool keep) {
  return rec(x, Opcode::ARGMAX, {x.v}, {{"axis", imm_i(axis)}, {"keepdims", imm_i(keep)}});
}
Var argmin(At x, int64_t axis, bool keep) {
  return rec(x, Opcode::ARGMIN, {x.v}, {{"axis", imm_i(axis)}, {"keepdims", imm_i(keep)}});
}

Var reshape(At x, std::vector<int64_t> shape) {
  return rec(x, Opcode::RESHAPE, {x.v}, {{"shape", imm_ints(std::move(shape))}});
}
Var transpose(At x, std::vector<int64_t> perm) {
  return rec(x, Opcode::TRANSPOSE, {x.v}, {{"perm", imm_ints(std::move(perm))}});
}
Var concat(const std::vector<Var>& xs, int64_t axis, Loc loc) {
  if (xs.empty() || !xs[0].valid()) return Var();
  return xs[0].graph()->record(Opcode::CONCAT, xs, {{"axis", imm_i(axis)}}, loc);
}
Var slice(At x, int64_t axis, int64_t start, int64_t end) {
  return rec(x, Opcode::SLICE, {x.v}, {{"axis", imm_i(axis)}, {"start", imm_i(start)}, {"end", imm_i(end)}});
}
Var copy(At x) { return rec(x, Opcode::COPY, {x.v}); }
// CAST's `to` choices are f32, i32, in that order.
Var cast(At x, DType to) { return rec(x, Opcode::CAST, {x.v}, {{"to", imm_i(to == DType::I32 ? 1 : 0)}}); }
Var fill(At like, float value) { return rec(like, Opcode::FILL, {like.v}, {{"value", imm_f(value)}}); }
Var expand(At x, std::vector<int64_t> shape) {
  return rec(x, Opcode::EXPAND, {x.v}, {{"shape", imm_ints(std::move(shape))}});
}
Var pad(At x, std::vector<int64_t> pads, float value) {
  return rec(x, Opcode::PAD, {x.v}, {{"pads", imm_ints(std::move(pads))}, {"value", imm_f(value)}});
}
Var flatten(At x, int64_t axis) { return rec(x, Opcode::FLATTEN, {x.v}, {{"axis", imm_i(axis)}}); }
Var upsample_nearest(At x, std::vector<int64_t> scale) {
  return rec(x, Opcode::UPSAMPLE_NEAREST, {x.v}, {{"scale", imm_ints(std::move(scale))}});
}
Var global_avg_pool(At x) { return rec(x, Opcode::GLOBAL_AVGPOOL, {x.v}); }
Var step(At x) { return rec(x, Opcode::STEP, {x.v}); }
Var gather(At data, Var indices, int64_t axis) {
  return rec(data, Opcode::GATHER, {data.v, indices}, {{"axis", imm_i(axis)}});
}
Var calc(const std::vector<Var>& xs, const std::string& expr, Loc loc) {
  if (xs.empty() || !xs[0].valid()) return Var();
  return xs[0].graph()->record(Opcode::CALC, xs, {{"expr", imm_str(expr)}}, loc);
}

Var softmax_ce(At logits, Var targets) { return rec(logits, Opcode::SOFTMAX_CE, {logits.v, targets}); }
Var mse(At prediction, Var target) { return rec(prediction, Opcode::MSE, {prediction.v, target}); }
Var bce_logits(At logits, Var target) { return rec(logits, Opcode::BCE_LOGITS, {logits.v, target}); }

}  // namespace nnasm
