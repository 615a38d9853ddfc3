// Folding at import time: the ops of PyTorch's shape computations (Shape → Gather → Unsqueeze →
// Concat → Reshape, with Cast, Range, ConstantOfShape and integer arithmetic in between) computed
// on values known then, so that the shapes and axes other nodes need are constants. Also
// Constant, and Cast at run time where it changes nothing nnasm stores.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "serialize/onnx/onnx_host.h"
#include "serialize/onnx/onnx_ops.h"

namespace nnasm {

namespace {

// One integer operation, checked: false on overflow or division by zero. Mod follows the
// divisor's sign (Python's %) unless `fmod` (C's).
bool int_op(const std::string& op, int64_t a, int64_t b, bool fmod, int64_t* y) {
  if (op == "Add" || op == "Sum") return !__builtin_add_overflow(a, b, y);
  if (op == "Sub") return !__builtin_sub_overflow(a, b, y);
  if (op == "Mul") return !__builtin_mul_overflow(a, b, y);
  if (op == "Max" || op == "Min") {
    *y = op == "Max" ? std::max(a, b) : std::min(a, b);
    return true;
  }
  if (op == "Pow") {  // by squaring; negative exponents only where the result is whole
    if (b < 0) {
      if (a == 1 || a == -1) *y = (a == -1 && (b & 1)) ? -1 : 1;
      return a == 1 || a == -1;
    }
    int64_t r = 1;
    for (int64_t e = b, base = a; e > 0; e >>= 1) {
      if ((e & 1) && __builtin_mul_overflow(r, base, &r)) return false;
      if (e > 1 && __builtin_mul_overflow(base, base, &base)) return false;
    }
    *y = r;
    return true;
  }
  if (b == 0 || (a == INT64_MIN && b == -1)) return false;
  if (op == "Div") {
    *y = a / b;  // truncated toward zero, as C and ONNX Runtime divide integers
    return true;
  }
  *y = a % b;
  if (!fmod && *y != 0 && (*y < 0) != (b < 0)) *y += b;
  return true;
}

// The same on floats; Max and Min propagate NaN, as numpy's maximum and minimum.
float float_op(const std::string& op, float a, float b) {
  if (op == "Add" || op == "Sum") return a + b;
  if (op == "Sub") return a - b;
  if (op == "Mul") return a * b;
  if (op == "Div") return a / b;
  if (op == "Mod") return std::fmod(a, b);
  if (op == "Pow") return std::pow(a, b);
  if (std::isnan(a) || std::isnan(b)) return a + b;
  return op == "Max" ? std::max(a, b) : std::min(a, b);
}

// y = a `op` b elementwise with numpy broadcasting; a and b of one type.
Status host_binary(const std::string& op, const HostTensor& a, const HostTensor& b, bool fmod, HostTensor* y) {
  if (a.type != b.type) return Status::errorf("inputs are {} and {}", onnx_type_name(a.type), onnx_type_name(b.type));
  HostBroadcast bc;
  NNASM_TRY(host_broadcast(a.dims, b.dims, &bc));
  *y = HostTensor();
  y->type = a.type;
  y->dims = bc.dims;
  for (size_t k = 0; k < bc.ia.size(); ++k) {
    if (a.is_float()) {
      y->f.push_back(float_op(op, a.f[bc.ia[k]], b.f[bc.ib[k]]));
      continue;
    }
    int64_t v;
    if (!int_op(op, a.i[bc.ia[k]], b.i[bc.ib[k]], fmod, &v) || !onnx_type_holds(y->type, v))
      return Status::errorf("element {} overflows {} or divides by zero", k, onnx_type_name(y->type));
    y->i.push_back(v);
  }
  return Status::ok();
}

// The ONNX type a Cast or CastLike node converts to.
Status cast_target(NodeLowering& n, OnnxType* to) {
  if (n.node().op_type == "CastLike") {
    NNASM_TRY(n.expect_inputs(2, 2));
    *to = n.type(1);
    return Status::ok();
  }
  NNASM_TRY(n.expect_inputs(1, 1));
  int64_t t;
  NNASM_TRY(n.required_attr("to", &t));
  *to = static_cast<OnnxType>(t);
  DType d;
  if (!onnx_to_dtype(*to, &d))
    return Status::errorf("a cast to {}: nnasm tensors are f32, i32 or BOOL (as f32 0/1)", onnx_type_name(*to));
  return Status::ok();
}

}  // namespace

Status fold_constant(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(0, 0));
  for (const char* unsupported : {"value_string", "value_strings", "sparse_value"})
    if (n.has_attr(unsupported)) {
      n.accept_attr(unsupported);
      return Status::errorf("attribute '{}': string and sparse constants are not supported", unsupported);
    }
  HostTensor t;
  if (n.has_attr("value")) {
    const HostTensor* v = nullptr;
    NNASM_TRY(n.attr("value", &v));
    t = *v;
  } else if (n.has_attr("value_float")) {
    t.f.resize(1);
    NNASM_TRY(n.attr("value_float", &t.f[0]));
  } else if (n.has_attr("value_floats")) {
    NNASM_TRY(n.attr("value_floats", &t.f));
    t.dims = {static_cast<int64_t>(t.f.size())};
  } else if (n.has_attr("value_int")) {
    t = host_int_scalar(0);
    NNASM_TRY(n.attr("value_int", &t.i[0]));
  } else if (n.has_attr("value_ints")) {
    NNASM_TRY(n.attr("value_ints", &t.i));
    t = host_ints(t.i);
  } else {
    return Status::error("has no value attribute");
  }
  n.set(0, std::move(t));
  return Status::ok();
}

