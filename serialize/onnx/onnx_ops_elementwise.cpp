// ONNX's elementwise ops: those with an instruction of their own (Relu → RELU, Add → ADD, numpy
// broadcasting as ONNX's), activations that are a short expression of existing ops as one CALC
// (Selu, HardSigmoid, Softplus, Shrink, Cosh, ...), variadic Max/Min/Sum/Mean as chains, Clip as MAXIMUM and
// MINIMUM (CLIPPED_RELU for Clip(0, t)), and Pow for the exponents an instruction computes.
#include <algorithm>
#include <iterator>

#include <fmt/format.h>

#include "serialize/onnx/onnx_host.h"
#include "serialize/onnx/onnx_ops.h"

namespace nnasm {

namespace {

std::string num(double v) { return float_to_string(static_cast<float>(v)); }

// Records CALC with `expr` over `xs`.
Status calc(NodeLowering& n, std::vector<TensorId> xs, const std::string& expr, TensorId* y) {
  return n.emit(Opcode::CALC, std::move(xs), {{"expr", imm_str(expr)}}, y);
}

// The CALC expression of a one-input activation, reading its attributes.
Status calc_unary_expr(NodeLowering& n, std::string* expr) {
  const std::string& op = n.node().op_type;
  if (op == "Selu") {
    float alpha = 1.67326319217681884765625f, gamma = 1.05070102214813232421875f;
    NNASM_TRY(n.attr("alpha", &alpha));
    NNASM_TRY(n.attr("gamma", &gamma));
    *expr = fmt::format("scale(elu(%0,alpha={}),alpha={})", num(alpha), num(gamma));
  } else if (op == "Celu") {
    // alpha·elu(x/alpha): x > 0 gives x (within a rounding), else alpha·(e^(x/alpha) − 1).
    float alpha = 1;
    NNASM_TRY(n.attr("alpha", &alpha));
    if (alpha == 0) return Status::error("alpha is 0");
    *expr = alpha == 1 ? "elu(%0)" : fmt::format("scale(elu(scale(%0,alpha={})),alpha={})", num(1 / alpha), num(alpha));
  } else if (op == "HardSigmoid") {
    float alpha = 0.2f, beta = 0.5f;
    NNASM_TRY(n.attr("alpha", &alpha));
    NNASM_TRY(n.attr("beta", &beta));
    *expr = fmt::format("clipped_relu(add(scale(%0,alpha={}),{}),threshold=1)", num(alpha), num(beta));
  } else if (op == "HardSwish") {
    *expr = fmt::format("mul(%0,clipped_relu(add(scale(%0,alpha={}),0.5),threshold=1))", num(1.0 / 6));
  } else if (op == "Softsign") {
    *expr = "div(%0,add(abs(%0),1))";
  } else if (op == "Softplus") {
    *expr = "log(add(exp(%0),1))";
  } else if (op == "Reciprocal") {
    *expr = "div(1,%0)";
  } else if (op == "ThresholdedRelu") {
    // x > alpha ? x : 0, as x·(1 − step(alpha − x)): step is 1 exactly where alpha − x ≥ 0.
    float alpha = 1;
    NNASM_TRY(n.attr("alpha", &alpha));
    *expr = fmt::format("mul(%0,sub(1,step(sub({},%0))))", num(alpha));
  } else if (op == "Shrink") {
    // x − clamp(x, −λ, λ) is x ∓ λ outside [−λ, λ] and 0 inside; its sign times λ − bias moves
    // the outside to x ∓ bias. No product with a 0/1 mask, so ±inf stays ±inf.
    float lambd = 0.5f, bias = 0;
    NNASM_TRY(n.attr("lambd", &lambd));
    NNASM_TRY(n.attr("bias", &bias));
    const std::string soft = fmt::format("sub(%0,clamp(%0,min={},max={}))", num(-lambd), num(lambd));
    *expr = lambd == bias ? soft : fmt::format("add({0},scale(sign({0}),alpha={1}))", soft, num(lambd - bias));
  } else if (op == "Cosh") {
    // No cancellation: both terms are positive.
    *expr = "scale(add(exp(%0),exp(neg(%0))),alpha=0.5)";
  } else {
    return Status::error("not supported");
  }
  return Status::ok();
}

// sinh x = sign(x)·s(|x|) with no cancellation anywhere. Below 1, from u = expm1(−|x|) (ELU's,
// accurate near 0): e^|x| = 1/(1 + u), so s = (1/(1 + u) − (1 + u))/2 = −u(2 + u)/(2(1 + u)).
// From 1 up, e^−|x| is under 0.14 of e^|x|: s = h − 1/(4h) with h = e^|x|/2 = (e^(|x|/2)/2)·e^(|x|/2),
// which stays finite up to where sinh itself overflows (e^|x| alone would not). A WHERE picks.
Status sinh(NodeLowering& n, TensorId x, TensorId* y) {
  const std::string u = "elu(neg(abs(%0)))", e = "exp(scale(abs(%0),alpha=0.5))";
  TensorId small, large, below_one;
  NNASM_TRY(calc(n, {x}, fmt::format("mul(sign(%0),div(mul(neg({0}),add({0},2)),scale(add({0},1),alpha=2)))", u), &small));
  NNASM_TRY(calc(n, {x}, fmt::format("mul(sign(%0),sub(mul(scale({0},alpha=0.5),{0}),div(0.25,mul(scale({0},alpha=0.5),{0}))))", e), &large));
  NNASM_TRY(calc(n, {x}, "less(abs(%0),1)", &below_one));
  return n.emit(Opcode::WHERE, {below_one, small, large}, {}, y);
}

}  // namespace

Status map_unary(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(1, 1));
  const std::string& op = n.node().op_type;
  TensorId x, y;
  NNASM_TRY(n.tensor(0, &x));
  if (op == "LeakyRelu") {
    float alpha = 0.01f;
    NNASM_TRY(n.attr("alpha", &alpha));
    NNASM_TRY(n.emit(Opcode::LEAKYRELU, {x}, {{"slope", imm_f(alpha)}}, &y));
  } else if (op == "Elu") {
    float alpha = 1;
    NNASM_TRY(n.attr("alpha", &alpha));
    NNASM_TRY(n.emit(Opcode::ELU, {x}, {{"alpha", imm_f(alpha)}}, &y));
  } else if (op == "Sinh") {
    NNASM_TRY(sinh(n, x, &y));
  } else if (op == "Tan") {
    // sin / cos as instructions: SIN and COS are no CALC building blocks.
    TensorId s, c;
    NNASM_TRY(n.emit(Opcode::SIN, {x}, {}, &s));
    NNASM_TRY(n.emit(Opcode::COS, {x}, {}, &c));
    NNASM_TRY(n.emit(Opcode::DIV, {s, c}, {}, &y));
  } else {
    static const std::pair<const char*, Opcode> plain[] = {
        {"Relu", Opcode::RELU}, {"Sigmoid", Opcode::SIGMOID}, {"Tanh", Opcode::TANH}, {"Exp", Opcode::EXP},
        {"Log", Opcode::LOG},   {"Sqrt", Opcode::SQRT},       {"Abs", Opcode::ABS},   {"Neg", Opcode::NEG},
        {"Erf", Opcode::ERF},   {"Floor", Opcode::FLOOR},     {"Ceil", Opcode::CEIL}, {"Sign", Opcode::SIGN},
        {"Sin", Opcode::SIN},   {"Cos", Opcode::COS},         {"Round", Opcode::ROUND},
    };
    const auto* it = std::find_if(std::begin(plain), std::end(plain), [&](const auto& p) { return op == p.first; });
    if (it == std::end(plain)) return Status::error("not supported");
    NNASM_TRY(n.emit(it->second, {x}, {}, &y));
  }
  n.set(0, y, n.type(0));
  return Status::ok();
}

