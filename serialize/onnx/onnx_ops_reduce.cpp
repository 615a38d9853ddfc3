// ONNX's reductions over any set of axes as chains of one-axis REDUCE_SUM / REDUCE_MEAN /
// REDUCE_MAX (highest axis first, so the lower ones keep their numbers), with the elementwise
// steps the variants need before and after (ReduceL2 = SQRT of the sum of SQUAREs, ReduceMin =
// NEG of the max of NEG, ...); and Softmax / LogSoftmax, whose opsets before 13 work on the input
// flattened to 2-D at the axis; ArgMax and ArgMin as ARGMAX / ARGMIN, whose i32 positions stand
// for ONNX's INT64, and Hardmax as the one-hot mask of ARGMAX's position.
#include <algorithm>

#include "serialize/onnx/onnx_host.h"
#include "serialize/onnx/onnx_ops.h"

namespace nnasm {

namespace {

struct ReduceSteps {
  const char* type;
  Opcode pre, reduce, post;  // pre and post: Opcode::INVALID for none
};

constexpr ReduceSteps kReduces[] = {
    {"ReduceSum", Opcode::INVALID, Opcode::REDUCE_SUM, Opcode::INVALID},
    {"ReduceMean", Opcode::INVALID, Opcode::REDUCE_MEAN, Opcode::INVALID},
    {"ReduceMax", Opcode::INVALID, Opcode::REDUCE_MAX, Opcode::INVALID},
    {"ReduceMin", Opcode::NEG, Opcode::REDUCE_MAX, Opcode::NEG},
    {"ReduceProd", Opcode::INVALID, Opcode::REDUCE_PROD, Opcode::INVALID},
    {"ReduceSumSquare", Opcode::SQUARE, Opcode::REDUCE_SUM, Opcode::INVALID},
    {"ReduceL1", Opcode::ABS, Opcode::REDUCE_SUM, Opcode::INVALID},
    {"ReduceL2", Opcode::SQUARE, Opcode::REDUCE_SUM, Opcode::SQRT},
    {"ReduceLogSum", Opcode::INVALID, Opcode::REDUCE_SUM, Opcode::LOG},
    // ReduceLogSumExp: log Σ e^(x − m) + m with m the maximum (no overflow), below.
    {"ReduceLogSumExp", Opcode::INVALID, Opcode::REDUCE_SUM, Opcode::INVALID},
};

}  // namespace

Status reduce_chain(NodeLowering& n, Opcode op, TensorId x, const std::vector<int>& axes, bool keep, TensorId* y) {
  *y = x;
  for (int a : axes) NNASM_TRY(n.emit(op, {*y}, {{"axis", imm_i(a)}, {"keepdims", imm_i(keep)}}, y));
  return Status::ok();
}

Status map_reduce(NodeLowering& n) {
  const std::string& op = n.node().op_type;
  const ReduceSteps* steps =
      std::find_if(std::begin(kReduces), std::end(kReduces), [&](const ReduceSteps& r) { return op == r.type; });
  if (steps == std::end(kReduces)) return Status::error("not supported");
  NNASM_TRY(n.expect_inputs(1, 2));
  int64_t keepdims = 1, noop_with_empty_axes = 0;
  NNASM_TRY(n.attr("keepdims", &keepdims));
  // Axes became an input of ReduceSum in opset 13 (of the others in 18, with noop_with_empty_axes).
  const int64_t axes_input_since = op == "ReduceSum" ? 13 : 18;
  if (n.opset() >= axes_input_since) NNASM_TRY(n.attr("noop_with_empty_axes", &noop_with_empty_axes));
  std::vector<int64_t> listed;
  bool given = false;
  NNASM_TRY(n.list_arg("axes", 1, axes_input_since, &listed, &given));
  const int r = static_cast<int>(n.dims(0).size());
  TensorId x, y;
  NNASM_TRY(n.tensor(0, &x));
  if (listed.empty() && noop_with_empty_axes != 0) {
    n.set(0, x, n.type(0));
    return Status::ok();
  }
  std::vector<int> axes;
  for (int64_t a : listed) NNASM_TRY(normalize_axis(a, r, &axes.emplace_back()));
  if (listed.empty())
    for (int a = 0; a < r; ++a) axes.push_back(a);
  std::sort(axes.rbegin(), axes.rend());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) return Status::error("an axis is listed twice");
  if (op == "ReduceLogSumExp") {
    TensorId m, e, s;
    NNASM_TRY(reduce_chain(n, Opcode::REDUCE_MAX, x, axes, true, &m));
    NNASM_TRY(n.emit(Opcode::CALC, {x, m}, {{"expr", imm_str("exp(sub(%0,%1))")}}, &e));
    NNASM_TRY(reduce_chain(n, Opcode::REDUCE_SUM, e, axes, true, &s));
    NNASM_TRY(n.emit(Opcode::CALC, {s, m}, {{"expr", imm_str("add(log(%0),%1)")}}, &y));
    if (keepdims == 0) {
      std::vector<int64_t> dims = n.dims(0);
      for (int a : axes) dims.erase(dims.begin() + a);
      NNASM_TRY(n.reshape(y, dims, &y));
    }
  } else {
    y = x;
    if (steps->pre != Opcode::INVALID) NNASM_TRY(n.emit(steps->pre, {y}, {}, &y));
    NNASM_TRY(reduce_chain(n, steps->reduce, y, axes, keepdims != 0, &y));
    if (steps->post != Opcode::INVALID) NNASM_TRY(n.emit(steps->post, {y}, {}, &y));
  }
  n.set(0, y, n.type(0));
  return Status::ok();
}

