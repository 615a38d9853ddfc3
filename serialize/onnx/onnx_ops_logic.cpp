// ONNX's BOOL-valued ops, and OneHot, a mask made into values. A BOOL tensor is an f32 mask of 0 and 1 (onnx_to_dtype): the
// comparisons are EQUAL, LESS, ... (which give exactly that), Not is 1 − x, And x·y, Or max(x, y),
// Xor x ≠ y, Where is WHERE with the mask as its condition, IsNaN and IsInf comparisons in a
// CALC. Every result is 0 or 1 exactly, so masks compose without rounding. No gradient flows
// through a mask (a comparison's is zero, as PyTorch's); Where's branches get theirs from WHERE.
// On values known at import time each op is computed then (integers compared exactly, in int64);
// integers compared at run time are CAST to f32 first, exact for magnitudes up to 2^24 (beyond
// that, neighbouring integers can compare equal).
#include <cmath>

#include <fmt/format.h>

#include "serialize/onnx/onnx_host.h"
#include "serialize/onnx/onnx_ops.h"

namespace nnasm {

namespace {

// The comparison of a node, as a function on int64 values and on floats.
template <typename T>
bool compare(const std::string& op, T a, T b) {
  if (op == "Equal") return a == b;
  if (op == "Less") return a < b;
  if (op == "LessOrEqual") return a <= b;
  if (op == "Greater") return a > b;
  return a >= b;  // GreaterOrEqual
}

bool logic(const std::string& op, bool a, bool b) {
  if (op == "And") return a && b;
  if (op == "Or") return a || b;
  return a != b;  // Xor
}

// A BOOL tensor of `dims`, all false.
HostTensor host_bool(const std::vector<int64_t>& dims) {
  HostTensor t;
  t.type = OnnxType::BOOL;
  t.dims = dims;
  t.i.assign(static_cast<size_t>(t.numel()), 0);
  return t;
}

// Input k must be BOOL (the logical ops' operands, Where's condition).
Status expect_bool(NodeLowering& n, int k, const char* what) {
  if (n.type(k) != OnnxType::BOOL) return Status::errorf("{} is {}, expected BOOL", what, onnx_type_name(n.type(k)));
  return Status::ok();
}

// Both inputs of a binary logical node as tensors of the program, which must be f32 (BOOL as 0/1).
Status f32_operands(NodeLowering& n, TensorId* a, TensorId* b) {
  NNASM_TRY(n.tensor(0, a));
  NNASM_TRY(n.tensor(1, b));
  if (n.tensor_type(*a).dtype != DType::F32 || n.tensor_type(*b).dtype != DType::F32)
    return Status::errorf("{} and {} operands at run time: expected BOOL", onnx_type_name(n.type(0)),
                          onnx_type_name(n.type(1)));
  return Status::ok();
}

}  // namespace

Status map_compare(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(2, 2));
  const std::string& op = n.node().op_type;
  const Opcode code = op == "Equal" ? Opcode::EQUAL : op == "Less" ? Opcode::LESS : op == "LessOrEqual" ? Opcode::LESS_EQUAL
                      : op == "Greater" ? Opcode::GREATER : Opcode::GREATER_EQUAL;
  TensorId a, b, y;
  NNASM_TRY(n.tensor(0, &a));
  NNASM_TRY(n.tensor(1, &b));
  // nnasm's comparisons read f32: an integer operand (i32) is converted first.
  for (TensorId* t : {&a, &b})
    if (n.tensor_type(*t).dtype == DType::I32) NNASM_TRY(n.emit(Opcode::CAST, {*t}, {{"to", imm_i(0)}}, t));
  NNASM_TRY(n.emit(code, {a, b}, {}, &y));
  n.set(0, y, OnnxType::BOOL);
  return Status::ok();
}

Status fold_compare(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(2, 2));
  const HostTensor *a, *b;
  NNASM_TRY(n.host(0, "A", &a));
  NNASM_TRY(n.host(1, "B", &b));
  if (a->is_float() != b->is_float())
    return Status::errorf("inputs are {} and {}", onnx_type_name(a->type), onnx_type_name(b->type));
  HostBroadcast bc;
  NNASM_TRY(host_broadcast(a->dims, b->dims, &bc));
  HostTensor y = host_bool(bc.dims);
  const std::string& op = n.node().op_type;
  for (size_t k = 0; k < bc.ia.size(); ++k)
    y.i[k] = a->is_float() ? compare(op, a->f[bc.ia[k]], b->f[bc.ib[k]]) : compare(op, a->i[bc.ia[k]], b->i[bc.ib[k]]);
  n.set(0, std::move(y));
  return Status::ok();
}