Status map_calc_unary(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(1, 1));
  std::string expr;
  NNASM_TRY(calc_unary_expr(n, &expr));
  TensorId x, y;
  NNASM_TRY(n.tensor(0, &x));
  NNASM_TRY(calc(n, {x}, expr, &y));
  n.set(0, y, n.type(0));
  return Status::ok();
}

Status map_binary(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(2, 2));
  const std::string& op = n.node().op_type;
  const Opcode code = op == "Add" ? Opcode::ADD : op == "Sub" ? Opcode::SUB : op == "Mul" ? Opcode::MUL : Opcode::DIV;
  TensorId a, b, y;
  NNASM_TRY(n.tensor(0, &a));
  NNASM_TRY(n.tensor(1, &b));
  NNASM_TRY(n.emit(code, {a, b}, {}, &y));
  n.set(0, y, n.type(0));
  return Status::ok();
}

Status map_variadic(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(1, -1));
  const std::string& op = n.node().op_type;
  const Opcode code = op == "Max" ? Opcode::MAXIMUM : op == "Min" ? Opcode::MINIMUM : Opcode::ADD;
  TensorId y;
  NNASM_TRY(n.tensor(0, &y));
  for (int k = 1; k < n.inputs(); ++k) {
    TensorId x;
    NNASM_TRY(n.tensor(k, &x));
    NNASM_TRY(n.emit(code, {y, x}, {}, &y));
  }
  if (op == "Mean" && n.inputs() > 1)
    NNASM_TRY(n.emit(Opcode::SCALE, {y}, {{"alpha", imm_f(1.0 / n.inputs())}}, &y));
  n.set(0, y, n.type(0));
  return Status::ok();
}

Status map_prelu(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(2, 2));
  TensorId x, slope, y;
  NNASM_TRY(n.tensor(0, &x));
  NNASM_TRY(n.tensor(1, &slope));
  NNASM_TRY(calc(n, {x, slope}, "add(relu(%0),mul(%1,minimum(%0,0)))", &y));
  if (shape_dims(n.tensor_type(y).shape) != n.dims(0)) return Status::error("the slope does not broadcast to the input");
  n.set(0, y, n.type(0));
  return Status::ok();
}

