// ONNX's Upsample and Resize onto UPSAMPLE_NEAREST: nearest-neighbour resizing of NCHW images by
// whole-number factors of H and W. Rather than trusting that a coordinate mode and rounding rule
// "usually" give x[⌊y / factor⌋], the mapping computes ONNX's source index for every output row
// and column with the node's own rules and accepts the node only when each one is that index.
#include <cmath>

#include "serialize/onnx/onnx_host.h"
#include "serialize/onnx/onnx_ops.h"

namespace nnasm {

namespace {

// ONNX Resize's source coordinate of output index `y` along an axis of `in` → `out` elements.
Status source_coordinate(const std::string& mode, double y, double scale, int64_t in, int64_t out, double* x) {
  if (mode == "half_pixel") *x = (y + 0.5) / scale - 0.5;
  else if (mode == "asymmetric") *x = y / scale;
  else if (mode == "pytorch_half_pixel") *x = out > 1 ? (y + 0.5) / scale - 0.5 : 0;
  else if (mode == "tf_half_pixel_for_nn") *x = (y + 0.5) / scale;
  else if (mode == "align_corners") *x = out == 1 ? 0 : y * static_cast<double>(in - 1) / static_cast<double>(out - 1);
  else return Status::errorf("coordinate_transformation_mode '{}' is not supported", mode);
  return Status::ok();
}

Status nearest(const std::string& mode, double x, double* i) {
  const double fl = std::floor(x);
  if (mode == "round_prefer_floor") *i = x - fl == 0.5 ? fl : std::round(x);
  else if (mode == "round_prefer_ceil") *i = x - fl == 0.5 ? fl + 1 : std::round(x);
  else if (mode == "floor") *i = fl;
  else if (mode == "ceil") *i = std::ceil(x);
  else return Status::errorf("nearest_mode '{}' is not known", mode);
  return Status::ok();
}

// The factors out / in per axis, each a whole number: from `scales` (floats) or `sizes`.
Status factors(NodeLowering& n, const std::vector<int64_t>& in, std::vector<int64_t>* f) {
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  const std::string& op = n.node().op_type;
  if (op == "Upsample" && n.opset() < 9) {
    NNASM_TRY(n.expect_inputs(1, 1));
    std::vector<float> s;
    NNASM_TRY(n.attr("scales", &s));
    scales.assign(s.begin(), s.end());
  } else {
    const int scales_input = op == "Upsample" || n.opset() < 11 ? 1 : 2;
    NNASM_TRY(n.expect_inputs(1, scales_input == 1 ? 2 : 4));
    // roi matters only to tf_crop_and_resize, which is refused below.
    const HostTensor* t;
    if (n.has(scales_input)) {
      NNASM_TRY(n.host(scales_input, "scales", &t));
      for (int64_t k = 0; k < t->numel(); ++k) scales.push_back(t->as_double(k));
    }
    if (scales.empty() && n.has(3)) {
      NNASM_TRY(n.host(3, "sizes", &t));
      NNASM_TRY(host_int_list(*t, "sizes", &sizes));
    }
  }
  const size_t r = in.size();
  if (scales.size() != r && sizes.size() != r)
    return Status::errorf("needs {} scales or sizes, has {} and {}", r, scales.size(), sizes.size());
  f->resize(r);
  for (size_t a = 0; a < r; ++a) {
    const double s = scales.empty() ? static_cast<double>(sizes[a]) / static_cast<double>(in[a]) : scales[a];
    if (!(s >= 1 && s == std::floor(s) && s <= 1 << 16))
      return Status::errorf("scale {} of axis {} is not a whole number ≥ 1 (only nearest upsampling by whole factors)", s, a);
    (*f)[a] = static_cast<int64_t>(s);
  }
  return Status::ok();
}

}  // namespace

Status map_resize(NodeLowering& n) {
  const std::vector<int64_t> in = n.dims(0);
  std::string mode = "nearest";
  NNASM_TRY(n.attr("mode", &mode));
  // Before Resize-11 (and for Upsample) nearest is x[⌊y / scale⌋]: asymmetric coordinates, floor.
  std::string coords = "asymmetric", rounding = "floor";
  if (n.node().op_type == "Resize" && n.opset() >= 11) {
    coords = "half_pixel";
    rounding = "round_prefer_floor";
    NNASM_TRY(n.attr("coordinate_transformation_mode", &coords));
    NNASM_TRY(n.attr("nearest_mode", &rounding));
    float unused_f;
    int64_t unused_i;
    NNASM_TRY(n.attr("cubic_coeff_a", &unused_f));  // cubic mode only
    NNASM_TRY(n.attr("exclude_outside", &unused_i));  // cubic mode only
    NNASM_TRY(n.attr("extrapolation_value", &unused_f));  // tf_crop_and_resize only
  }
  if (mode != "nearest") return Status::errorf("mode '{}' is not supported (only 'nearest')", mode);
  if (in.size() != 4) return Status::errorf("input is rank {}; only NCHW images (rank 4) are supported", in.size());
  std::vector<int64_t> f;
  NNASM_TRY(factors(n, in, &f));
  if (f[0] != 1 || f[1] != 1) return Status::error("resizing the batch or channel axis is not supported");
  for (size_t a = 2; a < 4; ++a) {
    const int64_t out = in[a] * f[a];  // f ≤ 2^16 and in ≤ 2^32: no overflow
    if (out > MAX_GEOMETRY) return Status::errorf("an output of {} along axis {} is too large to check", out, a);
    for (int64_t y = 0; y < out; ++y) {
      double x = 0, i = 0;
      NNASM_TRY(source_coordinate(coords, static_cast<double>(y), static_cast<double>(f[a]), in[a], out, &x));
      NNASM_TRY(nearest(rounding, x, &i));
      i = std::min(std::max(i, 0.0), static_cast<double>(in[a] - 1));
      if (i != static_cast<double>(y / f[a]))
        return Status::errorf("{} with {} rounding reads row {} for output {} of axis {}, which UPSAMPLE_NEAREST does not",
                              coords, rounding, i, y, a);
    }
  }
  TensorId x, y;
  NNASM_TRY(n.tensor(0, &x));
  if (f[2] == 1 && f[3] == 1) y = x;
  else NNASM_TRY(n.emit(Opcode::UPSAMPLE_NEAREST, {x}, {{"scale", imm_ints({f[2], f[3]})}}, &y));
  n.set(0, y, n.type(0));
  return Status::ok();
}

}  // namespace nnasm
