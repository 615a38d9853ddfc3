// ONNX's Gemm, MatMul, Conv, BatchNormalization and Dropout onto MATMUL, CONV2D, BATCHNORM2D and
// DROPOUT. A 1-D convolution is the 2-D one over images of height 1; padding CONV2D cannot
// express (unequal at the two ends) is a PAD first; a batch norm whose statistics are not
// tensors declared up front is its formula in one CALC.
#include <algorithm>

#include "serialize/onnx/onnx_host.h"
#include "serialize/onnx/onnx_ops.h"

namespace nnasm {

Status spatial_pads(NodeLowering& n, const std::vector<int64_t>& in, const std::vector<int64_t>& kernel,
                    const std::vector<int64_t>& stride, const std::vector<int64_t>& dilation, std::vector<int64_t>* pads) {
  const size_t s = in.size();
  std::string auto_pad = "NOTSET";
  NNASM_TRY(n.attr("auto_pad", &auto_pad));
  pads->assign(2 * s, 0);
  NNASM_TRY(n.attr("pads", pads));
  if (pads->size() != 2 * s) return Status::errorf("pads has {} entries, expected {}", pads->size(), 2 * s);
  if (auto_pad == "NOTSET") {
    for (int64_t p : *pads)
      if (p < 0) return Status::errorf("pads [{}] has a negative entry", fmt::join(*pads, ","));
    return Status::ok();
  }
  if (auto_pad == "VALID") {
    std::fill(pads->begin(), pads->end(), 0);
    return Status::ok();
  }
  if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") return Status::errorf("auto_pad '{}' is not known", auto_pad);
  // SAME: the output is ⌈in / stride⌉ and the padding that takes is split, the odd one at the end
  // (UPPER) or the beginning (LOWER).
  for (size_t a = 0; a < s; ++a) {
    const int64_t out = (in[a] + stride[a] - 1) / stride[a];
    const int64_t total = std::max<int64_t>(0, (out - 1) * stride[a] + (kernel[a] - 1) * dilation[a] + 1 - in[a]);
    const int64_t small = total / 2, large = total - small;
    (*pads)[a] = auto_pad == "SAME_UPPER" ? small : large;
    (*pads)[a + s] = auto_pad == "SAME_UPPER" ? large : small;
  }
  return Status::ok();
}

Status rows_as_images(NodeLowering& n, TensorId x, TensorId* y) {
  const Shape& d = n.tensor_type(x).shape;
  return n.reshape(x, {d[0], d[1], 1, d[2]}, y);
}

Status images_as_rows(NodeLowering& n, TensorId x, TensorId* y) {
  const Shape& d = n.tensor_type(x).shape;
  return n.reshape(x, {d[0], d[1], d[3]}, y);
}

Status map_gemm(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(n.opset() < 11 ? 3 : 2, 3));
  float alpha = 1, beta = 1;
  int64_t trans_a = 0, trans_b = 0;
  NNASM_TRY(n.attr("alpha", &alpha));
  NNASM_TRY(n.attr("beta", &beta));
  NNASM_TRY(n.attr("transA", &trans_a));
  NNASM_TRY(n.attr("transB", &trans_b));
  if (n.dims(0).size() != 2 || n.dims(1).size() != 2)
    return Status::errorf("A and B must be matrices, are rank {} and {}", n.dims(0).size(), n.dims(1).size());
  TensorId a, b, y;
  NNASM_TRY(n.tensor(0, &a));
  NNASM_TRY(n.tensor(1, &b));
  NNASM_TRY(n.emit(Opcode::MATMUL, {a, b}, {{"transA", imm_i(trans_a != 0)}, {"transB", imm_i(trans_b != 0)}}, &y));
  const std::vector<int64_t> mn = shape_dims(n.tensor_type(y).shape);
  if (n.has(2) && beta != 0) {
    TensorId c;
    NNASM_TRY(n.tensor(2, &c));
    NNASM_TRY(n.emit(Opcode::ADD, {y, c}, {{"alpha", imm_f(alpha)}, {"beta", imm_f(beta)}}, &y));
    if (shape_dims(n.tensor_type(y).shape) != mn) return Status::error("C does not broadcast to A·B's shape");
  } else if (alpha != 1) {
    NNASM_TRY(n.emit(Opcode::SCALE, {y}, {{"alpha", imm_f(alpha)}}, &y));
  }
  n.set(0, y, n.type(0));
  return Status::ok();
}

// numpy.matmul: a 1-D operand is a row (first) or a column (second), removed from the result.
Status map_matmul(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(2, 2));
  const std::vector<int64_t> da = n.dims(0), db = n.dims(1);
  if (da.empty() || db.empty()) return Status::error("operands must have rank 1 or more");
  TensorId a, b, y;
  NNASM_TRY(n.tensor(0, &a));
  NNASM_TRY(n.tensor(1, &b));
  if (da.size() == 1) NNASM_TRY(n.reshape(a, {1, da[0]}, &a));
  if (db.size() == 1) NNASM_TRY(n.reshape(b, {db[0], 1}, &b));
  NNASM_TRY(n.emit(Opcode::MATMUL, {a, b}, {}, &y));
  std::vector<int64_t> out = shape_dims(n.tensor_type(y).shape);
  if (db.size() == 1) out.erase(out.end() - 1);
  if (da.size() == 1) out.erase(out.end() - 1 - (db.size() == 1 ? 0 : 1));
  NNASM_TRY(n.reshape(y, out, &y));
  n.set(0, y, n.type(0));
  return Status::ok();
}

