// ONNX's normalizations: BatchNormalization onto BATCHNORM2D (inference; its running statistics
// become state, updated when fine-tuning in training mode), or its formula in one CALC when the
// statistics are computed values; LayerNormalization, InstanceNormalization and
// MeanVarianceNormalization as REDUCE_MEAN chains over their axes and a CALC for the rest.
#include <algorithm>

#include "serialize/onnx/onnx_host.h"
#include "serialize/onnx/onnx_ops.h"

namespace nnasm {

Status map_batchnorm(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(5, 5));
  float eps = 1e-5f, momentum = 0.9f;
  int64_t spatial = 1, training = 0;
  NNASM_TRY(n.attr("epsilon", &eps));
  NNASM_TRY(n.attr("momentum", &momentum));
  NNASM_TRY(n.attr("spatial", &spatial));
  NNASM_TRY(n.attr("training_mode", &training));
  if (spatial != 1) return Status::error("spatial=0 (statistics per element) is not supported");
  if (training != 0) return Status::error("training_mode=1 is not supported (nnasm's run mode decides)");
  for (int k = 1; k < n.outputs(); ++k)
    if (n.wants(k)) return Status::errorf("output {} (a training statistic) is not supported", k + 1);
  if (n.dims(0).size() < 2) return Status::error("the input must have rank 2 or more");
  if (momentum < 0 || momentum > 1) return Status::errorf("momentum {} is outside [0, 1]", momentum);
  TensorId x, p[4], y;
  NNASM_TRY(n.tensor(0, &x));
  for (int k = 0; k < 4; ++k) NNASM_TRY(n.tensor(k + 1, &p[k], k < 2 ? Role::PARAM : Role::STATE));
  // ONNX's momentum keeps that much of the running statistics; nnasm's (PyTorch's) takes that
  // much of the batch's, which only fine-tuning in training mode uses.
  // Statistics that are consts, or that share one initializer with another input (PyTorch's
  // exporter merges equal initializers, such as a fresh layer's zero mean and zero bias), still
  // make a BATCHNORM2D: inference only reads them, and training refuses them by name
  // (Program::check_state_writable).
  const auto up_front = [&](TensorId id) { return n.program().desc(id).declared_up_front(); };
  if (up_front(p[2]) && up_front(p[3])) {
    NNASM_TRY(n.emit(Opcode::BATCHNORM2D, {x, p[0], p[1], p[2], p[3]},
                     {{"eps", imm_f(eps)}, {"momentum", imm_f(1 - momentum)}}, &y));
  } else {
    // Statistics that are computed: the inference formula, per channel (axis 1).
    std::vector<int64_t> channel(n.dims(0).size() - 1, 1);
    channel[0] = n.dims(0)[1];
    for (TensorId& t : p) NNASM_TRY(n.reshape(t, channel, &t));
    NNASM_TRY(n.emit(Opcode::CALC, {x, p[0], p[1], p[2], p[3]},
                     {{"expr", imm_str(fmt::format("add(mul(div(sub(%0,%3),sqrt(add(%4,{}))),%1),%2)", float_to_string(eps)))}},
                     &y));
  }
  n.set(0, y, n.type(0));
  return Status::ok();
}

// x − mean and the mean of its squares over `axes` (descending), both with the axes kept as 1s.
Status center(NodeLowering& n, TensorId x, const std::vector<int>& axes, TensorId* mean, TensorId* d, TensorId* var) {
  NNASM_TRY(reduce_chain(n, Opcode::REDUCE_MEAN, x, axes, true, mean));
  NNASM_TRY(n.emit(Opcode::SUB, {x, *mean}, {}, d));
  TensorId sq;
  NNASM_TRY(n.emit(Opcode::SQUARE, {*d}, {}, &sq));
  return reduce_chain(n, Opcode::REDUCE_MEAN, sq, axes, true, var);
}

