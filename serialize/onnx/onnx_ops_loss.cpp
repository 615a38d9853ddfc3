// ONNX's SoftmaxCrossEntropyLoss onto SOFTMAX_CE (classes on axis 1 moved last, the other axes
// made rows), for the cases the instruction computes: no class weights, reduction mean or sum, and
// no ignore_index that a label takes. The optional log_prob output is LOGSOFTMAX over axis 1.
#include <algorithm>

#include "serialize/onnx/onnx_ops.h"

namespace nnasm {

Status map_softmax_ce(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(2, 3));
  std::string reduction = "mean";
  NNASM_TRY(n.attr("reduction", &reduction));
  if (n.has(2)) return Status::error("class weights are not supported");
  if (reduction != "mean" && reduction != "sum") return Status::errorf("reduction '{}' is not supported (mean, sum)", reduction);
  if (n.has_attr("ignore_index")) {
    // Harmless only where no label takes it, which only labels known at import time show.
    int64_t ignored;
    const HostTensor* labels;
    NNASM_TRY(n.attr("ignore_index", &ignored));
    if (!n.is_host(1)) return Status::error("ignore_index with labels computed at run time is not supported");
    NNASM_TRY(n.host(1, "labels", &labels));
    if (std::find(labels->i.begin(), labels->i.end(), ignored) != labels->i.end())
      return Status::errorf("a label is ignore_index ({}), which is not supported", ignored);
  }
  const std::vector<int64_t> d = n.dims(0);
  if (d.size() < 2) return Status::errorf("scores are rank {}, expected [N, C, ...]", d.size());
  TensorId x, t, rows, loss;
  NNASM_TRY(n.tensor(0, &x));
  NNASM_TRY(n.tensor(1, &t));
  rows = x;
  int64_t count = d[0];
  if (d.size() > 2) {
    std::vector<int64_t> perm = {0};
    for (size_t a = 2; a < d.size(); ++a) {
      perm.push_back(static_cast<int64_t>(a));
      count *= d[a];
    }
    perm.push_back(1);
    NNASM_TRY(n.emit(Opcode::TRANSPOSE, {x}, {{"perm", imm_ints(perm)}}, &rows));
    NNASM_TRY(n.reshape(rows, {count, d[1]}, &rows));
    NNASM_TRY(n.reshape(t, {count}, &t));
  }
  NNASM_TRY(n.emit(Opcode::SOFTMAX_CE, {rows, t}, {}, &loss));
  if (reduction == "sum") NNASM_TRY(n.emit(Opcode::SCALE, {loss}, {{"alpha", imm_f(static_cast<double>(count))}}, &loss));
  n.set(0, loss, n.type(0));
  if (n.wants(1)) {
    TensorId log_prob;
    NNASM_TRY(n.emit(Opcode::LOGSOFTMAX, {x}, {{"axis", imm_i(1)}}, &log_prob));
    n.set(1, log_prob, n.type(0));
  }
  return Status::ok();
}

}  // namespace nnasm
