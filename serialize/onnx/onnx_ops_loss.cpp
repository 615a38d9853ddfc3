// ONNX's losses on log-probabilities. SoftmaxCrossEntropyLoss without class weights or an
// ignored label, reduced by mean or sum, is one SOFTMAX_CE (classes on axis 1 moved last, the
// other axes made rows). Every other case, and NegativeLogLikelihoodLoss, is the general lowering
// below: the target's one-hot mask along axis 1 selects each element's log-probability (WHERE,
// REDUCE_SUM over the classes: exact, one term), weighted by its class weight, then reduced.
// Targets are i32 (ONNX's INT64), known at import time or not. The optional log_prob output is
// LOGSOFTMAX over axis 1.
#include <algorithm>

#include "serialize/onnx/onnx_host.h"
#include "serialize/onnx/onnx_ops.h"

namespace nnasm {

namespace {

// What both ops read: `reduction` and `ignore_index` (and whether the node has one).
struct LossAttrs {
  std::string reduction = "mean";
  bool has_ignore = false;
  int64_t ignore = 0;
};

Status loss_attrs(NodeLowering& n, LossAttrs* a) {
  NNASM_TRY(n.attr("reduction", &a->reduction));
  if (a->reduction != "mean" && a->reduction != "sum" && a->reduction != "none")
    return Status::errorf("reduction '{}' is not one of none, sum, mean", a->reduction);
  a->has_ignore = n.has_attr("ignore_index");
  return n.attr("ignore_index", &a->ignore);
}

// x summed over all its axes (rank 0).
Status sum_all(NodeLowering& n, TensorId x, TensorId* y) {
  std::vector<int> axes;
  for (int a = n.tensor_type(x).shape.rank - 1; a >= 0; --a) axes.push_back(a);
  return reduce_chain(n, Opcode::REDUCE_SUM, x, axes, false, y);
}

// The loss from log-probabilities `lp` [N, C, d...] and input `target_k` [N, d...] (class ids),
// weighted by input `weight_k` [C] when the node has it.
Status nll(NodeLowering& n, TensorId lp, int target_k, int weight_k, const LossAttrs& a, TensorId* loss) {
  const std::vector<int64_t> d = shape_dims(n.tensor_type(lp).shape);
  if (d.size() < 2) return Status::errorf("the input is rank {}, expected [N, C, ...]", d.size());
  std::vector<int64_t> td = d;
  td.erase(td.begin() + 1);
  if (n.dims(target_k) != td)
    return Status::errorf("the target is [{}], expected [{}] for an input of [{}]", fmt::join(n.dims(target_k), ","),
                          fmt::join(td, ","), fmt::join(d, ","));
  const int64_t classes = d[1];
  if (classes > MAX_FOLD_ELEMENTS / 2) return Status::errorf("{} classes are more than the importer builds a table for", classes);
  TensorId t, w = NO_TENSOR;
  NNASM_TRY(n.tensor(target_k, &t));
  if (n.tensor_type(t).dtype != DType::I32) return Status::errorf("the target is {}, expected integers", onnx_type_name(n.type(target_k)));
  if (n.has(weight_k)) {
    if (n.dims(weight_k) != std::vector<int64_t>{classes}) return Status::errorf("the weights are not [{}]", classes);
    NNASM_TRY(n.tensor(weight_k, &w));
  }
  // Each target as 1 + its class in f32 (GATHER from a table of 2C entries, so that negative
  // ids land in its second half too), 0 for the ignored id and any id that is no class: compared
  // with 1 ... C along axis 1 it is the one-hot mask, all zeros where ignored.
  HostTensor table, ids;
  table.dims = {2 * classes};
  table.f.assign(static_cast<size_t>(2 * classes), 0.f);
  for (int64_t c = 0; c < classes; ++c)
    if (!(a.has_ignore && a.ignore == c)) table.f[c] = static_cast<float>(c + 1);
  std::vector<int64_t> class_dims(d.size() - 1, 1);
  class_dims[0] = classes;
  ids.dims = class_dims;
  for (int64_t c = 0; c < classes; ++c) ids.f.push_back(static_cast<float>(c + 1));
  TensorId table_id, ids_id, tf, tf1, onehot, zero, picked, valid, y;
  NNASM_TRY(n.constant(table, &table_id));
  NNASM_TRY(n.constant(ids, &ids_id));
  NNASM_TRY(n.emit(Opcode::GATHER, {table_id, t}, {{"axis", imm_i(0)}}, &tf));
  std::vector<int64_t> tf1_dims = td;
  tf1_dims.insert(tf1_dims.begin() + 1, 1);
  NNASM_TRY(n.reshape(tf, tf1_dims, &tf1));
  NNASM_TRY(n.emit(Opcode::EQUAL, {tf1, ids_id}, {}, &onehot));
  NNASM_TRY(n.scalar(0, &zero));
  NNASM_TRY(n.emit(Opcode::WHERE, {onehot, lp, zero}, {}, &picked));
  NNASM_TRY(n.emit(Opcode::REDUCE_SUM, {picked}, {{"axis", imm_i(1)}, {"keepdims", imm_i(0)}}, &picked));
  // valid: the weight of each element's class (1 without weights), 0 where ignored.
  NNASM_TRY(n.emit(Opcode::GREATER, {tf, zero}, {}, &valid));
  if (w != NO_TENSOR) {
    TensorId wt;
    NNASM_TRY(n.emit(Opcode::GATHER, {w, t}, {{"axis", imm_i(0)}}, &wt));
    NNASM_TRY(n.emit(Opcode::MUL, {wt, valid}, {}, &valid));
    NNASM_TRY(n.emit(Opcode::CALC, {picked, valid}, {{"expr", imm_str("neg(mul(%0,%1))")}}, &y));
  } else {
    NNASM_TRY(n.emit(Opcode::NEG, {picked}, {}, &y));
  }
  if (a.reduction != "none") NNASM_TRY(sum_all(n, y, &y));
  if (a.reduction == "mean") {
    TensorId total;
    NNASM_TRY(sum_all(n, valid, &total));
    NNASM_TRY(n.emit(Opcode::DIV, {y, total}, {}, &y));
  }
  *loss = y;
  return Status::ok();
}

}  // namespace

Status map_nll_loss(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(2, 3));
  LossAttrs a;
  NNASM_TRY(loss_attrs(n, &a));
  TensorId lp, loss;
  NNASM_TRY(n.tensor(0, &lp));
  NNASM_TRY(nll(n, lp, 1, 2, a, &loss));
  n.set(0, loss, n.type(0));
  return Status::ok();
}