// Not takes one BOOL input; And, Or and Xor two.
Status expect_logic_inputs(NodeLowering& n, bool unary) {
  NNASM_TRY(n.expect_inputs(unary ? 1 : 2, unary ? 1 : 2));
  for (int k = 0; k < n.inputs(); ++k) NNASM_TRY(expect_bool(n, k, k == 0 ? "input 1" : "input 2"));
  return Status::ok();
}

Status map_logic(NodeLowering& n) {
  const std::string& op = n.node().op_type;
  const bool unary = op == "Not";
  NNASM_TRY(expect_logic_inputs(n, unary));
  TensorId a, b, y;
  if (unary) {
    NNASM_TRY(n.tensor(0, &a));
    NNASM_TRY(n.emit(Opcode::CALC, {a}, {{"expr", imm_str("sub(1,%0)")}}, &y));
  } else {
    NNASM_TRY(f32_operands(n, &a, &b));
    if (op == "And") NNASM_TRY(n.emit(Opcode::MUL, {a, b}, {}, &y));
    else if (op == "Or") NNASM_TRY(n.emit(Opcode::MAXIMUM, {a, b}, {}, &y));
    else NNASM_TRY(n.emit(Opcode::CALC, {a, b}, {{"expr", imm_str("sub(1,equal(%0,%1))")}}, &y));
  }
  n.set(0, y, OnnxType::BOOL);
  return Status::ok();
}

Status fold_logic(NodeLowering& n) {
  const std::string& op = n.node().op_type;
  const bool unary = op == "Not";
  NNASM_TRY(expect_logic_inputs(n, unary));
  const HostTensor *a, *b;
  NNASM_TRY(n.host(0, "A", &a));
  if (unary) {
    HostTensor y = host_bool(a->dims);
    for (size_t k = 0; k < y.i.size(); ++k) y.i[k] = a->i[k] == 0;
    n.set(0, std::move(y));
    return Status::ok();
  }
  NNASM_TRY(n.host(1, "B", &b));
  HostBroadcast bc;
  NNASM_TRY(host_broadcast(a->dims, b->dims, &bc));
  HostTensor y = host_bool(bc.dims);
  for (size_t k = 0; k < bc.ia.size(); ++k) y.i[k] = logic(op, a->i[bc.ia[k]] != 0, b->i[bc.ib[k]] != 0);
  n.set(0, std::move(y));
  return Status::ok();
}

Status map_where(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(3, 3));
  NNASM_TRY(expect_bool(n, 0, "the condition"));
  if (n.type(1) != n.type(2))
    return Status::errorf("the branches are {} and {}", onnx_type_name(n.type(1)), onnx_type_name(n.type(2)));
  TensorId c, a, b, y;
  NNASM_TRY(n.tensor(0, &c));
  NNASM_TRY(n.tensor(1, &a));
  NNASM_TRY(n.tensor(2, &b));
  NNASM_TRY(n.emit(Opcode::WHERE, {c, a, b}, {}, &y));
  n.set(0, y, n.type(1));
  return Status::ok();
}

Status fold_where(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(3, 3));
  NNASM_TRY(expect_bool(n, 0, "the condition"));
  const HostTensor *c, *a, *b;
  NNASM_TRY(n.host(0, "condition", &c));
  NNASM_TRY(n.host(1, "X", &a));
  NNASM_TRY(n.host(2, "Y", &b));
  if (a->type != b->type) return Status::errorf("the branches are {} and {}", onnx_type_name(a->type), onnx_type_name(b->type));
  std::vector<int64_t> dims;
  NNASM_TRY(broadcast_dims(c->dims, a->dims, &dims));
  NNASM_TRY(broadcast_dims(dims, b->dims, &dims));
  NNASM_TRY(check_fold_size(dims));
  const std::vector<int64_t> ic = host_broadcast_index(dims, c->dims), ia = host_broadcast_index(dims, a->dims),
                             ib = host_broadcast_index(dims, b->dims);
  HostTensor y;
  y.type = a->type;
  y.dims = dims;
  for (size_t k = 0; k < ic.size(); ++k) {
    const bool take_a = c->i[ic[k]] != 0;
    if (y.is_float()) y.f.push_back(take_a ? a->f[ia[k]] : b->f[ib[k]]);
    else y.i.push_back(take_a ? a->i[ia[k]] : b->i[ib[k]]);
  }
  n.set(0, std::move(y));
  return Status::ok();
}