Status map_axes_norm(NodeLowering& n) {
  const std::string& op = n.node().op_type;
  const int r = static_cast<int>(n.dims(0).size());
  std::vector<int> axes;  // descending
  float eps = 1e-5f;
  if (op == "MeanVarianceNormalization") {
    NNASM_TRY(n.expect_inputs(1, 1));
    std::vector<int64_t> listed = {0, 2, 3};
    NNASM_TRY(n.attr("axes", &listed));
    for (int64_t a : listed) NNASM_TRY(normalize_axis(a, r, &axes.emplace_back()));
  } else if (op == "InstanceNormalization") {
    NNASM_TRY(n.expect_inputs(3, 3));
    NNASM_TRY(n.attr("epsilon", &eps));
    if (r < 3) return Status::errorf("the input is rank {}, expected N, C and spatial axes", r);
    for (int a = 2; a < r; ++a) axes.push_back(a);
  } else {
    NNASM_TRY(n.expect_inputs(2, 3));
    int64_t axis = -1, stash_type = 1;
    NNASM_TRY(n.attr("axis", &axis));
    NNASM_TRY(n.attr("epsilon", &eps));
    NNASM_TRY(n.attr("stash_type", &stash_type));
    if (stash_type != 1) return Status::errorf("stash_type {} is not supported (only 1, float)", stash_type);
    int first;
    NNASM_TRY(normalize_axis(axis, r, &first));
    for (int a = first; a < r; ++a) axes.push_back(a);
  }
  std::sort(axes.rbegin(), axes.rend());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) return Status::error("an axis is listed twice");
  TensorId x, mean, d, var, inv, y;
  NNASM_TRY(n.tensor(0, &x));
  NNASM_TRY(center(n, x, axes, &mean, &d, &var));
  if (op == "MeanVarianceNormalization") {
    // ONNX's function: (x − mean) / (√var + 1e-9).
    NNASM_TRY(n.emit(Opcode::CALC, {d, var}, {{"expr", imm_str("div(%0,add(sqrt(%1),1e-09))")}}, &y));
    n.set(0, y, n.type(0));
    return Status::ok();
  }
  NNASM_TRY(n.emit(Opcode::CALC, {var}, {{"expr", imm_str(fmt::format("div(1,sqrt(add(%0,{})))", float_to_string(eps)))}}, &inv));
  std::vector<TensorId> ins = {d, inv};
  for (int k = 1; k < 3; ++k) {
    if (!n.has(k)) continue;
    NNASM_TRY(n.tensor(k, &ins.emplace_back()));
    // InstanceNormalization's scale and bias are per channel (axis 1).
    if (op == "InstanceNormalization") {
      std::vector<int64_t> channel(static_cast<size_t>(r - 1), 1);
      channel[0] = n.dims(0)[1];
      NNASM_TRY(n.reshape(ins.back(), channel, &ins.back()));
    }
  }
  NNASM_TRY(n.emit(Opcode::CALC, ins, {{"expr", imm_str(ins.size() == 4 ? "add(mul(mul(%0,%1),%2),%3)" : "mul(mul(%0,%1),%2)")}}, &y));
  if (shape_dims(n.tensor_type(y).shape) != n.dims(0)) return Status::error("scale or bias does not broadcast to the input");
  n.set(0, y, n.type(0));
  // LayerNormalization's optional outputs: the mean and 1/√(var + eps), with the axes kept as 1s.
  if (n.wants(1)) n.set(1, mean, n.type(0));
  if (n.wants(2)) n.set(2, inv, n.type(0));
  return Status::ok();
}

// LRN: x / (bias + alpha/size · Σ x² over a window of `size` channels)^beta. The window sum is an
// average pool (count_include_pad) over the squares with the channels as the pooled rows, padded
// ⌊(size−1)/2⌋ before and ⌈(size−1)/2⌉ after as ONNX places the window; the power is exp∘log
// (the base is positive for bias > 0).
Status map_lrn(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(1, 1));
  float alpha = 1e-4f, beta = 0.75f, bias = 1;
  int64_t size;
  NNASM_TRY(n.attr("alpha", &alpha));
  NNASM_TRY(n.attr("beta", &beta));
  NNASM_TRY(n.attr("bias", &bias));
  NNASM_TRY(n.required_attr("size", &size));
  const std::vector<int64_t> d = n.dims(0);
  if (d.size() < 3) return Status::errorf("the input is rank {}, expected N, C and spatial axes", d.size());
  if (size < 1) return Status::errorf("size {} must be positive", size);
  if (!(bias > 0)) return Status::errorf("bias {} must be positive", bias);
  int64_t plane = 1;
  for (size_t a = 2; a < d.size(); ++a) plane *= d[a];
  TensorId x, sq, avg, y;
  NNASM_TRY(n.tensor(0, &x));
  NNASM_TRY(n.emit(Opcode::SQUARE, {x}, {}, &sq));
  NNASM_TRY(n.reshape(sq, {d[0], 1, d[1], plane}, &sq));
  NNASM_TRY(n.emit(Opcode::PAD, {sq}, {{"pads", imm_ints({0, 0, (size - 1) / 2, 0, 0, 0, size / 2, 0})}}, &sq));
  NNASM_TRY(n.emit(Opcode::AVGPOOL2D, {sq}, {{"kernel", imm_ints({size, 1})}, {"stride", imm_ints({1, 1})}}, &avg));
  NNASM_TRY(n.reshape(avg, d, &avg));
  NNASM_TRY(n.emit(Opcode::CALC, {x, avg},
                   {{"expr", imm_str(fmt::format("div(%0,exp(scale(log(add(scale(%1,alpha={}),{})),alpha={})))",
                                                 float_to_string(alpha), float_to_string(bias), float_to_string(beta)))}},
                   &y));
  n.set(0, y, n.type(0));
  return Status::ok();
}

}  // namespace nnasm
