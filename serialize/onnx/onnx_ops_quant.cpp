// ONNX's quantization operators onto QUANTIZE, DEQUANTIZE and f32 arithmetic:
//   QuantizeLinear, DequantizeLinear   QUANTIZE / DEQUANTIZE (ONNX's semantics), per tensor or
//                                      per axis. (A static QDQ chain around a MatMul, Gemm or Conv
//                                      becomes one LINEAR_I8 / CONV2D_I8: onnx_fuse_quant.cpp.)
//   DynamicQuantizeLinear              REDUCE_MIN/MAX, MINIMUM/MAXIMUM with 0, DIV and QUANTIZE, in
//                                      the order ONNX's formula takes, so the results are bitwise
//                                      ONNX's.
//   MatMulInteger, ConvInteger         each operand DEQUANTIZEd with scale 1 and its zero point to
//                                      f32, MATMUL / CONV2D, CAST to i32. Exact only while every
//                                      partial sum stays within 2^24 (f32's integers): the mapping
//                                      proves that bound or refuses the node. (ONNX Runtime's
//                                      dynamic-quantization chains around MatMulInteger become
//                                      one LINEAR_I8 instead: onnx_fuse_quant.cpp.)
//   QLinearMatMul, QLinearConv         DEQUANTIZE, MATMUL / CONV2D in f32, QUANTIZE with y's scale
//                                      and zero point (docs/quantization.md says where that can
//                                      differ from an integer implementation).
// The 8-bit operands are i8 and u8 tensors; NodeLowering::tensor() widens them to i32 for every
// other mapping. Scales and zero points known at import time are checked here (a zero, NaN or
// infinite scale, a zero point outside its type's range or of another type than x's, lengths that
// do not match), since QUANTIZE and DEQUANTIZE cannot see a constant's values.
#include <algorithm>
#include <cmath>

#include "serialize/onnx/onnx_host.h"
#include "serialize/onnx/onnx_ops.h"