Status map_softmax_ce(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(2, 3));
  LossAttrs a;
  NNASM_TRY(loss_attrs(n, &a));
  const std::vector<int64_t> d = n.dims(0);
  if (d.size() < 2) return Status::errorf("scores are rank {}, expected [N, C, ...]", d.size());
  TensorId x, loss, log_prob = NO_TENSOR;
  NNASM_TRY(n.tensor(0, &x));
  // An ignore_index that no label takes (which only labels known at import time show) changes
  // nothing.
  bool ignore_taken = a.has_ignore;
  if (a.has_ignore && n.is_host(1)) {
    const HostTensor* labels;
    NNASM_TRY(n.host(1, "labels", &labels));
    ignore_taken = std::find(labels->i.begin(), labels->i.end(), a.ignore) != labels->i.end();
  }
  if (n.has(2) || a.reduction == "none" || ignore_taken) {
    NNASM_TRY(n.emit(Opcode::LOGSOFTMAX, {x}, {{"axis", imm_i(1)}}, &log_prob));
    NNASM_TRY(nll(n, log_prob, 1, 2, a, &loss));
  } else {
    TensorId rows = x, t;
    NNASM_TRY(n.tensor(1, &t));
    int64_t count = d[0];
    if (d.size() > 2) {
      std::vector<int64_t> perm = {0};
      for (size_t k = 2; k < d.size(); ++k) {
        perm.push_back(static_cast<int64_t>(k));
        count *= d[k];
      }
      perm.push_back(1);
      NNASM_TRY(n.emit(Opcode::TRANSPOSE, {x}, {{"perm", imm_ints(perm)}}, &rows));
      NNASM_TRY(n.reshape(rows, {count, d[1]}, &rows));
      NNASM_TRY(n.reshape(t, {count}, &t));
    }
    NNASM_TRY(n.emit(Opcode::SOFTMAX_CE, {rows, t}, {}, &loss));
    if (a.reduction == "sum") NNASM_TRY(n.emit(Opcode::SCALE, {loss}, {{"alpha", imm_f(static_cast<double>(count))}}, &loss));
  }
  n.set(0, loss, n.type(0));
  if (n.wants(1)) {
    if (log_prob == NO_TENSOR) NNASM_TRY(n.emit(Opcode::LOGSOFTMAX, {x}, {{"axis", imm_i(1)}}, &log_prob));
    n.set(1, log_prob, n.type(0));
  }
  return Status::ok();
}

}  // namespace nnasm