Status map_softmax(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(1, 1));
  const Opcode op = n.node().op_type == "Softmax" ? Opcode::SOFTMAX : Opcode::LOGSOFTMAX;
  const bool coerce_2d = n.opset() < 13;
  int64_t axis = coerce_2d ? 1 : -1;
  NNASM_TRY(n.attr("axis", &axis));
  const std::vector<int64_t> dims = n.dims(0);
  const int r = static_cast<int>(dims.size());
  int a;
  NNASM_TRY(normalize_axis(axis, r, &a));
  TensorId x, y;
  NNASM_TRY(n.tensor(0, &x));
  if (!coerce_2d || a == r - 1) {
    NNASM_TRY(n.emit(op, {x}, {{"axis", imm_i(a)}}, &y));
  } else {
    // Before opset 13 the softmax runs over all axes from `axis` on, as one row.
    std::vector<int64_t> rows;
    NNASM_TRY(flatten_target(dims, a, &rows));
    NNASM_TRY(n.reshape(x, rows, &y));
    NNASM_TRY(n.emit(op, {y}, {{"axis", imm_i(1)}}, &y));
    NNASM_TRY(n.reshape(y, dims, &y));
  }
  n.set(0, y, n.type(0));
  return Status::ok();
}

Status map_arg(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(1, 1));
  int64_t axis = 0, keepdims = 1, select_last_index = 0;
  NNASM_TRY(n.attr("axis", &axis));
  NNASM_TRY(n.attr("keepdims", &keepdims));
  NNASM_TRY(n.attr("select_last_index", &select_last_index));
  const std::vector<int64_t> dims = n.dims(0);
  int a;
  NNASM_TRY(normalize_axis(axis, static_cast<int>(dims.size()), &a));
  const Opcode op = n.node().op_type == "ArgMax" ? Opcode::ARGMAX : Opcode::ARGMIN;
  TensorId x, y;
  NNASM_TRY(n.tensor(0, &x));
  if (n.tensor_type(x).dtype != DType::F32) return Status::errorf("the input is {}: ARGMAX and ARGMIN read f32", onnx_type_name(n.type(0)));
  if (select_last_index == 0) {
    NNASM_TRY(n.emit(op, {x}, {{"axis", imm_i(a)}, {"keepdims", imm_i(keepdims != 0)}}, &y));
  } else {
    // The last extremum of x is the first of x reversed along the axis, at n − 1 − j: both the
    // reversal and n − 1 − j are GATHERs by the indices n − 1, ..., 0.
    std::vector<int64_t> reversed(static_cast<size_t>(dims[a]));
    for (size_t k = 0; k < reversed.size(); ++k) reversed[k] = dims[a] - 1 - static_cast<int64_t>(k);
    TensorId rev, xr, j;
    NNASM_TRY(n.constant(host_ints(reversed), &rev));
    NNASM_TRY(n.emit(Opcode::GATHER, {x, rev}, {{"axis", imm_i(a)}}, &xr));
    NNASM_TRY(n.emit(op, {xr}, {{"axis", imm_i(a)}, {"keepdims", imm_i(keepdims != 0)}}, &j));
    NNASM_TRY(n.emit(Opcode::GATHER, {rev, j}, {{"axis", imm_i(0)}}, &y));
  }
  n.set(0, y, OnnxType::INT64);
  return Status::ok();
}

Status map_hardmax(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(1, 1));
  const bool coerce_2d = n.opset() < 13;
  int64_t axis = coerce_2d ? 1 : -1;
  NNASM_TRY(n.attr("axis", &axis));
  const std::vector<int64_t> dims = n.dims(0);
  int a;
  NNASM_TRY(normalize_axis(axis, static_cast<int>(dims.size()), &a));
  TensorId x, j, table, jf, ids, y;
  NNASM_TRY(n.tensor(0, &x));
  if (n.tensor_type(x).dtype != DType::F32) return Status::errorf("the input is {}, expected a float", onnx_type_name(n.type(0)));
  // Before opset 13 the axes from `axis` on are one row.
  std::vector<int64_t> rows = dims;
  if (coerce_2d) {
    NNASM_TRY(flatten_target(dims, a, &rows));
    NNASM_TRY(n.reshape(x, rows, &x));
    a = 1;
  }
  const int64_t len = rows[a];
  if (len > MAX_FOLD_ELEMENTS) return Status::errorf("an axis of {} is longer than the importer builds a table for", len);
  // The first maximum's position j (kept as an axis of 1) as 1 + j in f32, by GATHER from the
  // table 1 ... len, compared with 1 ... len laid along the axis: the one-hot mask.
  HostTensor count, along;
  std::vector<int64_t> along_dims(rows.size() - a, 1);
  along_dims[0] = len;
  count.dims = {len};
  along.dims = along_dims;
  for (int64_t k = 1; k <= len; ++k) count.f.push_back(static_cast<float>(k));
  along.f = count.f;
  NNASM_TRY(n.emit(Opcode::ARGMAX, {x}, {{"axis", imm_i(a)}, {"keepdims", imm_i(1)}}, &j));
  NNASM_TRY(n.constant(count, &table));
  NNASM_TRY(n.constant(along, &ids));
  NNASM_TRY(n.emit(Opcode::GATHER, {table, j}, {{"axis", imm_i(0)}}, &jf));
  NNASM_TRY(n.emit(Opcode::EQUAL, {jf, ids}, {}, &y));
  NNASM_TRY(n.reshape(y, dims, &y));
  n.set(0, y, n.type(0));
  return Status::ok();
}

}  // namespace nnasm