namespace nnasm {

namespace {

bool is_8bit(OnnxType t) { return t == OnnxType::UINT8 || t == OnnxType::INT8; }

DType dtype_of_8bit(OnnxType t) { return t == OnnxType::INT8 ? DType::I8 : DType::U8; }

// The integer range of an 8-bit ONNX type.
int64_t type_lo(OnnxType t) { return t == OnnxType::INT8 ? -128 : 0; }
int64_t type_hi(OnnxType t) { return t == OnnxType::INT8 ? 127 : 255; }

// A zero-filled zero point of type t and dims.
HostTensor zeros_of(OnnxType t, const std::vector<int64_t>& dims) {
  HostTensor h;
  h.type = t;
  h.dims = dims;
  h.i.assign(static_cast<size_t>(h.numel()), 0);
  return h;
}

// f32 x as an 8-bit tensor of ONNX type t: QUANTIZE with scale 1 and zero point 0 is
// saturate(round_half_even(x)).
Status quantize_unit(NodeLowering& n, TensorId x, OnnxType t, TensorId* y) {
  TensorId one, zero;
  NNASM_TRY(n.scalar(1, &one));
  NNASM_TRY(n.typed_constant(zeros_of(t, {}), dtype_of_8bit(t), &zero));
  return n.emit(Opcode::QUANTIZE, {x, one, zero}, {}, y);
}

// Input k, an integer operand of ONNX type UINT8, INT8 or INT32, as a tensor of its own dtype (u8,
// i8 or i32): a constant of that dtype for values known at import time, an i32 tensor standing
// for an 8-bit value converted back.
Status operand(NodeLowering& n, int k, TensorId* out) {
  const OnnxType t = n.type(k);
  if (n.is_host(k)) {
    const HostTensor* h;
    NNASM_TRY(n.host(k, "operand", &h));
    for (int64_t e = 0; e < h->numel(); ++e)
      if (!onnx_type_holds(t, h->i[e]))
        return Status::errorf("input {} holds {} at index {}, outside {}'s range", k + 1, h->i[e], e, onnx_type_name(t));
    return n.typed_constant(*h, is_8bit(t) ? dtype_of_8bit(t) : DType::I32, out);
  }
  const TensorId id = n.value(k).id;
  const DType dt = n.tensor_type(id).dtype;
  if (!is_8bit(t) || dt == DType::I8 || dt == DType::U8) {
    *out = id;
    return Status::ok();
  }
  TensorId f;
  NNASM_TRY(n.emit(Opcode::CAST, {id}, {{"to", imm_i(0)}}, &f));
  return quantize_unit(n, f, t, out);
}

// The scale, input k: FLOAT, rank ≤ 1 (its length against x is checked by the caller). Values
// known at import time must be finite and non-zero.
Status check_scale(NodeLowering& n, int k, const char* what) {
  if (n.type(k) != OnnxType::FLOAT) return Status::errorf("{} is {}, expected FLOAT", what, onnx_type_name(n.type(k)));
  const std::vector<int64_t> d = n.dims(k);
  if (d.size() > 1) return Status::errorf("{} is rank {}; a scale is a scalar or 1-D", what, d.size());
  if (!n.is_host(k)) return Status::ok();
  const HostTensor* h;
  NNASM_TRY(n.host(k, what, &h));
  for (int64_t e = 0; e < h->numel(); ++e)
    if (!std::isfinite(h->f[e]) || h->f[e] == 0)
      return Status::errorf("{} holds {} at index {}; a scale must be finite and non-zero", what, h->f[e], e);
  return Status::ok();
}

// The zero point, input k (optional): of type `want` (or, when `want` is UNDEFINED, UINT8 or
// INT8), with as many elements as the scale, input s. Absent: zeros of `absent_type`.
Status zero_point(NodeLowering& n, int k, int s, OnnxType want, OnnxType absent_type, const char* what, TensorId* out,
                  OnnxType* type) {
  const std::vector<int64_t> ds = n.dims(s);
  if (!n.has(k)) {
    *type = absent_type;
    return n.typed_constant(zeros_of(absent_type, ds), is_8bit(absent_type) ? dtype_of_8bit(absent_type) : DType::I32,
                            out);
  }
  const OnnxType t = n.type(k);
  if (want != OnnxType::UNDEFINED && t != want)
    return Status::errorf("{} is {}, expected {} (the quantized operand's type)", what, onnx_type_name(t),
                          onnx_type_name(want));
  if (want == OnnxType::UNDEFINED && !is_8bit(t))
    return Status::errorf("{} is {}, expected UINT8 or INT8", what, onnx_type_name(t));
  const std::vector<int64_t> dz = n.dims(k);
  int64_t nz = 1, ns = 1;
  for (int64_t d : dz) nz *= d;
  for (int64_t d : ds) ns *= d;
  if (dz.size() > 1 || nz != ns)
    return Status::errorf("{} has shape [{}], the scale [{}]: they must have the same number of elements",
                          what, fmt::join(dz, ","), fmt::join(ds, ","));
  *type = t;
  return operand(n, k, out).with_prefix(std::string(what) + ": ");
}

// The axis immediate: the attribute from opset 13 on (default 1), normalized against x's rank.
// With one scale (input s) it is ignored, as ONNX does.
Status quant_axis(NodeLowering& n, int s, int* axis) {
  int64_t a = 1;
  if (n.opset() >= 13) NNASM_TRY(n.attr("axis", &a));
  int64_t c = 1;
  for (int64_t d : n.dims(s)) c *= d;
  *axis = 0;
  if (c == 1) return Status::ok();
  return normalize_axis(a, static_cast<int>(n.dims(0).size()), axis).with_prefix("axis: ");
}

// Per-axis scales and zero points must run along x's `axis`: ONNX's rule, said before
// DEQUANTIZE's own check so the message names the ONNX inputs.
Status check_axis_length(NodeLowering& n, int x, int s, int axis, const char* what) {
  const std::vector<int64_t> dx = n.dims(x), ds = n.dims(s);
  int64_t c = 1;
  for (int64_t d : ds) c *= d;
  if (c == 1) return Status::ok();
  if (dx.empty() || c != dx[static_cast<size_t>(axis)])
    return Status::errorf("{} has {} elements; per-axis quantization along axis {} needs {} (x is [{}])", what, c, axis,
                          dx.empty() ? 1 : dx[static_cast<size_t>(axis)], fmt::join(dx, ","));
  return Status::ok();
}

// Integer operand k with its zero point z (optional) to f32 with scale 1: exact. A per-axis zero
// point (more than one element) runs along `axis` of the operand.
Status widen(NodeLowering& n, int k, int z, int axis, const char* what, TensorId* out) {
  const OnnxType t = n.type(k);
  if (!is_8bit(t)) return Status::errorf("{} is {}, expected UINT8 or INT8", what, onnx_type_name(t));
  TensorId x, zp, ones;
  NNASM_TRY(operand(n, k, &x));
  std::vector<int64_t> dz = n.has(z) ? n.dims(z) : std::vector<int64_t>{};
  int64_t nz = 1;
  for (int64_t d : dz) nz *= d;
  const std::string zwhat = fmt::format("the zero point of {}", what);
  if (n.has(z)) {
    if (n.type(z) != t)
      return Status::errorf("{} is {}, expected {} (the operand's type)", zwhat, onnx_type_name(n.type(z)), onnx_type_name(t));
    // 8-bit tensors take no RESHAPE, so only a scalar or 1-D zero point is read as it is.
    if (dz.size() > 1) return Status::errorf("{} is [{}]; a zero point is a scalar or 1-D", zwhat, fmt::join(dz, ","));
    NNASM_TRY(operand(n, z, &zp).with_prefix(zwhat + ": "));
  } else {
    NNASM_TRY(n.typed_constant(zeros_of(t, {}), dtype_of_8bit(t), &zp));
  }
  const std::vector<int64_t> dx = n.dims(k);
  if (nz > 1) {
    const int a = axis < 0 ? axis + static_cast<int>(dx.size()) : axis;
    if (a < 0 || dx[static_cast<size_t>(a)] != nz)
      return Status::errorf("{} has {} elements; {} is [{}], which has {} along axis {}", zwhat, nz, what,
                            fmt::join(dx, ","), a < 0 ? 0 : dx[static_cast<size_t>(a)], axis);
  }
  NNASM_TRY(n.filled(nz > 1 ? std::vector<int64_t>{nz} : std::vector<int64_t>{}, 1, &ones));
  return n.emit(Opcode::DEQUANTIZE, {x, ones, zp}, {{"axis", imm_i(axis)}}, out);
}

// The largest |v − zp| operand k can hold: from its values when known at import time, else from
// its type's range against its zero point's values (or any zero point of the type). Requires
// widen() to have checked k and z (types, and z's length against k's `axis`).
int64_t max_magnitude(NodeLowering& n, int k, int z, int axis) {
  const OnnxType t = n.type(k);
  const HostTensor* zh = nullptr;
  if (n.has(z) && n.is_host(z)) (void)n.host(z, "zero point", &zh);
  auto zp_at = [&](int64_t c) -> int64_t { return zh ? zh->i[zh->numel() == 1 ? 0 : c] : 0; };
  const bool zp_known = !n.has(z) || zh;
  if (n.is_host(k)) {
    const HostTensor* h;
    if (n.host(k, "operand", &h)) {
      const std::vector<int64_t>& d = h->dims;
      const int a = axis < 0 ? axis + static_cast<int>(d.size()) : axis;
      int64_t inner = 1;
      for (size_t j = static_cast<size_t>(a) + 1; j < d.size(); ++j) inner *= d[j];
      const int64_t len = d.empty() ? 1 : d[static_cast<size_t>(a)];
      int64_t m = 0;
      for (int64_t e = 0; e < h->numel(); ++e) {
        const int64_t zp = zp_known ? zp_at((e / inner) % len) : 0;
        m = std::max(m, zp_known ? std::abs(h->i[e] - zp) : std::max(h->i[e] - type_lo(t), type_hi(t) - h->i[e]));
      }
      return m;
    }
  }
  if (!zp_known) return type_hi(t) - type_lo(t);
  int64_t m = 0;
  const int64_t nz = zh ? zh->numel() : 1;
  for (int64_t c = 0; c < nz; ++c) m = std::max({m, zp_at(c) - type_lo(t), type_hi(t) - zp_at(c)});
  return m;
}

// Refuses an integer product whose partial sums could leave f32's exact integers.
Status check_exact(int64_t k_len, int64_t ma, int64_t mb) {
  constexpr int64_t LIMIT = int64_t(1) << 24;
  if (k_len * ma * mb > LIMIT)
    return Status::errorf("not supported: the product runs in f32, exact only while every partial sum stays within 2^24, "
                          "and here it can reach {} (K {} × max|a−a_zero_point| {} × max|b−b_zero_point| {}); an "
                          "integer kernel would be needed",
                          k_len * ma * mb, k_len, ma, mb);
  return Status::ok();
}

// Input k, a scale, as an f32 tensor; a per-axis one with more than one element is 1-D.
Status scale_tensor(NodeLowering& n, int k, const char* what, TensorId* out) {
  NNASM_TRY(check_scale(n, k, what));
  return n.tensor(k, out);
}

// Dequantizes operand k with scale s and zero point z along `axis` (−1 counts from the end).
Status dequantize_operand(NodeLowering& n, int k, int s, int z, int axis, const char* what, TensorId* out) {
  const OnnxType t = n.type(k);
  if (!is_8bit(t)) return Status::errorf("{} is {}, expected UINT8 or INT8", what, onnx_type_name(t));
  const std::string swhat = fmt::format("the scale of {}", what), zwhat = fmt::format("the zero point of {}", what);
  TensorId x, scale, zp;
  OnnxType zt;
  NNASM_TRY(scale_tensor(n, s, swhat.c_str(), &scale));
  NNASM_TRY(zero_point(n, z, s, t, t, zwhat.c_str(), &zp, &zt));
  NNASM_TRY(operand(n, k, &x));
  const int rank = static_cast<int>(n.dims(k).size());
  const int a = axis < 0 ? axis + rank : axis;
  int64_t c = 1;
  for (int64_t d : n.dims(s)) c *= d;
  if (c > 1 && (a < 0 || a >= rank || n.dims(k)[static_cast<size_t>(a)] != c))
    return Status::errorf("{} has {} elements; {} is [{}], which is per tensor (1) or per axis along axis {}", swhat, c,
                          what, fmt::join(n.dims(k), ","), axis);
  return n.emit(Opcode::DEQUANTIZE, {x, scale, zp}, {{"axis", imm_i(axis)}}, out);
}

}  // namespace

Status cast_to_8bit(NodeLowering& n, TensorId x, OnnxType to, TensorId* y) {
  NNASM_TRY(n.emit(Opcode::CAST, {x}, {{"to", imm_i(1)}}, y));
  NNASM_TRY(n.emit(Opcode::CAST, {*y}, {{"to", imm_i(0)}}, y));
  return quantize_unit(n, *y, to, y);
}

Status map_quantize_linear(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(2, 3));
  if (n.type(0) != OnnxType::FLOAT) return Status::errorf("x is {}; nnasm quantizes FLOAT", onnx_type_name(n.type(0)));
  int axis;
  NNASM_TRY(quant_axis(n, 1, &axis));
  NNASM_TRY(check_scale(n, 1, "y_scale"));
  NNASM_TRY(check_axis_length(n, 0, 1, axis, "y_scale"));
  TensorId x, scale, zp, y;
  OnnxType t;
  NNASM_TRY(zero_point(n, 2, 1, OnnxType::UNDEFINED, OnnxType::UINT8, "y_zero_point", &zp, &t));
  NNASM_TRY(n.tensor(0, &x));
  NNASM_TRY(n.tensor(1, &scale));
  NNASM_TRY(n.emit(Opcode::QUANTIZE, {x, scale, zp}, {{"axis", imm_i(axis)}}, &y));
  n.set(0, y, t);
  return Status::ok();
}

