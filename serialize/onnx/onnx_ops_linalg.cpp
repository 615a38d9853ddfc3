// ONNX's Gemm, MatMul, Conv and Dropout onto MATMUL, CONV2D and DROPOUT. A 1-D convolution is the
// 2-D one over images of height 1; padding CONV2D cannot express (unequal at the two ends) is a
// PAD first.
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
  NNASM_TRY(check_geometry("strides", stride, 1));
  NNASM_TRY(check_geometry("dilations", dilation, 1));
  if (auto_pad == "NOTSET") return check_geometry("pads", *pads, 0);
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
  if (n.dims(0).empty() || n.dims(1).empty()) return Status::error("operands must have rank 1 or more");
  TensorId a, b, y;
  NNASM_TRY(n.tensor(0, &a));
  NNASM_TRY(n.tensor(1, &b));
  NNASM_TRY(matmul_of(n, a, b, &y));
  n.set(0, y, n.type(0));
  return Status::ok();
}

Status matmul_of(NodeLowering& n, TensorId a, TensorId b, TensorId* y) {
  const std::vector<int64_t> da = shape_dims(n.tensor_type(a).shape), db = shape_dims(n.tensor_type(b).shape);
  if (da.empty() || db.empty()) return Status::error("operands must have rank 1 or more");
  if (da.size() == 1) NNASM_TRY(n.reshape(a, {1, da[0]}, &a));
  if (db.size() == 1) NNASM_TRY(n.reshape(b, {db[0], 1}, &b));
  NNASM_TRY(n.emit(Opcode::MATMUL, {a, b}, {}, y));
  std::vector<int64_t> out = shape_dims(n.tensor_type(*y).shape);
  if (db.size() == 1) out.erase(out.end() - 1);
  if (da.size() == 1) out.erase(out.end() - 1 - (db.size() == 1 ? 0 : 1));
  return n.reshape(*y, out, y);
}

Status map_conv(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(2, 3));
  const std::vector<int64_t> dx = n.dims(0), dw = n.dims(1);
  NNASM_TRY(check_conv_ranks(dx, dw));
  TensorId x, w, b = NO_TENSOR, y;
  NNASM_TRY(n.tensor(0, &x));
  NNASM_TRY(n.tensor(1, &w));
  if (n.has(2)) NNASM_TRY(n.tensor(2, &b));
  NNASM_TRY(conv_of(n, x, w, b, &y));
  n.set(0, y, n.type(0));
  return Status::ok();
}

Status check_conv_ranks(const std::vector<int64_t>& dx, const std::vector<int64_t>& dw) {
  if (dx.size() != 3 && dx.size() != 4)
    return Status::errorf("input is rank {}; only 1-D and 2-D convolutions (rank 3 and 4) are supported", dx.size());
  if (dw.size() != dx.size()) return Status::errorf("weights are rank {}, input rank {}", dw.size(), dx.size());
  return Status::ok();
}

Status conv_of(NodeLowering& n, TensorId x, TensorId w, TensorId b, TensorId* y) {
  const std::vector<int64_t> dx = shape_dims(n.tensor_type(x).shape), dw = shape_dims(n.tensor_type(w).shape);
  NNASM_TRY(check_conv_ranks(dx, dw));
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
  NNASM_TRY(spatial_pads(n, in, kernel, stride, dilation, &pads));
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
                   y));
  if (s == 1) NNASM_TRY(images_as_rows(n, *y, y));
  return Status::ok();
}