Status fold_shape(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(1, 1));
  const std::vector<int64_t> dims = n.dims(0);
  if (n.node().op_type == "Size") {
    int64_t numel = 1;
    for (int64_t d : dims) numel *= d;
    n.set(0, host_int_scalar(numel));
    return Status::ok();
  }
  // Opset 15's start and end pick a range of the dimensions, clamped like Slice's.
  const int64_t r = static_cast<int64_t>(dims.size());
  int64_t start = 0, end = r;
  NNASM_TRY(n.attr("start", &start));
  NNASM_TRY(n.attr("end", &end));
  std::vector<SliceRange> range;
  NNASM_TRY(slice_ranges({r}, {start}, {end}, {}, {}, &range));
  n.set(0, host_ints(std::vector<int64_t>(dims.begin() + range[0].start, dims.begin() + range[0].start + range[0].count)));
  return Status::ok();
}

Status fold_gather(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(2, 2));
  const HostTensor *data, *idx;
  NNASM_TRY(n.host(0, "data", &data));
  NNASM_TRY(n.host(1, "indices", &idx));
  if (!onnx_type_is_integer(idx->type)) return Status::errorf("indices are {}, expected integers", onnx_type_name(idx->type));
  int64_t axis = 0;
  NNASM_TRY(n.attr("axis", &axis));
  int a;
  NNASM_TRY(normalize_axis(axis, static_cast<int>(data->dims.size()), &a));
  std::vector<int64_t> out(data->dims.begin(), data->dims.begin() + a);
  out.insert(out.end(), idx->dims.begin(), idx->dims.end());
  out.insert(out.end(), data->dims.begin() + a + 1, data->dims.end());
  NNASM_TRY(check_fold_size(out));
  int64_t outer = 1, inner = 1;
  for (int k = 0; k < a; ++k) outer *= data->dims[k];
  for (size_t k = a + 1; k < data->dims.size(); ++k) inner *= data->dims[k];
  const int64_t dim = data->dims[a];
  std::vector<int64_t> index;
  index.reserve(static_cast<size_t>(outer * idx->numel() * inner));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j : idx->i) {
      if (j < -dim || j >= dim) return Status::errorf("index {} is out of range for a dimension of {}", j, dim);
      const int64_t row = j < 0 ? j + dim : j;
      for (int64_t e = 0; e < inner; ++e) index.push_back((o * dim + row) * inner + e);
    }
  n.set(0, host_take(*data, index, out));
  return Status::ok();
}

Status fold_constant_of_shape(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(1, 1));
  const HostTensor* shape;
  NNASM_TRY(n.host(0, "shape", &shape));
  std::vector<int64_t> dims;
  NNASM_TRY(host_int_list(*shape, "shape", &dims));
  NNASM_TRY(check_fold_size(dims));
  HostTensor fill;  // FLOAT 0 unless `value` says otherwise
  fill.f = {0};
  const HostTensor* value = &fill;
  NNASM_TRY(n.attr("value", &value));
  if (value->numel() != 1 || !value->has_values)
    return Status::errorf("attribute 'value' must hold one number, holds {} {}", value->numel(), onnx_type_name(value->type));
  int64_t count = 1;
  for (int64_t d : dims) count *= d;
  n.set(0, host_take(*value, std::vector<int64_t>(static_cast<size_t>(count), 0), dims));
  return Status::ok();
}