Status map_is_special(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(1, 1));
  TensorId x, y;
  NNASM_TRY(n.tensor(0, &x));
  if (n.tensor_type(x).dtype != DType::F32) return Status::errorf("the input is {}, expected a float", onnx_type_name(n.type(0)));
  std::string expr = "sub(1,equal(%0,%0))";  // IsNaN: NaN alone is unequal to itself
  if (n.node().op_type == "IsInf") {
    int64_t positive = 1, negative = 1;
    NNASM_TRY(n.attr("detect_positive", &positive));
    NNASM_TRY(n.attr("detect_negative", &negative));
    if (positive && negative) expr = "equal(abs(%0),inf)";
    else if (positive) expr = "equal(%0,inf)";
    else if (negative) expr = "equal(neg(%0),inf)";
    else expr = "";
  }
  if (expr.empty()) NNASM_TRY(n.emit(Opcode::FILL, {x}, {{"value", imm_f(0)}}, &y));
  else NNASM_TRY(n.emit(Opcode::CALC, {x}, {{"expr", imm_str(expr)}}, &y));
  n.set(0, y, OnnxType::BOOL);
  return Status::ok();
}

// OneHot: y = (index = j) ? on : off for j < depth on a new axis `axis`, as EQUAL of the indices
// (truncated to integers as ONNX says, a negative one counting from depth) against a constant
// range 0 … depth − 1, then WHERE between the two values. depth must be known at import time;
// indices and values need not be. Indices are compared as f32: exact up to 2^24.
Status map_one_hot(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(3, 3));
  int64_t axis = -1;
  NNASM_TRY(n.attr("axis", &axis));
  const HostTensor* d;
  NNASM_TRY(n.host(1, "depth", &d));
  if (d->numel() != 1) return Status::error("depth must have one element");
  const double depth_value = std::trunc(d->as_double(0));
  if (!(depth_value >= 1 && depth_value <= 16777216)) return Status::errorf("depth {} is not in [1, 2^24]", d->as_double(0));
  const int64_t depth = static_cast<int64_t>(depth_value);
  if (n.dims(2).size() != 1 || n.dims(2)[0] != 2) return Status::error("values must hold two elements, off and on");
  std::vector<int64_t> dims = n.dims(0);
  const int64_t rank = static_cast<int64_t>(dims.size()) + 1;
  if (axis < -rank || axis >= rank) return Status::errorf("axis {} is out of range for rank {}", axis, rank);
  if (axis < 0) axis += rank;

  TensorId idx, range, mask, on, off, y;
  NNASM_TRY(n.tensor(0, &idx));
  if (n.tensor_type(idx).dtype == DType::F32) NNASM_TRY(n.emit(Opcode::CAST, {idx}, {{"to", imm_i(1)}}, &idx));
  NNASM_TRY(n.emit(Opcode::CAST, {idx}, {{"to", imm_i(0)}}, &idx));
  NNASM_TRY(n.emit(Opcode::CALC, {idx}, {{"expr", imm_str(fmt::format("add(%0,scale(less(%0,0),alpha={}))", depth))}}, &idx));
  dims.insert(dims.begin() + axis, 1);
  NNASM_TRY(n.reshape(idx, dims, &idx));
  HostTensor r;  // [depth, 1, ..., 1]: one 1 per axis after `axis`
  r.dims.assign(static_cast<size_t>(rank - axis), 1);
  r.dims[0] = depth;
  for (int64_t j = 0; j < depth; ++j) r.f.push_back(static_cast<float>(j));
  NNASM_TRY(n.constant(r, &range));
  NNASM_TRY(n.emit(Opcode::EQUAL, {idx, range}, {}, &mask));

  if (n.is_host(2) && !n.value(2).weight) {
    const HostTensor* v;
    NNASM_TRY(n.host(2, "values", &v));
    if (v->is_float()) {
      NNASM_TRY(n.scalar(v->f[0], &off));
      NNASM_TRY(n.scalar(v->f[1], &on));
    } else {
      NNASM_TRY(n.constant(host_int_scalar(v->i[0]), &off));
      NNASM_TRY(n.constant(host_int_scalar(v->i[1]), &on));
    }
  } else {
    TensorId values;
    NNASM_TRY(n.tensor(2, &values));
    NNASM_TRY(n.emit(Opcode::SLICE, {values}, {{"axis", imm_i(0)}, {"start", imm_i(0)}, {"end", imm_i(1)}}, &off));
    NNASM_TRY(n.emit(Opcode::SLICE, {values}, {{"axis", imm_i(0)}, {"start", imm_i(1)}, {"end", imm_i(2)}}, &on));
  }
  NNASM_TRY(n.emit(Opcode::WHERE, {mask, on, off}, {}, &y));
  n.set(0, y, n.type(2));
  return Status::ok();
}

}  // namespace nnasm