Status map_conv(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(2, 3));
  const std::vector<int64_t> dx = n.dims(0), dw = n.dims(1);
  if (dx.size() != 3 && dx.size() != 4)
    return Status::errorf("input is rank {}; only 1-D and 2-D convolutions (rank 3 and 4) are supported", dx.size());
  if (dw.size() != dx.size()) return Status::errorf("weights are rank {}, input rank {}", dw.size(), dx.size());
  const size_t s = dx.size() - 2;
  std::vector<int64_t> in(dx.begin() + 2, dx.end()), kernel(dw.begin() + 2, dw.end());
  std::vector<int64_t> given_kernel = kernel, stride(s, 1), dilation(s, 1), pads;
  int64_t group = 1;
  NNASM_TRY(n.attr("kernel_shape", &given_kernel));
  NNASM_TRY(n.attr("strides", &stride));
  NNASM_TRY(n.attr("dilations", &dilation));
  NNASM_TRY(n.attr("group", &group));
  if (given_kernel != kernel) return Status::errorf("kernel_shape [{}] differs from the weights' [{}]", fmt::join(given_kernel, ","), fmt::join(kernel, ","));
  if (stride.size() != s || dilation.size() != s) return Status::errorf("strides and dilations need {} entries", s);
  for (size_t a = 0; a < s; ++a)
    if (stride[a] < 1 || dilation[a] < 1) return Status::error("strides and dilations must be positive");
  NNASM_TRY(spatial_pads(n, in, kernel, stride, dilation, &pads));
  TensorId x, w, b = NO_TENSOR, y;
  NNASM_TRY(n.tensor(0, &x));
  NNASM_TRY(n.tensor(1, &w));
  if (n.has(2)) NNASM_TRY(n.tensor(2, &b));
  if (s == 1) {
    // 1-D as 2-D over a height of 1.
    NNASM_TRY(rows_as_images(n, x, &x));
    NNASM_TRY(rows_as_images(n, w, &w));
    stride.insert(stride.begin(), 1);
    dilation.insert(dilation.begin(), 1);
    pads = {0, pads[0], 0, pads[1]};
  }
  std::vector<int64_t> pad = {pads[0], pads[1]};
  if (pads[0] != pads[2] || pads[1] != pads[3]) {
    NNASM_TRY(n.emit(Opcode::PAD, {x}, {{"pads", imm_ints({0, 0, pads[0], pads[1], 0, 0, pads[2], pads[3]})}}, &x));
    pad = {0, 0};
  }
  std::vector<TensorId> ins = {x, w};
  if (b != NO_TENSOR) ins.push_back(b);
  NNASM_TRY(n.emit(Opcode::CONV2D, ins,
                   {{"stride", imm_ints(stride)}, {"pad", imm_ints(pad)}, {"dilation", imm_ints(dilation)},
                    {"groups", imm_i(group)}},
                   &y));
  if (s == 1) NNASM_TRY(images_as_rows(n, y, &y));
  n.set(0, y, n.type(0));
  return Status::ok();
}

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
  const auto up_front = [&](TensorId id) {
    const TensorDesc& d = n.program().desc(id);
    return d.declared_up_front() && d.role != Role::CONST;
  };
  if (up_front(p[2]) && up_front(p[3])) {
    NNASM_TRY(n.emit(Opcode::BATCHNORM2D, {x, p[0], p[1], p[2], p[3]},
                     {{"eps", imm_f(eps)}, {"momentum", imm_f(1 - momentum)}}, &y));
  } else {
    // Statistics that are computed or constant: the inference formula, per channel (axis 1).
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

Status map_dropout(NodeLowering& n) {
  float ratio = 0.5f;
  bool training = false;
  if (n.opset() < 12) {
    NNASM_TRY(n.expect_inputs(1, 1));
    NNASM_TRY(n.attr("ratio", &ratio));
  } else {
    NNASM_TRY(n.expect_inputs(1, 3));
    int64_t seed = 0;
    NNASM_TRY(n.attr("seed", &seed));  // nnasm's masks follow the context's seed instead
    double v;
    const HostTensor* h;
    if (n.has(2)) {
      NNASM_TRY(n.host(2, "training_mode", &h));
      NNASM_TRY(host_scalar(*h, "training_mode", &v));
      training = v != 0;
    }
    // The ratio matters only when training (it may be anything, even computed, otherwise).
    if (training && n.has(1)) {
      NNASM_TRY(n.host(1, "ratio", &h));
      NNASM_TRY(host_scalar(*h, "ratio", &v));
      ratio = static_cast<float>(v);
    }
  }
  if (n.wants(1)) return Status::error("the mask output (BOOL) is not supported");
  if (!(ratio >= 0 && ratio < 1)) return Status::errorf("ratio {} is outside [0, 1)", ratio);
  TensorId x, y;
  NNASM_TRY(n.tensor(0, &x));
  if (training && ratio > 0) {
    int64_t key = 1;
    for (const Instruction& ins : n.program().code()) key += ins.op == Opcode::DROPOUT;
    NNASM_TRY(n.emit(Opcode::DROPOUT, {x}, {{"rate", imm_f(ratio)}, {"key", imm_i(key)}}, &y));
  } else {
    y = x;  // inference: the identity
  }
  n.set(0, y, n.type(0));
  return Status::ok();
}

}  // namespace nnasm