Status fold_range(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(3, 3));
  const HostTensor *start, *limit, *delta;
  NNASM_TRY(n.host(0, "start", &start));
  NNASM_TRY(n.host(1, "limit", &limit));
  NNASM_TRY(n.host(2, "delta", &delta));
  double s, l, d;
  NNASM_TRY(host_scalar(*start, "start", &s));
  NNASM_TRY(host_scalar(*limit, "limit", &l));
  NNASM_TRY(host_scalar(*delta, "delta", &d));
  if (d == 0) return Status::error("delta is 0");
  const double count = std::ceil((l - s) / d);
  if (!(count <= static_cast<double>(MAX_FOLD_ELEMENTS)))
    return Status::errorf("the range has more than {} elements, too many to compute at import time", MAX_FOLD_ELEMENTS);
  const int64_t len = count > 0 ? static_cast<int64_t>(count) : 0;
  HostTensor t;
  t.type = start->type;
  t.dims = {len};
  for (int64_t k = 0; k < len; ++k) {
    if (t.is_float()) {
      t.f.push_back(start->f[0] + static_cast<float>(k) * delta->f[0]);
    } else {
      int64_t step, v;
      if (__builtin_mul_overflow(k, delta->i[0], &step) || __builtin_add_overflow(start->i[0], step, &v) ||
          !onnx_type_holds(t.type, v))
        return Status::errorf("element {} of the range overflows {}", k, onnx_type_name(t.type));
      t.i.push_back(v);
    }
  }
  n.set(0, std::move(t));
  return Status::ok();
}

Status fold_eye_like(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(1, 1));
  int64_t k = 0, dtype = static_cast<int64_t>(n.type(0));
  NNASM_TRY(n.attr("k", &k));
  NNASM_TRY(n.attr("dtype", &dtype));
  const std::vector<int64_t> dims = n.dims(0);
  if (dims.size() != 2) return Status::errorf("the input is rank {}, expected 2", dims.size());
  NNASM_TRY(check_fold_size(dims));
  HostTensor y;
  y.type = static_cast<OnnxType>(dtype);
  DType d;
  if (!onnx_to_dtype(y.type, &d)) return Status::errorf("an EyeLike of {}: nnasm tensors are f32, i32 or BOOL (as f32 0/1)", onnx_type_name(y.type));
  y.dims = dims;
  for (int64_t i = 0; i < dims[0]; ++i)
    for (int64_t j = 0; j < dims[1]; ++j) {
      if (y.is_float()) y.f.push_back(j - i == k);
      else y.i.push_back(j - i == k);
    }
  n.set(0, std::move(y));
  return Status::ok();
}

Status fold_arith(NodeLowering& n) {
  const std::string& op = n.node().op_type;
  const bool variadic = op == "Max" || op == "Min" || op == "Sum", unary = op == "Neg";
  NNASM_TRY(n.expect_inputs(unary || variadic ? 1 : 2, variadic ? -1 : unary ? 1 : 2));
  int64_t fmod = 0;
  if (op == "Mod") NNASM_TRY(n.attr("fmod", &fmod));
  const HostTensor* a;
  NNASM_TRY(n.host(0, "A", &a));
  if (op == "Mod" && a->is_float() && fmod == 0) return Status::error("fmod=0 on floats is not defined");
  HostTensor y = *a;
  if (unary) {
    HostTensor zero;  // a scalar 0 of a's type
    zero.type = a->type;
    if (a->is_float()) zero.f = {0};
    else zero.i = {0};
    NNASM_TRY(host_binary("Sub", zero, *a, false, &y));
  }
  for (int k = 1; k < n.inputs(); ++k) {
    const HostTensor* b;
    NNASM_TRY(n.host(k, "B", &b));
    HostTensor exponent;  // Pow takes an exponent of another type: as the base's (a float one)
    if (op == "Pow" && y.is_float() && !b->is_float()) {
      exponent.dims = b->dims;
      for (int64_t v : b->i) exponent.f.push_back(static_cast<float>(v));
      b = &exponent;
    }
    HostTensor z;
    NNASM_TRY(host_binary(op, y, *b, fmod != 0, &z));
    y = std::move(z);
  }
  n.set(0, std::move(y));
  return Status::ok();
}