Status map_dequantize_linear(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(2, 3));
  const OnnxType t = n.type(0);
  if (!is_8bit(t) && t != OnnxType::INT32)
    return Status::errorf("x is {}, expected UINT8, INT8 or INT32", onnx_type_name(t));
  int axis;
  NNASM_TRY(quant_axis(n, 1, &axis));
  NNASM_TRY(check_scale(n, 1, "x_scale"));
  NNASM_TRY(check_axis_length(n, 0, 1, axis, "x_scale"));
  TensorId x, scale, zp, y;
  OnnxType zt;
  NNASM_TRY(zero_point(n, 2, 1, t, t, "x_zero_point", &zp, &zt));
  NNASM_TRY(operand(n, 0, &x));
  NNASM_TRY(n.tensor(1, &scale));
  NNASM_TRY(n.emit(Opcode::DEQUANTIZE, {x, scale, zp}, {{"axis", imm_i(axis)}}, &y));
  n.set(0, y, OnnxType::FLOAT);
  return Status::ok();
}

// ONNX's formula, step for step in f32 (its reference and the node tests' expected values):
//   lo = min(0, min x), hi = max(0, max x)
//   scale = (hi − lo, or 1 when that is 0) / 255
//   zp = saturate(round_half_even(−lo / scale))            (u8)
//   y = saturate(round_half_even(x / scale) + zp)          (u8)
// QUANTIZE with scale 1 and zero point 0 is the zero point's saturate(round_half_even(·)); the
// zero point is an integer, so adding it in i32 (QUANTIZE) or in f32 (ONNX) gives the same.
Status map_dynamic_quantize_linear(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(1, 1));
  if (n.type(0) != OnnxType::FLOAT) return Status::errorf("x is {}, expected FLOAT", onnx_type_name(n.type(0)));
  TensorId x, zero, c255, hi, lo, range, empty, scale, zpf, zp, y;
  NNASM_TRY(n.tensor(0, &x));
  std::vector<int> axes;
  for (int a = static_cast<int>(n.dims(0).size()) - 1; a >= 0; --a) axes.push_back(a);
  NNASM_TRY(reduce_chain(n, Opcode::REDUCE_MAX, x, axes, false, &hi));
  NNASM_TRY(reduce_chain(n, Opcode::REDUCE_MIN, x, axes, false, &lo));
  NNASM_TRY(n.scalar(0, &zero));
  NNASM_TRY(n.scalar(255, &c255));
  NNASM_TRY(n.emit(Opcode::MAXIMUM, {hi, zero}, {}, &hi));
  NNASM_TRY(n.emit(Opcode::MINIMUM, {lo, zero}, {}, &lo));
  NNASM_TRY(n.emit(Opcode::SUB, {hi, lo}, {}, &range));
  // An all-zero x has range 0: ONNX takes 1 there (so the scale is 1/255, not 0).
  NNASM_TRY(n.emit(Opcode::EQUAL, {range, zero}, {}, &empty));
  NNASM_TRY(n.emit(Opcode::ADD, {range, empty}, {}, &range));
  NNASM_TRY(n.emit(Opcode::DIV, {range, c255}, {}, &scale));
  NNASM_TRY(n.emit(Opcode::DIV, {lo, scale}, {}, &zpf));
  NNASM_TRY(n.emit(Opcode::SUB, {zero, zpf}, {}, &zpf));
  NNASM_TRY(quantize_unit(n, zpf, OnnxType::UINT8, &zp));
  NNASM_TRY(n.emit(Opcode::QUANTIZE, {x, scale, zp}, {}, &y));
  n.set(0, y, OnnxType::UINT8);
  n.set(1, scale, OnnxType::FLOAT);
  n.set(2, zp, OnnxType::UINT8);
  return Status::ok();
}