// ConvTranspose as CONV2D_BWD_DATA (the adjoint of a convolution is a transposed one; ONNX's
// weights [C_in, C_out/group, k...] are CONV2D's [O, C/groups, k...] with O = C_in). The padding
// both ends share is the instruction's; the rest is cropped with SLICEs afterwards.
Status map_conv_transpose(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(2, 3));
  const std::vector<int64_t> dx = n.dims(0), dw = n.dims(1);
  if (dx.size() != 3 && dx.size() != 4)
    return Status::errorf("input is rank {}; only 1-D and 2-D transposed convolutions (rank 3 and 4) are supported", dx.size());
  if (dw.size() != dx.size()) return Status::errorf("weights are rank {}, input rank {}", dw.size(), dx.size());
  if (dw[0] != dx[1]) return Status::errorf("the weights are for {} input channels, the input has {}", dw[0], dx[1]);
  const size_t s = dx.size() - 2;
  std::vector<int64_t> kernel(dw.begin() + 2, dw.end()), given_kernel = kernel, stride(s, 1), dilation(s, 1),
      out_pad(s, 0), out_shape, pads(2 * s, 0);
  int64_t group = 1;
  std::string auto_pad = "NOTSET";
  NNASM_TRY(n.attr("kernel_shape", &given_kernel));
  NNASM_TRY(n.attr("strides", &stride));
  NNASM_TRY(n.attr("dilations", &dilation));
  NNASM_TRY(n.attr("group", &group));
  NNASM_TRY(n.attr("output_padding", &out_pad));
  NNASM_TRY(n.attr("output_shape", &out_shape));
  NNASM_TRY(n.attr("pads", &pads));
  NNASM_TRY(n.attr("auto_pad", &auto_pad));
  if (given_kernel != kernel) return Status::error("kernel_shape differs from the weights'");
  if (stride.size() != s || dilation.size() != s || out_pad.size() != s || pads.size() != 2 * s)
    return Status::errorf("strides, dilations, output_padding and pads need {} entries each ({} for pads)", s, 2 * s);
  if (out_shape.size() == s + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
  if (!out_shape.empty() && out_shape.size() != s) return Status::errorf("output_shape needs {} entries", s);
  NNASM_TRY(check_geometry("strides", stride, 1));
  NNASM_TRY(check_geometry("dilations", dilation, 1));
  NNASM_TRY(check_geometry("pads", pads, 0));
  NNASM_TRY(check_geometry("output_shape", out_shape, 1));
  for (size_t a = 0; a < s; ++a) {
    if (out_pad[a] < 0 || out_pad[a] >= stride[a])
      return Status::errorf("output_padding {} must be in [0, stride {})", out_pad[a], stride[a]);
    const int64_t full = stride[a] * (dx[2 + a] - 1) + out_pad[a] + (kernel[a] - 1) * dilation[a] + 1;
    if (!out_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      // The padding comes from the output's size: the given one, or in·stride for SAME.
      const int64_t out = out_shape.empty() ? dx[2 + a] * stride[a] : out_shape[a];
      const int64_t total = full - out, half = total / 2;
      pads[a] = auto_pad == "SAME_LOWER" ? total - half : half;
      pads[a + s] = total - pads[a];
    } else if (auto_pad == "VALID") {
      pads[a] = pads[a + s] = 0;
    } else if (auto_pad != "NOTSET") {
      return Status::errorf("auto_pad '{}' is not known", auto_pad);
    }
  }
  TensorId x, w, y, shape_of;
  NNASM_TRY(n.tensor(0, &x));
  NNASM_TRY(n.tensor(1, &w));
  if (s == 1) {
    NNASM_TRY(rows_as_images(n, x, &x));
    NNASM_TRY(rows_as_images(n, w, &w));
    kernel.insert(kernel.begin(), 1);
    stride.insert(stride.begin(), 1);
    dilation.insert(dilation.begin(), 1);
    out_pad.insert(out_pad.begin(), 0);
    pads = {0, pads[0], 0, pads[1]};
  }
  const Shape& xs = n.tensor_type(x).shape;
  // Negative pads (an output_shape beyond the full result) add zeros, which the bias then fills.
  std::vector<int64_t> sym(2), full_dims = {xs[0], dw[1] * group, 0, 0}, grow(8, 0);
  std::vector<SliceRange> crop(4);
  for (int a = 0; a < 2; ++a) {
    const int64_t begin = std::max<int64_t>(pads[a], 0), end = std::max<int64_t>(pads[a + 2], 0);
    sym[a] = std::min(begin, end);
    full_dims[2 + a] = stride[a] * (xs[2 + a] - 1) + out_pad[a] + (kernel[a] - 1) * dilation[a] + 1 - 2 * sym[a];
    crop[2 + a] = SliceRange{begin - sym[a], 1, full_dims[2 + a] - (begin - sym[a]) - (end - sym[a])};
    grow[2 + a] = begin - pads[a];
    grow[6 + a] = end - pads[a + 2];
  }
  crop[0] = SliceRange{0, 1, full_dims[0]};
  crop[1] = SliceRange{0, 1, full_dims[1]};
  NNASM_TRY(n.filled(full_dims, 0, &shape_of));
  NNASM_TRY(n.emit(Opcode::CONV2D_BWD_DATA, {x, w, shape_of},
                   {{"stride", imm_ints(stride)}, {"pad", imm_ints(sym)}, {"dilation", imm_ints(dilation)}, {"groups", imm_i(group)}},
                   &y));
  NNASM_TRY(slice_to(n, y, crop, &y));
  if (std::any_of(grow.begin(), grow.end(), [](int64_t p) { return p != 0; }))
    NNASM_TRY(n.emit(Opcode::PAD, {y}, {{"pads", imm_ints(grow)}}, &y));
  if (n.has(2)) {
    TensorId b;
    NNASM_TRY(n.tensor(2, &b));
    NNASM_TRY(n.reshape(b, {full_dims[1], 1, 1}, &b));
    NNASM_TRY(n.emit(Opcode::ADD, {y, b}, {}, &y));
  }
  if (s == 1) NNASM_TRY(images_as_rows(n, y, &y));
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
  const bool drops = training && ratio > 0;
  if (n.wants(1) && drops) return Status::error("the mask output of a training-mode Dropout is not supported");
  if (!(ratio >= 0 && ratio < 1)) return Status::errorf("ratio {} is outside [0, 1)", ratio);
  TensorId x, y;
  NNASM_TRY(n.tensor(0, &x));
  if (n.wants(1)) {
    // Nothing is dropped: the mask is all true (BOOL since opset 10, the input's type before).
    TensorId mask;
    NNASM_TRY(n.emit(Opcode::FILL, {x}, {{"value", imm_f(1)}}, &mask));
    n.set(1, mask, n.opset() >= 10 ? OnnxType::BOOL : n.type(0));
  }
  if (drops) {
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