Status fold_cast(NodeLowering& n) {
  OnnxType to;
  NNASM_TRY(cast_target(n, &to));
  const HostTensor* x;
  NNASM_TRY(n.host(0, "input", &x));
  HostTensor y;
  y.type = to;
  y.dims = x->dims;
  const int64_t count = x->numel();
  for (int64_t k = 0; k < count; ++k) {
    if (to == OnnxType::FLOAT) {
      y.f.push_back(x->is_float() ? x->f[k] : static_cast<float>(x->i[k]));
      continue;
    }
    int64_t v;
    if (x->is_float()) {
      const float f = x->f[k];
      if (to == OnnxType::BOOL) {
        v = f != 0;
      } else {
        // Truncation toward zero; NaN, infinities and values no int64 holds are refused.
        if (!(std::fabs(f) < 9.2e18f)) return Status::errorf("element {} ({}) cannot be cast to {}", k, f, onnx_type_name(to));
        v = static_cast<int64_t>(f);
      }
    } else {
      v = to == OnnxType::BOOL ? x->i[k] != 0 : x->i[k];
    }
    if (!onnx_type_holds(to, v)) return Status::errorf("element {} ({}) is out of range for {}", k, v, onnx_type_name(to));
    y.i.push_back(v);
  }
  n.set(0, std::move(y));
  return Status::ok();
}

Status map_cast(NodeLowering& n) {
  OnnxType to;
  NNASM_TRY(cast_target(n, &to));
  TensorId x, y;
  NNASM_TRY(n.tensor(0, &x));
  const OnnxType from = n.type(0);
  const bool from_float = n.tensor_type(x).dtype == DType::F32;  // FLOAT, or BOOL as 0/1
  // Within f32 (BOOL's 0/1 are FLOAT's 0 and 1), to and from BOOL itself, and between the 32- and
  // 64-bit integers an i32 stands for, a cast moves nothing.
  if (from == to || (from_float ? to == OnnxType::FLOAT : (to == OnnxType::INT32 || to == OnnxType::INT64))) {
    n.set(0, x, to);
    return Status::ok();
  }
  if (to == OnnxType::BOOL) {
    // x ≠ 0 as 1 and 0: WHERE's condition is "nonzero" for f32 (NaN included, as C's and numpy's
    // casts to bool) and i32 alike.
    TensorId one, zero;
    NNASM_TRY(n.scalar(1, &one));
    NNASM_TRY(n.scalar(0, &zero));
    NNASM_TRY(n.emit(Opcode::WHERE, {x, one, zero}, {}, &y));
    n.set(0, y, to);
    return Status::ok();
  }
  if (from == OnnxType::BOOL && onnx_type_is_integer(to)) {
    // 0 and 1 fit every integer type; WHERE's output takes the dtype of its i32 branches.
    TensorId one, zero;
    NNASM_TRY(n.constant(host_int_scalar(1), &one));
    NNASM_TRY(n.constant(host_int_scalar(0), &zero));
    NNASM_TRY(n.emit(Opcode::WHERE, {x, one, zero}, {}, &y));
    n.set(0, y, to);
    return Status::ok();
  }
  if (from == OnnxType::FLOAT && (to == OnnxType::UINT8 || to == OnnxType::INT8)) {
    NNASM_TRY(cast_to_8bit(n, x, to, &y));
    n.set(0, y, to);
    return Status::ok();
  }
  // FLOAT → INT32 or INT64 (held as i32): CAST truncates toward zero, as ONNX, and saturates
  // what i32 does not hold (ONNX leaves that undefined). Any integer (held as i32) → FLOAT: CAST
  // rounds to the nearest float. The narrower integers' wrapping has no instruction.
  const bool to_i32 = from == OnnxType::FLOAT && (to == OnnxType::INT32 || to == OnnxType::INT64);
  const bool to_f32 = !from_float && to == OnnxType::FLOAT;
  if (!to_i32 && !to_f32)
    return Status::errorf("a cast from {} to {} at run time: CAST converts FLOAT to INT32, INT64, UINT8 and INT8 "
                          "and the integers to FLOAT only",
                          onnx_type_name(from), onnx_type_name(to));
  NNASM_TRY(n.emit(Opcode::CAST, {x}, {{"to", imm_i(to_i32 ? 1 : 0)}}, &y));
  n.set(0, y, to);
  return Status::ok();
}

}  // namespace nnasm