// A's zero point runs along its rows (axis −2, or its only axis when A is 1-D), B's along its
// columns (axis −1).
Status map_matmul_integer(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(2, 4));
  const std::vector<int64_t> da = n.dims(0), db = n.dims(1);
  if (da.empty() || db.empty()) return Status::error("operands must have rank 1 or more");
  const int axis_a = da.size() == 1 ? 0 : -2, axis_b = -1;
  TensorId a, b, y;
  NNASM_TRY(widen(n, 0, 2, axis_a, "A", &a));
  NNASM_TRY(widen(n, 1, 3, axis_b, "B", &b));
  NNASM_TRY(check_exact(da.back(), max_magnitude(n, 0, 2, axis_a), max_magnitude(n, 1, 3, axis_b)));
  NNASM_TRY(matmul_of(n, a, b, &y));
  NNASM_TRY(n.emit(Opcode::CAST, {y}, {{"to", imm_i(1)}}, &y));
  n.set(0, y, OnnxType::INT32);
  return Status::ok();
}

// w's zero point runs along the output channels (axis 0).
Status map_conv_integer(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(2, 4));
  const std::vector<int64_t> dx = n.dims(0), dw = n.dims(1);
  NNASM_TRY(check_conv_ranks(dx, dw));
  int64_t k_len = 1;
  for (size_t j = 1; j < dw.size(); ++j) k_len *= dw[j];
  if (n.has(2) && n.dims(2).size() > 0) {
    int64_t c = 1;
    for (int64_t d : n.dims(2)) c *= d;
    if (c != 1) return Status::errorf("x_zero_point has {} elements; ConvInteger's x is quantized per tensor", c);
  }
  TensorId x, w, y;
  NNASM_TRY(widen(n, 0, 2, 1, "x", &x));
  NNASM_TRY(widen(n, 1, 3, 0, "w", &w));
  NNASM_TRY(check_exact(k_len, max_magnitude(n, 0, 2, 1), max_magnitude(n, 1, 3, 0)));
  NNASM_TRY(conv_of(n, x, w, NO_TENSOR, &y));
  NNASM_TRY(n.emit(Opcode::CAST, {y}, {{"to", imm_i(1)}}, &y));
  n.set(0, y, OnnxType::INT32);
  return Status::ok();
}