Status map_clip(NodeLowering& n) {
  // Bounds: attributes before opset 11, optional inputs (scalars, maybe computed at run time) since.
  TensorId x, y, bound[2] = {NO_TENSOR, NO_TENSOR};
  bool known[2] = {false, false};
  float value[2] = {0, 0};
  if (n.opset() < 11) {
    NNASM_TRY(n.expect_inputs(1, 1));
    for (int k : {0, 1}) {
      known[k] = n.has_attr(k == 0 ? "min" : "max");
      NNASM_TRY(n.attr(k == 0 ? "min" : "max", &value[k]));
    }
  } else {
    NNASM_TRY(n.expect_inputs(1, 3));
    for (int k : {0, 1}) {
      const HostTensor* h;
      if (!n.has(k + 1) || !n.is_host(k + 1) || n.value(k + 1).weight) continue;
      NNASM_TRY(n.host(k + 1, k == 0 ? "min" : "max", &h));
      if (h->numel() != 1) return Status::error("min and max must be scalars");
      known[k] = true;
      value[k] = static_cast<float>(h->as_double(0));
    }
  }
  NNASM_TRY(n.tensor(0, &x));
  // Clip(0, t) is ReLU6's form: one CLIPPED_RELU.
  if (known[0] && known[1] && value[0] == 0 && value[1] > 0 && n.tensor_type(x).dtype == DType::F32) {
    NNASM_TRY(n.emit(Opcode::CLIPPED_RELU, {x}, {{"threshold", imm_f(value[1])}}, &y));
    n.set(0, y, n.type(0));
    return Status::ok();
  }
  for (int k : {0, 1}) {
    if (known[k]) NNASM_TRY(n.scalar(value[k], &bound[k]));
    else if (n.opset() >= 11 && n.has(k + 1)) NNASM_TRY(n.tensor(k + 1, &bound[k]));
  }
  y = x;
  if (bound[0] != NO_TENSOR) NNASM_TRY(n.emit(Opcode::MAXIMUM, {y, bound[0]}, {}, &y));
  if (bound[1] != NO_TENSOR) NNASM_TRY(n.emit(Opcode::MINIMUM, {y, bound[1]}, {}, &y));
  if (shape_dims(n.tensor_type(y).shape) != n.dims(0)) return Status::error("min and max must be scalars");
  n.set(0, y, n.type(0));
  return Status::ok();
}

Status map_pow(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(2, 2));
  TensorId x, y;
  NNASM_TRY(n.tensor(0, &x));
  // One exponent known at import time: the instruction that computes that power (the common
  // x², √x, 1/x of exported models); anything else is POW (C's pow, reference kernel).
  const HostTensor* e = nullptr;
  double p = 0.25;  // none of the cases below
  if (n.is_host(1)) {
    NNASM_TRY(n.host(1, "exponent", &e));
    bool uniform = e->numel() > 0;
    for (int64_t k = 1; uniform && k < e->numel(); ++k) uniform = e->as_double(k) == e->as_double(0);
    std::vector<int64_t> dims;
    if (uniform && broadcast_dims(n.dims(0), e->dims, &dims).is_ok() && dims == n.dims(0)) p = e->as_double(0);
  }
  if (p == 1) y = x;
  else if (p == 2) NNASM_TRY(n.emit(Opcode::SQUARE, {x}, {}, &y));
  else if (p == 0.5) NNASM_TRY(n.emit(Opcode::SQRT, {x}, {}, &y));
  else if (p == 0) NNASM_TRY(n.emit(Opcode::FILL, {x}, {{"value", imm_f(1)}}, &y));
  else if (p == 3) NNASM_TRY(calc(n, {x}, "mul(square(%0),%0)", &y));
  else if (p == -1) NNASM_TRY(calc(n, {x}, "div(1,%0)", &y));
  else if (p == -0.5) NNASM_TRY(calc(n, {x}, "div(1,sqrt(%0))", &y));
  else if (p == -2) NNASM_TRY(calc(n, {x}, "div(1,square(%0))", &y));
  else {
    TensorId b;
    NNASM_TRY(n.tensor(1, &b));
    // Integers (i32) are computed in f32 through CAST: exact while the operands and the power
    // stay within 2^24; an integer base gives an integer power, truncated back (ONNX's type T).
    const bool int_base = n.tensor_type(x).dtype == DType::I32;
    if (int_base) NNASM_TRY(n.emit(Opcode::CAST, {x}, {{"to", imm_i(0)}}, &x));
    if (n.tensor_type(b).dtype == DType::I32) NNASM_TRY(n.emit(Opcode::CAST, {b}, {{"to", imm_i(0)}}, &b));
    NNASM_TRY(n.emit(Opcode::POW, {x, b}, {}, &y));
    if (int_base) NNASM_TRY(n.emit(Opcode::CAST, {y}, {{"to", imm_i(1)}}, &y));
    if (shape_dims(n.tensor_type(y).shape) != n.dims(0)) return Status::error("the exponent broadcasts the base to a larger shape");
  }
  n.set(0, y, n.type(0));
  return Status::ok();
}

}  // namespace nnasm
