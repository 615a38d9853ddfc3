// ONNX's MaxPool and AveragePool onto MAXPOOL2D and AVGPOOL2D (1-D pools over images of height
// 1; padding the instructions cannot express — unequal ends, or more than half the kernel — as a
// PAD first where that gives the same result; ceil_mode onto the instructions' own, which follow
// ONNX's rule for the partial last window), and the global pools onto GLOBAL_AVGPOOL or chains of
// REDUCE_MEAN / REDUCE_MAX.
#include <algorithm>
#include <limits>

#include "serialize/onnx/onnx_host.h"
#include "serialize/onnx/onnx_ops.h"

namespace nnasm {

namespace {

// For an average over a padded input `padded` ([N, C, H, W] after padding by `pads`, [begin h,
// begin w, end h, end w]): per output position, kernel size / the number of the window's
// elements that lie in the image before padding.
Status window_rescale(const Shape& padded, const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                      const std::vector<int64_t>& pads, std::vector<float>* out) {
  std::vector<int64_t> count_of[2];  // per output row, per output column
  if (padded[2] > MAX_FOLD_ELEMENTS / padded[3]) return Status::error("the image is too large to rescale at import time");
  for (int a = 0; a < 2; ++a) {
    const int64_t extent = padded[2 + a], image_end = extent - pads[2 + a];
    for (int64_t o = 0; o < (extent - kernel[a]) / stride[a] + 1; ++o) {
      const int64_t lo = std::max(o * stride[a], pads[a]), hi = std::min(o * stride[a] + kernel[a], image_end);
      count_of[a].push_back(std::max<int64_t>(0, hi - lo));
    }
  }
  out->clear();
  for (int64_t ci : count_of[0])
    for (int64_t cj : count_of[1]) {
      const int64_t c = ci * cj;
      if (c == 0) return Status::error("a window lies entirely in the padding");
      out->push_back(static_cast<float>(kernel[0] * kernel[1]) / static_cast<float>(c));
    }
  return Status::ok();
}

}  // namespace

Status map_pool(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(1, 1));
  const bool max = n.node().op_type == "MaxPool";
  if (n.wants(1)) return Status::error("the Indices output is not supported");
  const std::vector<int64_t> dx = n.dims(0);
  if (dx.size() != 3 && dx.size() != 4)
    return Status::errorf("input is rank {}; only 1-D and 2-D pools (rank 3 and 4) are supported", dx.size());
  const size_t s = dx.size() - 2;
  const std::vector<int64_t> in(dx.begin() + 2, dx.end());
  std::vector<int64_t> kernel, stride(s, 1), dilation(s, 1), pads;
  int64_t ceil_mode = 0, count_include_pad = 0, storage_order = 0;
  NNASM_TRY(n.attr("kernel_shape", &kernel));
  NNASM_TRY(n.attr("strides", &stride));
  NNASM_TRY(n.attr("ceil_mode", &ceil_mode));
  if (max) {
    NNASM_TRY(n.attr("dilations", &dilation));
    NNASM_TRY(n.attr("storage_order", &storage_order));  // orders only the Indices output
  } else {
    NNASM_TRY(n.attr("count_include_pad", &count_include_pad));
  }
  if (kernel.size() != s || stride.size() != s || dilation.size() != s)
    return Status::errorf("kernel_shape, strides and dilations need {} entries", s);
  NNASM_TRY(check_geometry("kernel_shape", kernel, 1));
  for (size_t a = 0; a < s; ++a)
    if (dilation[a] != 1) return Status::error("dilations other than 1 are not supported");
  NNASM_TRY(spatial_pads(n, in, kernel, stride, dilation, &pads));
  std::string auto_pad = "NOTSET";
  NNASM_TRY(n.attr("auto_pad", &auto_pad));
  // ceil_mode adds a last, partial window where the windows do not tile the input exactly.
  bool partial = false;
  for (size_t a = 0; a < s; ++a) {
    const int64_t span = in[a] + pads[a] + pads[a + s] - kernel[a];
    if (span < 0) return Status::errorf("the kernel ({}) is larger than the padded input ({})", kernel[a], span + kernel[a]);
    partial = partial || (ceil_mode != 0 && span % stride[a] != 0);
  }
  // SAME padding fixes the output size by itself; the instructions' ceil_mode follows
  // PyTorch's rule for equal pads at most half the kernel, which a PAD first would change.
  if (partial && auto_pad != "NOTSET")
    return Status::errorf("ceil_mode=1 with auto_pad {} and a partial last window is not supported", auto_pad);
  TensorId x, y;
  NNASM_TRY(n.tensor(0, &x));
  if (s == 1) {
    NNASM_TRY(rows_as_images(n, x, &x));
    kernel.insert(kernel.begin(), 1);
    stride.insert(stride.begin(), 1);
    pads = {0, pads[0], 0, pads[1]};
  }
  std::vector<int64_t> pad = {pads[0], pads[1]};
  const bool fits = pads[0] == pads[2] && pads[1] == pads[3] && 2 * pads[0] <= kernel[0] && 2 * pads[1] <= kernel[1];
  if (partial && !fits)
    return Status::error("ceil_mode=1 with a partial last window and unequal pads, or pads over half the kernel, is "
                         "not supported");
  // Where padding is unequal or over half the kernel, the input is padded first: with −inf for a
  // max pool (it never wins) and zeros for an average. An average that must not count padding is
  // then rescaled by kernel size / image elements per window (a constant of the output's H×W).
  std::vector<float> rescale;
  if (!fits) {
    const float fill = max ? -std::numeric_limits<float>::infinity() : 0.f;
    NNASM_TRY(n.emit(Opcode::PAD, {x}, {{"pads", imm_ints({0, 0, pads[0], pads[1], 0, 0, pads[2], pads[3]})}, {"value", imm_f(fill)}},
                     &x));
    if (!max && count_include_pad == 0) NNASM_TRY(window_rescale(n.tensor_type(x).shape, kernel, stride, pads, &rescale));
    pad = {0, 0};
    count_include_pad = 1;
  }
  if (max)
    NNASM_TRY(n.emit(Opcode::MAXPOOL2D, {x},
                     {{"kernel", imm_ints(kernel)}, {"stride", imm_ints(stride)}, {"pad", imm_ints(pad)}, {"ceil_mode", imm_i(partial)}},
                     &y));
  else
    NNASM_TRY(n.emit(Opcode::AVGPOOL2D, {x},
                     {{"kernel", imm_ints(kernel)}, {"stride", imm_ints(stride)}, {"pad", imm_ints(pad)},
                      {"count_include_pad", imm_i(count_include_pad != 0)}, {"ceil_mode", imm_i(partial)}},
                     &y));
  if (!rescale.empty()) {
    const Shape& o = n.tensor_type(y).shape;
    HostTensor c;
    c.dims = {o[2], o[3]};
    c.f = std::move(rescale);
    TensorId k;
    NNASM_TRY(n.constant(c, &k));
    NNASM_TRY(n.emit(Opcode::MUL, {y, k}, {}, &y));
  }
  if (s == 1) NNASM_TRY(images_as_rows(n, y, &y));
  n.set(0, y, n.type(0));
  return Status::ok();
}

Status map_global_pool(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(1, 1));
  const bool avg = n.node().op_type == "GlobalAveragePool";
  const int r = static_cast<int>(n.dims(0).size());
  if (r < 3) return Status::errorf("input is rank {}, expected N, C and spatial axes", r);
  TensorId y;
  NNASM_TRY(n.tensor(0, &y));
  if (avg && r == 4) {
    NNASM_TRY(n.emit(Opcode::GLOBAL_AVGPOOL, {y}, {}, &y));
  } else {
    for (int a = r - 1; a >= 2; --a)
      NNASM_TRY(n.emit(avg ? Opcode::REDUCE_MEAN : Opcode::REDUCE_MAX, {y}, {{"axis", imm_i(a)}, {"keepdims", imm_i(1)}}, &y));
  }
  n.set(0, y, n.type(0));
  return Status::ok();
}

}  // namespace nnasm