// Inputs a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point. a per tensor
// or per row, b per tensor or per column, y per tensor.
Status map_qlinear_matmul(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(8, 8));
  const std::vector<int64_t> da = n.dims(0), db = n.dims(3);
  if (da.empty() || db.empty()) return Status::error("operands must have rank 1 or more");
  TensorId a, b, y, ys, yz;
  OnnxType yt;
  NNASM_TRY(dequantize_operand(n, 0, 1, 2, da.size() == 1 ? 0 : -2, "a", &a));
  NNASM_TRY(dequantize_operand(n, 3, 4, 5, -1, "b", &b));
  NNASM_TRY(matmul_of(n, a, b, &y));
  NNASM_TRY(scale_tensor(n, 6, "y_scale", &ys));
  if (shape_dims(n.tensor_type(ys).shape) != std::vector<int64_t>{} && n.tensor_type(ys).shape.numel() != 1)
    return Status::error("y_scale must be a scalar: QLinearMatMul's y is quantized per tensor");
  NNASM_TRY(zero_point(n, 7, 6, OnnxType::UNDEFINED, OnnxType::UINT8, "y_zero_point", &yz, &yt));
  NNASM_TRY(n.emit(Opcode::QUANTIZE, {y, ys, yz}, {}, &y));
  n.set(0, y, yt);
  return Status::ok();
}

