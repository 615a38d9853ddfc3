// What each Myelin operation type becomes (serialize/flow/flow_lowering.h): the elementwise ones
// map 1:1 (Myelin broadcasts as numpy does, as nnasm's binary ops do), MatMul keeps its
// transposes, the shape ops take their axis, shape or permutation from a constant input or an
// attribute, a reduction without an axis reduces everything to a scalar (RESHAPE to one axis, then
// the reduction), Identity copies and Reference stands for the variable it names.
#include <fmt/format.h>

#include "serialize/flow/flow_lowering.h"

namespace nnasm {

namespace {

Status one_op(FlowOpContext& c, Opcode op) {
  const size_t n = static_cast<size_t>(op_info(op).n_in);
  NNASM_TRY(c.expect_inputs(n));
  std::vector<TensorId> in;
  NNASM_TRY(c.inputs(n, &in));
  return c.finish(make_instruction(op, in, {}));
}

Status matmul(FlowOpContext& c, Opcode) {
  NNASM_TRY(c.expect_inputs(2));
  if (c.attr_bool("transpose_c")) return Status::error("transpose_c (a transposed result) is not supported");
  std::vector<TensorId> in;
  NNASM_TRY(c.inputs(2, &in));
  Instruction ins = make_instruction(Opcode::MATMUL, in, {});
  NNASM_TRY(set_imm(ins, "transA", imm_i(c.attr_bool("transpose_a"))));
  NNASM_TRY(set_imm(ins, "transB", imm_i(c.attr_bool("transpose_b"))));
  return c.finish(std::move(ins));
}

// SOFTMAX or LOGSOFTMAX over `axis` (TensorFlow's: the last).
Status softmax(FlowOpContext& c, Opcode op) {
  NNASM_TRY(c.expect_inputs(1));
  int64_t axis = 0;
  NNASM_TRY(c.attr_int("axis", -1, &axis));
  std::vector<TensorId> x;
  NNASM_TRY(c.inputs(1, &x));
  Instruction ins = make_instruction(op, x, {});
  NNASM_TRY(set_imm(ins, "axis", imm_i(axis)));
  return c.finish(std::move(ins));
}

// Reshape and Transpose: x and, optionally, a constant second input of integers (the shape, the
// permutation), else what `fallback` says.
template <typename F>
Status x_and_ints(FlowOpContext& c, std::vector<TensorId>* x, std::vector<int64_t>* ints, F fallback) {
  NNASM_TRY(c.expect_inputs(1, 2));
  NNASM_TRY(c.inputs(1, x));
  return c.n_inputs() == 2 ? c.input_ints(1, ints) : fallback();
}

// Reshape(x[, shape]): one -1 in the shape is inferred; without a shape input, the file's output
// shape (which is all Myelin's own kernel looks at).
Status reshape(FlowOpContext& c, Opcode) {
  std::vector<TensorId> x;
  std::vector<int64_t> shape;
  NNASM_TRY(x_and_ints(c, &x, &shape, [&] {
    Shape s;
    if (!c.output_shape(&s)) return Status::error("no shape input and no output shape in the file");
    shape.assign(s.dims.begin(), s.dims.begin() + s.rank);
    return Status::ok();
  }));
  Instruction ins = make_instruction(Opcode::RESHAPE, x, {});
  NNASM_TRY(set_imm(ins, "shape", imm_ints(shape)));
  return c.finish(std::move(ins));
}

// Transpose(x[, perm]): the permutation from the second input or the "perm" attribute; neither
// reverses the axes (Myelin's and TensorFlow's default).
Status transpose(FlowOpContext& c, Opcode) {
  std::vector<TensorId> x;
  std::vector<int64_t> perm;
  NNASM_TRY(x_and_ints(c, &x, &perm, [&] {
    bool found = false;
    NNASM_TRY(c.attr_ints("perm", &found, &perm));
    for (int d = c.type(x[0]).shape.rank - 1; !found && d >= 0; --d) perm.push_back(d);
    return Status::ok();
  }));
  Instruction ins = make_instruction(Opcode::TRANSPOSE, x, {});
  NNASM_TRY(set_imm(ins, "perm", imm_ints(perm)));
  return c.finish(std::move(ins));
}

// ConcatV2(x_1, ..., x_N, axis), N from the attribute of that name (default: all but the last).
Status concat(FlowOpContext& c, Opcode) {
  if (c.n_inputs() < 2)
    return Status::errorf("takes the values and an axis, got {} input{}", c.n_inputs(), c.n_inputs() == 1 ? "" : "s");
  int64_t n = 0;
  NNASM_TRY(c.attr_int("N", static_cast<int64_t>(c.n_inputs()) - 1, &n));
  if (n < 1 || static_cast<size_t>(n) + 1 != c.n_inputs())
    return Status::errorf("N is {} but there are {} inputs (N values and an axis)", n, c.n_inputs());
  std::vector<int64_t> axis;
  NNASM_TRY(c.input_ints(c.n_inputs() - 1, &axis));
  if (axis.size() != 1) return Status::errorf("the axis input holds {} values, not one", axis.size());
  std::vector<TensorId> in;
  NNASM_TRY(c.inputs(c.n_inputs() - 1, &in));
  Instruction ins = make_instruction(Opcode::CONCAT, in, {});
  NNASM_TRY(set_imm(ins, "axis", imm_i(axis[0])));
  return c.finish(std::move(ins));
}

// Sum / Max over the "axis" attribute (with "keepdims"), or over everything when there is none.
Status reduce(FlowOpContext& c, Opcode op) {
  NNASM_TRY(c.expect_inputs(1));
  int64_t axis = 0;
  NNASM_TRY(c.attr_int("axis", 0, &axis));
  const bool all = c.op().attr("axis") == nullptr;
  std::vector<TensorId> x;
  NNASM_TRY(c.inputs(1, &x));
  TensorId src = x[0];
  const Shape& s = c.type(src).shape;
  if (all && s.rank == 0) return c.finish(make_instruction(Opcode::COPY, {src}, {}));
  if (all && s.rank > 1) {
    Instruction flat = make_instruction(Opcode::RESHAPE, {src}, {});
    NNASM_TRY(set_imm(flat, "shape", imm_ints({s.numel()})));
    Result<TensorId> f = c.emit(std::move(flat));
    if (!f) return f.status();
    src = *f;
  }
  Instruction ins = make_instruction(op, {src}, {});
  NNASM_TRY(set_imm(ins, "axis", imm_i(axis)));
  NNASM_TRY(set_imm(ins, "keepdims", imm_i(!all && c.attr_bool("keepdims"))));
  return c.finish(std::move(ins));
}

// Reference: the variable its "var" attribute names (a weight of another cell, in Myelin a
// pointer into that cell's instance). Its input, the instance, is not read.
Status reference(FlowOpContext& c, Opcode) {
  const std::string* name = c.op().attr("var");
  if (!name) return Status::error("no 'var' attribute names the variable it refers to");
  const size_t v = c.find_var(*name);
  if (v == FLOW_NONE) return Status::errorf("its 'var' attribute names no variable: {}", flow_quote(*name));
  Result<TensorId> t = c.var_tensor(v);
  if (!t) return t.status();
  return c.alias(*t);
}

// Myelin operation types and their mappings; BiasAdd is Myelin's Add, Concat its ConcatV2.
struct Mapping {
  const char* type;
  Status (*lower)(FlowOpContext& c, Opcode op);
  Opcode op;
};
const Mapping kMappings[] = {
    {"Add", one_op, Opcode::ADD},
    {"BiasAdd", one_op, Opcode::ADD},
    {"Sub", one_op, Opcode::SUB},
    {"Mul", one_op, Opcode::MUL},
    {"Div", one_op, Opcode::DIV},
    {"Maximum", one_op, Opcode::MAXIMUM},
    {"Minimum", one_op, Opcode::MINIMUM},
    {"Neg", one_op, Opcode::NEG},
    {"Abs", one_op, Opcode::ABS},
    {"Exp", one_op, Opcode::EXP},
    {"Log", one_op, Opcode::LOG},
    {"Sqrt", one_op, Opcode::SQRT},
    {"Square", one_op, Opcode::SQUARE},
    {"Relu", one_op, Opcode::RELU},
    {"Tanh", one_op, Opcode::TANH},
    {"Sigmoid", one_op, Opcode::SIGMOID},
    {"Identity", one_op, Opcode::COPY},
    {"MatMul", matmul, Opcode::MATMUL},
    {"Softmax", softmax, Opcode::SOFTMAX},
    {"LogSoftmax", softmax, Opcode::LOGSOFTMAX},
    {"Reshape", reshape, Opcode::RESHAPE},
    {"ConcatV2", concat, Opcode::CONCAT},
    {"Concat", concat, Opcode::CONCAT},
    {"Transpose", transpose, Opcode::TRANSPOSE},
    {"Sum", reduce, Opcode::REDUCE_SUM},
    {"Max", reduce, Opcode::REDUCE_MAX},
    {"Reference", reference, Opcode::INVALID},
};

}  // namespace

Status flow_lower(FlowOpContext& c) {
  for (const Mapping& m : kMappings)
    if (c.op().type == m.type) return m.lower(c, m.op);
  return Status::error("not supported");
}

std::vector<size_t> flow_extra_reads(const Flow& flow, const FlowOperation& op) {
  if (op.type != "Reference") return {};
  const std::string* name = op.attr("var");
  const size_t v = name ? flow.find_var(*name) : FLOW_NONE;
  return v == FLOW_NONE ? std::vector<size_t>{} : std::vector<size_t>{v};
}

}  // namespace nnasm
