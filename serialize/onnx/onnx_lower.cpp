// The importer's working state (onnx_lower.h): values by ONNX name, materializing values known at
// import time as params or consts, recording instructions for a node, reading its attributes with
// their types checked, and the names everything gets.
#include <algorithm>
#include <cstring>

#include "engine/context.h"
#include "serialize/onnx/onnx_host.h"
#include "serialize/onnx/onnx_lower.h"

namespace nnasm {

bool onnx_to_dtype(OnnxType t, DType* out) {
  // BOOL is a mask of 0 and 1 in f32, what the comparisons give and WHERE, MUL and MAXIMUM take.
  if (t == OnnxType::FLOAT || t == OnnxType::BOOL) {
    *out = DType::F32;
    return true;
  }
  if (onnx_type_is_integer(t)) {
    *out = DType::I32;
    return true;
  }
  return false;
}

Status dims_to_shape(const std::vector<int64_t>& dims, Shape* out) {
  if (dims.size() > static_cast<size_t>(MAX_RANK))
    return Status::errorf("rank {} ([{}]) is over nnasm's {}", dims.size(), fmt::join(dims, ","), MAX_RANK);
  for (int64_t d : dims)
    if (d == 0)
      return Status::errorf("shape [{}] has a dimension of size 0, which nnasm tensors cannot have", fmt::join(dims, ","));
  *out = Shape::of(dims.data(), static_cast<int>(dims.size()));
  return check_shape(*out, fmt::format("shape [{}]", fmt::join(dims, ",")));
}

std::vector<int64_t> shape_dims(const Shape& s) { return std::vector<int64_t>(s.dims.begin(), s.dims.begin() + s.rank); }

// ---- OnnxLowering

std::string OnnxLowering::temp_name(const std::string& base) {
  int& k = temp_counter_[base];
  for (;; ++k) {
    std::string n = fmt::format("{}{}", base, k);
    if (p_.find(n) == NO_TENSOR && !names_.taken(n)) {
      ++k;
      return n;
    }
  }
}

void OnnxLowering::note_rename(const std::string& onnx_name, const std::string& listing_name) {
  if (onnx_name == listing_name) return;
  const TensorId id = p_.find(listing_name);
  const char sigil = id == NO_TENSOR ? '%' : p_.desc(id).sigil();
  const char* what = graph_inputs.count(onnx_name) ? "graph input" : graph_outputs.count(onnx_name) ? "graph output" : "tensor";
  report_.notes.push_back(fmt::format("{} '{}' is {}{}", what, onnx_name, sigil, listing_name));
}

Result<TensorId> OnnxLowering::declare(const std::string& onnx_name, TensorDesc d, bool type_known) {
  d.name = names_.map(onnx_name);
  Result<TensorId> id = p_.declare(std::move(d), type_known);
  if (id) note_rename(onnx_name, p_.desc(*id).name);
  return id;
}

Status OnnxLowering::name_tensor(TensorId id, const std::string& onnx_name) {
  const std::string& name = names_.map(onnx_name);
  NNASM_TRY(p_.rename(id, name));
  note_rename(onnx_name, name);
  return Status::ok();
}

Status OnnxLowering::materialize(OnnxValue& v, const std::string& name, Role role, TensorId* out) {
  if (v.id != NO_TENSOR) {
    *out = v.id;
    return Status::ok();
  }
  const HostTensor& h = v.host;
  DType dtype;
  if (!onnx_to_dtype(h.type, &dtype) || !h.has_values)
    return Status::errorf("{} is {}: nnasm tensors are f32, i32 or BOOL (as f32 0/1)", name.empty() ? "a constant" : "'" + name + "'",
                          onnx_type_name(h.type));
  TensorDesc d;
  d.type.dtype = dtype;
  NNASM_TRY(dims_to_shape(h.dims, &d.type.shape).with_prefix(name.empty() ? "a constant: " : "'" + name + "': "));
  const int64_t n = h.numel();
  if (!h.is_float())
    for (int64_t k = 0; k < n; ++k)
      if (h.i[k] < INT32_MIN || h.i[k] > INT32_MAX)
        return Status::errorf("{} holds {} at index {}, which i32 cannot hold",
                              name.empty() ? "a constant" : "'" + name + "'", h.i[k], k);
  // A weight asked for as a constant (a graph output that is an initializer) is a copy of it.
  const bool weight = v.weight && h.is_float() && role != Role::CONST;
  d.role = weight ? role : Role::CONST;
  if (!weight) {
    // One value repeated (ConstantOfShape, a mask) is an init kind, not a list of equal numbers.
    const bool uniform = n > 1 && std::all_of(h.f.begin(), h.f.end(), [&](float x) { return std::memcmp(&x, &h.f[0], 4) == 0; }) &&
                         std::all_of(h.i.begin(), h.i.end(), [&](int64_t x) { return x == h.i[0]; });
    if (uniform) {
      d.init = InitSpec{InitKind::CONSTANT, h.as_double(0), 0};
    } else {
      d.values.resize(static_cast<size_t>(n));
      for (int64_t k = 0; k < n; ++k) d.values[k] = h.as_double(k);
    }
  }
  if (name.empty()) d.name = temp_name("c");
  Result<TensorId> id = name.empty() ? p_.declare(d, true) : declare(name, d, true);
  if (!id) return id.status();
  if (weight) {
    // A weight's values live in its storage, which a model file saves and prepare keeps.
    Tensor& t = Context::of(p_)->at(*id);
    if (!t.allocate()) return Status::errorf("cannot allocate {} bytes for @{}", n * 4, t.desc.name);
    std::memcpy(t.f32(), h.f.data(), static_cast<size_t>(n) * 4);
  }
  v.id = *id;
  *out = *id;
  return Status::ok();
}

// ---- NodeLowering

NodeLowering::NodeLowering(OnnxLowering& l, const OnnxNode& node) : l_(l), node_(node), results_(node.outputs.size()) {}

int64_t NodeLowering::opset() const { return l_.opset(); }
Program& NodeLowering::program() const { return l_.program(); }

Status NodeLowering::expect_inputs(int lo, int hi) const {
  if (inputs() < lo || (hi >= 0 && inputs() > hi)) {
    if (lo == hi) return Status::errorf("takes {} input{}, has {}", lo, lo == 1 ? "" : "s", inputs());
    if (hi < 0) return Status::errorf("takes at least {} input{}, has {}", lo, lo == 1 ? "" : "s", inputs());
    return Status::errorf("takes {} to {} inputs, has {}", lo, hi, inputs());
  }
  for (int k = 0; k < lo; ++k)
    if (!has(k)) return Status::errorf("input {} is required", k + 1);
  return Status::ok();
}

const OnnxValue& NodeLowering::value(int k) const {
  static const OnnxValue absent;
  if (!has(k)) return absent;
  auto it = l_.values().find(node_.inputs[k]);
  return it == l_.values().end() ? absent : it->second;
}

Status NodeLowering::host(int k, const char* what, const HostTensor** out) const {
  const OnnxValue& v = value(k);
  if (v.kind == OnnxValue::Kind::TENSOR && program().desc(v.id).role == Role::INPUT) l_.needed_constant.insert(node_.inputs[k]);
  if (v.kind != OnnxValue::Kind::HOST)
    return Status::errorf("input {} ({} '{}') is computed at run time; nnasm needs it known at import time", k + 1, what,
                          node_.inputs[k]);
  if (!v.host.has_values) return Status::errorf("input {} ({}) is {}", k + 1, what, onnx_type_name(v.host.type));
  *out = &v.host;
  return Status::ok();
}

std::vector<int64_t> NodeLowering::dims(int k) const {
  const OnnxValue& v = value(k);
  if (v.kind == OnnxValue::Kind::HOST) return v.host.dims;
  if (v.kind == OnnxValue::Kind::FAILED) return {};  // absent: the mapping's input check says so
  return shape_dims(program().desc(v.id).type.shape);
}

Status NodeLowering::tensor(int k, TensorId* out, Role role) {
  if (!has(k)) return Status::errorf("input {} is required", k + 1);
  OnnxValue& v = l_.values()[node_.inputs[k]];
  if (v.kind != OnnxValue::Kind::TENSOR)
    return l_.materialize(v, node_.inputs[k], role, out).with_prefix(fmt::format("input {}: ", k + 1));
  const DType dt = tensor_type(v.id).dtype;
  if (dt != DType::I8 && dt != DType::U8) {
    *out = v.id;
    return Status::ok();
  }
  // DEQUANTIZE with scale 1 and zero point 0 is exact for 8-bit values; CAST gives them back as
  // the i32 every other mapping reads integers in.
  HostTensor zero;
  zero.type = dt == DType::I8 ? OnnxType::INT8 : OnnxType::UINT8;
  zero.i = {0};
  TensorId one, zp, f;
  NNASM_TRY(scalar(1, &one));
  NNASM_TRY(typed_constant(zero, dt, &zp));
  NNASM_TRY(emit(Opcode::DEQUANTIZE, {v.id, one, zp}, {}, &f));
  return emit(Opcode::CAST, {f}, {{"to", imm_i(1)}}, out);
}

bool NodeLowering::has_attr(const char* name) const {
  return std::any_of(node_.attrs.begin(), node_.attrs.end(), [&](const OnnxAttr& a) { return a.name == name; });
}

const OnnxAttr* NodeLowering::find_attr(const char* name, OnnxAttrType want, Status* s) {
  read_attrs_.insert(name);
  for (const OnnxAttr& a : node_.attrs) {
    if (a.name != name) continue;
    if (a.type != want) {
      *s = Status::errorf("attribute '{}' is {}, expected {}", name, onnx_attr_type_name(a.type), onnx_attr_type_name(want));
      return nullptr;
    }
    return &a;
  }
  return nullptr;
}

Status NodeLowering::attr(const char* name, int64_t* v) {
  Status s;
  if (const OnnxAttr* a = find_attr(name, OnnxAttrType::INT, &s)) *v = a->i;
  return s;
}

Status NodeLowering::attr(const char* name, float* v) {
  Status s;
  if (const OnnxAttr* a = find_attr(name, OnnxAttrType::FLOAT, &s)) *v = a->f;
  return s;
}

Status NodeLowering::attr(const char* name, std::string* v) {
  Status s;
  if (const OnnxAttr* a = find_attr(name, OnnxAttrType::STRING, &s)) *v = a->s;
  return s;
}

Status NodeLowering::attr(const char* name, std::vector<int64_t>* v) {
  Status s;
  if (const OnnxAttr* a = find_attr(name, OnnxAttrType::INTS, &s)) *v = a->ints;
  return s;
}

Status NodeLowering::attr(const char* name, std::vector<float>* v) {
  Status s;
  if (const OnnxAttr* a = find_attr(name, OnnxAttrType::FLOATS, &s)) *v = a->floats;
  return s;
}

Status NodeLowering::attr(const char* name, std::vector<std::string>* v) {
  Status s;
  if (const OnnxAttr* a = find_attr(name, OnnxAttrType::STRINGS, &s)) *v = a->strings;
  return s;
}

Status NodeLowering::attr(const char* name, const HostTensor** v) {
  Status s;
  if (const OnnxAttr* a = find_attr(name, OnnxAttrType::TENSOR, &s)) *v = &a->t;
  return s;
}

Status NodeLowering::required_attr(const char* name, int64_t* v) {
  if (!has_attr(name)) return Status::errorf("attribute '{}' is required", name);
  return attr(name, v);
}

Status NodeLowering::list_arg(const char* name, int input, int64_t since, std::vector<int64_t>* v, bool* given) {
  if (opset() < since) {
    *given = has_attr(name);
    return attr(name, v);
  }
  *given = has(input);
  if (!*given) return Status::ok();
  const HostTensor* t;
  NNASM_TRY(host(input, name, &t));
  return host_int_list(*t, name, v);
}

const OnnxAttr* NodeLowering::unread_attr() const {
  for (const OnnxAttr& a : node_.attrs)
    if (!read_attrs_.count(a.name)) return &a;
  return nullptr;
}

Status NodeLowering::emit(Opcode op, std::vector<TensorId> in, std::initializer_list<std::pair<const char*, Imm>> imms,
                          TensorId* out) {
  std::vector<TensorId> outs;
  NNASM_TRY(emit(op, std::move(in), imms, &outs));
  *out = outs[0];
  return Status::ok();
}

Status NodeLowering::emit(Opcode op, std::vector<TensorId> in, std::initializer_list<std::pair<const char*, Imm>> imms,
                          std::vector<TensorId>* outs) {
  Instruction ins = make_instruction(op, std::move(in), {});
  for (const auto& [key, v] : imms) NNASM_TRY(set_imm(ins, key, v));
  std::string base = "t";
  for (const std::string& o : node_.outputs)
    if (!o.empty()) {
      base = l_.names().map(o) + ".";
      break;
    }
  const int n_out = ins.info().n_out < 0 ? static_cast<int>(ins.in.size()) : ins.info().n_out;
  for (int k = 0; k < n_out; ++k) {
    TensorDesc d;
    d.name = l_.temp_name(base);
    Result<TensorId> id = program().declare(std::move(d), false);
    if (!id) return id.status();
    ins.out.push_back(*id);
  }
  NNASM_TRY(program().append(ins));
  created_.insert(created_.end(), ins.out.begin(), ins.out.end());
  *outs = ins.out;
  return Status::ok();
}

Status NodeLowering::reshape(TensorId x, const std::vector<int64_t>& dims, TensorId* y) {
  if (shape_dims(tensor_type(x).shape) == dims) {
    *y = x;
    return Status::ok();
  }
  return emit(Opcode::RESHAPE, {x}, {{"shape", imm_ints(dims)}}, y);
}

Status NodeLowering::constant(const HostTensor& t, TensorId* out) {
  OnnxValue v;
  v.kind = OnnxValue::Kind::HOST;
  v.host = t;
  v.type = t.type;
  return l_.materialize(v, "", Role::CONST, out);
}

Status NodeLowering::typed_constant(const HostTensor& t, DType dtype, TensorId* out) {
  if (!t.has_values) return Status::errorf("a constant is {}, which has no values here", onnx_type_name(t.type));
  TensorDesc d;
  d.role = Role::CONST;
  d.type.dtype = dtype;
  NNASM_TRY(dims_to_shape(t.dims, &d.type.shape).with_prefix("a constant: "));
  const int64_t n = t.numel();
  d.values.resize(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) d.values[k] = t.as_double(k);
  d.name = l_.temp_name("c");
  Result<TensorId> id = program().declare(std::move(d), true);
  if (!id) return id.status();
  *out = *id;
  return Status::ok();
}

Status NodeLowering::scalar(float x, TensorId* out) {
  HostTensor t;
  t.f = {x};
  return constant(t, out);
}

Status NodeLowering::filled(const std::vector<int64_t>& dims, float value, TensorId* out) {
  TensorDesc d;
  d.role = Role::CONST;
  d.init = InitSpec{InitKind::CONSTANT, value, 0};
  NNASM_TRY(dims_to_shape(dims, &d.type.shape));
  d.name = l_.temp_name("c");
  Result<TensorId> id = program().declare(std::move(d), true);
  if (!id) return id.status();
  *out = *id;
  return Status::ok();
}

void NodeLowering::set(int k, TensorId id, OnnxType type) {
  if (k >= outputs()) return;  // an optional output the node does not list
  OnnxValue& v = results_[k];
  v.kind = OnnxValue::Kind::TENSOR;
  v.id = id;
  v.type = type;
}

void NodeLowering::set(int k, HostTensor t) {
  if (k >= outputs()) return;
  OnnxValue& v = results_[k];
  v.kind = OnnxValue::Kind::HOST;
  v.type = t.type;
  v.host = std::move(t);
}

}  // namespace nnasm