// Inputs x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B. x and y
// per tensor, w per tensor or per output channel; B (INT32) is dequantized with scale
// x_scale·w_scale and zero point 0, as ONNX defines it.
Status map_qlinear_conv(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(8, 9));
  NNASM_TRY(check_conv_ranks(n.dims(0), n.dims(3)));
  TensorId x, w, b = NO_TENSOR, y, xs, ws, ys, yz;
  OnnxType yt;
  NNASM_TRY(dequantize_operand(n, 0, 1, 2, 1, "x", &x));
  if (n.tensor_type(x).shape.rank > 0 && n.dims(1).size() == 1 && n.dims(1)[0] != 1)
    return Status::error("x_scale must be a scalar: QLinearConv's x is quantized per tensor");
  NNASM_TRY(dequantize_operand(n, 3, 4, 5, 0, "w", &w));
  if (n.has(8)) {
    if (n.type(8) != OnnxType::INT32) return Status::errorf("B is {}, expected INT32", onnx_type_name(n.type(8)));
    const std::vector<int64_t> dbias = n.dims(8);
    if (dbias.size() != 1 || dbias[0] != n.dims(3)[0])
      return Status::errorf("B is [{}], expected [{}] (one per output channel)", fmt::join(dbias, ","), n.dims(3)[0]);
    TensorId bias, scale, zp;
    NNASM_TRY(operand(n, 8, &bias));
    NNASM_TRY(n.tensor(1, &xs));
    NNASM_TRY(n.tensor(4, &ws));
    NNASM_TRY(n.emit(Opcode::MUL, {xs, ws}, {}, &scale));
    NNASM_TRY(n.typed_constant(zeros_of(OnnxType::INT32, n.dims(4)), DType::I32, &zp));
    NNASM_TRY(n.emit(Opcode::DEQUANTIZE, {bias, scale, zp}, {{"axis", imm_i(0)}}, &b));
  }
  NNASM_TRY(conv_of(n, x, w, b, &y));
  NNASM_TRY(scale_tensor(n, 6, "y_scale", &ys));
  if (n.tensor_type(ys).shape.numel() != 1)
    return Status::error("y_scale must be a scalar: QLinearConv's y is quantized per tensor");
  NNASM_TRY(zero_point(n, 7, 6, OnnxType::UNDEFINED, OnnxType::UINT8, "y_zero_point", &yz, &yt));
  NNASM_TRY(n.emit(Opcode::QUANTIZE, {y, ys, yz}, {}, &y));
  n.set(0, y, yt);
  return Status::ok();
}

}  // namespace nnasm
