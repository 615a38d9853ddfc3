// ONNX's Upsample and Resize. Nearest-neighbour resizing of NCHW images by whole-number factors of
// H and W is UPSAMPLE_NEAREST: rather than trusting that a coordinate mode and rounding rule
// "usually" give x[⌊y / factor⌋], the mapping computes ONNX's source index for every output row
// and column with the node's own rules and takes that instruction only when each one is that
// index. Every other Resize (linear, cubic, nearest by any scale, any rank) is, per axis whose
// size or sampling changes, a product with a constant matrix R[out, in] whose row y holds the
// weights ONNX's reference gives output y: the taps nearest the source coordinate, edge values
// for taps outside, or those left out and the rest renormalized (exclude_outside). Exact to the
// weights' rounding; it costs O(in) per output element where a dedicated kernel would read 2 or
// 4 taps, and an infinity or NaN in the input spreads along its line (0·inf is NaN), where taps
// would keep it local. MATMUL's gradient makes it trainable.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "serialize/onnx/onnx_host.h"
#include "serialize/onnx/onnx_ops.h"

namespace nnasm {

namespace {

// ONNX Resize's source coordinate of output index `y` along an axis of `in` elements, at
// `scale`. The reference's output length in these rules is in · scale, not the rounded size.
Status source_coordinate(const std::string& mode, double y, double scale, int64_t in, double* x) {
  const double out_len = static_cast<double>(in) * scale;
  if (mode == "half_pixel") *x = (y + 0.5) / scale - 0.5;
  else if (mode == "asymmetric") *x = y / scale;
  else if (mode == "pytorch_half_pixel") *x = out_len > 1 ? (y + 0.5) / scale - 0.5 : 0;
  else if (mode == "tf_half_pixel_for_nn") *x = (y + 0.5) / scale;
  else if (mode == "align_corners") *x = out_len == 1 ? 0 : y * static_cast<double>(in - 1) / (out_len - 1);
  else return Status::errorf("coordinate_transformation_mode '{}' is not supported", mode);
  return Status::ok();
}

// The output size and the scale per axis: `scales` (floats; the output is ⌊in · scale⌋) or
// `sizes` (the scale is out / in), as ONNX's reference computes them.
Status sizes_and_scales(NodeLowering& n, const std::vector<int64_t>& in, std::vector<int64_t>* out,
                        std::vector<double>* scale) {
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
    // roi matters only to tf_crop_and_resize, which is refused.
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
  out->resize(r);
  scale->resize(r);
  for (size_t a = 0; a < r; ++a) {
    if (scales.empty()) {
      if (sizes[a] < 1 || sizes[a] > MAX_GEOMETRY) return Status::errorf("size {} of axis {} is out of range", sizes[a], a);
      (*out)[a] = sizes[a];
      (*scale)[a] = static_cast<double>(sizes[a]) / static_cast<double>(in[a]);
    } else {
      const double s = scales[a], o = std::floor(static_cast<double>(in[a]) * s);
      if (!(s > 0 && o >= 1 && o <= MAX_GEOMETRY))
        return Status::errorf("scale {} of axis {} gives an output of {} elements", s, a, o);
      (*out)[a] = static_cast<int64_t>(o);
      (*scale)[a] = s;
    }
  }
  return Status::ok();
}

// What a node asks of one axis.
struct Sampling {
  std::string mode, coords, rounding;
  double cubic_a = -0.75;
  bool exclude_outside = false;
};

// The tap weights for the fractional part `ratio` of a source coordinate (ONNX's reference).
std::vector<double> tap_weights(const Sampling& m, double ratio) {
  if (m.mode == "linear") return {1 - ratio, ratio};
  if (m.mode == "cubic") {
    const double A = m.cubic_a, r = ratio, q = 1 - ratio;
    return {((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A, ((A + 2) * r - (A + 3)) * r * r + 1,
            ((A + 2) * q - (A + 3)) * q * q + 1, ((A * (q + 1) - 5 * A) * (q + 1) + 8 * A) * (q + 1) - 4 * A};
  }
  // nearest: one of the two taps around the coordinate (ratio 1: an exact coordinate, the second).
  if (ratio == 1) return {0, 1};
  bool second = false;
  if (m.rounding == "round_prefer_floor") second = ratio > 0.5;
  else if (m.rounding == "round_prefer_ceil") second = ratio >= 0.5;
  else if (m.rounding == "ceil") second = true;
  return {second ? 0.0 : 1.0, second ? 1.0 : 0.0};
}

// R[out, in] for one axis, row-major: row y the weights of the input elements for output y.
Status axis_matrix(const Sampling& m, int64_t in, int64_t out, double scale, std::vector<double>* r) {
  r->assign(static_cast<size_t>(in * out), 0.0);
  for (int64_t y = 0; y < out; ++y) {
    double x = 0;
    NNASM_TRY(source_coordinate(m.coords, static_cast<double>(y), scale, in, &x));
    const double fl = std::floor(x);
    std::vector<double> w = tap_weights(m, x == fl ? 1 : x - fl);
    const int64_t taps = static_cast<int64_t>(w.size()), pad = (taps + 1) / 2;
    // The taps: the `taps` indices nearest x in the input padded by `pad` edge elements on each
    // side, ties to the lower index, in order.
    const double xp = x + static_cast<double>(pad);
    std::vector<int64_t> idx;
    for (int64_t c = static_cast<int64_t>(std::floor(xp)) - taps; c <= static_cast<int64_t>(std::floor(xp)) + taps; ++c)
      if (c >= 0 && c < in + 2 * pad) idx.push_back(c);
    std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
      return std::fabs(xp - static_cast<double>(a)) < std::fabs(xp - static_cast<double>(b));
    });
    if (static_cast<int64_t>(idx.size()) < taps) return Status::errorf("cannot place {} taps around {}", taps, x);
    idx.resize(static_cast<size_t>(taps));
    std::sort(idx.begin(), idx.end());
    for (int64_t& i : idx) i -= pad;
    if (m.exclude_outside) {
      double sum = 0;
      for (int64_t t = 0; t < taps; ++t) {
        if (idx[t] < 0 || idx[t] >= in) w[t] = 0;
        sum += w[t];
      }
      if (sum == 0) return Status::errorf("every tap of output {} lies outside the input", y);
      for (double& v : w) v /= sum;
    }
    for (int64_t t = 0; t < taps; ++t)
      (*r)[static_cast<size_t>(y * in + std::min(std::max(idx[t], int64_t(0)), in - 1))] += w[t];
  }
  return Status::ok();
}

// Whether R repeats each input element `f` times (what UPSAMPLE_NEAREST does along an axis).
bool is_repeat(const std::vector<double>& r, int64_t in, int64_t out, int64_t* f) {
  if (out % in != 0) return false;
  *f = out / in;
  for (int64_t y = 0; y < out; ++y)
    for (int64_t x = 0; x < in; ++x)
      if (r[static_cast<size_t>(y * in + x)] != (x == y / *f ? 1.0 : 0.0)) return false;
  return true;
}

bool is_identity(const std::vector<double>& r, int64_t in, int64_t out) {
  int64_t f;
  return in == out && is_repeat(r, in, out, &f);
}

// y = x resampled along axis `a` by R[out, in]: x as [P, in, Q] times R from the left (as
// [P, in] times Rᵀ for the last axis).
Status apply_axis(NodeLowering& n, TensorId x, std::vector<int64_t>* dims, size_t a, const std::vector<double>& r,
                  int64_t out, TensorId* y) {
  const int64_t in = (*dims)[a];
  int64_t p = 1, q = 1;
  for (size_t k = 0; k < a; ++k) p *= (*dims)[k];
  for (size_t k = a + 1; k < dims->size(); ++k) q *= (*dims)[k];
  HostTensor m;
  TensorId rt, xr, z;
  if (q == 1) {
    m.dims = {in, out};
    m.f.resize(static_cast<size_t>(in * out));
    for (int64_t i = 0; i < in; ++i)
      for (int64_t o = 0; o < out; ++o) m.f[static_cast<size_t>(i * out + o)] = static_cast<float>(r[static_cast<size_t>(o * in + i)]);
    NNASM_TRY(n.constant(m, &rt));
    NNASM_TRY(n.reshape(x, {p, in}, &xr));
    NNASM_TRY(n.emit(Opcode::MATMUL, {xr, rt}, {}, &z));
  } else {
    m.dims = {out, in};
    m.f.assign(r.begin(), r.end());
    NNASM_TRY(n.constant(m, &rt));
    NNASM_TRY(n.reshape(x, p == 1 ? std::vector<int64_t>{in, q} : std::vector<int64_t>{p, in, q}, &xr));
    NNASM_TRY(n.emit(Opcode::MATMUL, {rt, xr}, {}, &z));
  }
  (*dims)[a] = out;
  return n.reshape(z, *dims, y);
}

}  // namespace

Status map_resize(NodeLowering& n) {
  const std::vector<int64_t> in = n.dims(0);
  Sampling m;
  m.mode = "nearest";
  NNASM_TRY(n.attr("mode", &m.mode));
  // Before Resize-11 (and for Upsample) nearest is x[⌊y / scale⌋]: asymmetric coordinates, floor.
  m.coords = "asymmetric";
  m.rounding = "floor";
  const bool resize11 = n.node().op_type == "Resize" && n.opset() >= 11;
  if (resize11) {
    m.coords = "half_pixel";
    m.rounding = "round_prefer_floor";
    float a = -0.75f, extrapolation = 0;
    int64_t exclude = 0;
    NNASM_TRY(n.attr("coordinate_transformation_mode", &m.coords));
    NNASM_TRY(n.attr("nearest_mode", &m.rounding));
    NNASM_TRY(n.attr("cubic_coeff_a", &a));
    NNASM_TRY(n.attr("exclude_outside", &exclude));
    NNASM_TRY(n.attr("extrapolation_value", &extrapolation));  // tf_crop_and_resize only
    m.cubic_a = a;
    m.exclude_outside = exclude != 0;
  }
  if (m.mode != "nearest" && m.mode != "linear" && m.mode != "cubic")
    return Status::errorf("mode '{}' is not known (nearest, linear, cubic)", m.mode);
  if (m.mode != "nearest" && n.node().op_type != "Resize")
    return Status::errorf("{} mode '{}' is not supported (only 'nearest')", n.node().op_type, m.mode);
  if (m.rounding != "round_prefer_floor" && m.rounding != "round_prefer_ceil" && m.rounding != "floor" &&
      m.rounding != "ceil")
    return Status::errorf("nearest_mode '{}' is not known", m.rounding);
  if (m.coords == "tf_crop_and_resize") return Status::error("coordinate_transformation_mode 'tf_crop_and_resize' is not supported");
  if (in.empty()) return Status::error("the input is a scalar");
  std::vector<int64_t> out;
  std::vector<double> scale;
  NNASM_TRY(sizes_and_scales(n, in, &out, &scale));
  std::vector<std::vector<double>> r(in.size());
  for (size_t a = 0; a < in.size(); ++a) {
    NNASM_TRY(check_fold_size({in[a], out[a]}));
    NNASM_TRY(axis_matrix(m, in[a], out[a], scale[a], &r[a]).with_prefix(fmt::format("axis {}: ", a)));
  }
  TensorId x, y;
  NNASM_TRY(n.tensor(0, &x));
  // Nearest by whole factors of H and W of an image: one UPSAMPLE_NEAREST, a copy.
  int64_t fh = 1, fw = 1;
  if (m.mode == "nearest" && in.size() == 4 && is_identity(r[0], in[0], out[0]) && is_identity(r[1], in[1], out[1]) &&
      is_repeat(r[2], in[2], out[2], &fh) && is_repeat(r[3], in[3], out[3], &fw)) {
    if (fh == 1 && fw == 1) y = x;
    else NNASM_TRY(n.emit(Opcode::UPSAMPLE_NEAREST, {x}, {{"scale", imm_ints({fh, fw})}}, &y));
    n.set(0, y, n.type(0));
    return Status::ok();
  }
  if (!resize11) return Status::error("only nearest upsampling of H and W by whole factors (before Resize-11)");
  if (n.tensor_type(x).dtype != DType::F32) return Status::errorf("the input is {}; resampling other than by copies needs FLOAT", onnx_type_name(n.type(0)));
  std::vector<int64_t> dims = in;
  y = x;
  for (size_t a = 0; a < in.size(); ++a)
    if (!is_identity(r[a], in[a], out[a])) NNASM_TRY(apply_axis(n, y, &dims, a, r[a], out[a], &y));
  n.set(0, y, n.type(0));
  return Status::ok();
}

}  // namespace nnasm
