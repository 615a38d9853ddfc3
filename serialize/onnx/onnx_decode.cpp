// The one place that reads ONNX's protobuf messages (Debian's libonnx-dev classes, onnx/onnx_pb.h):
// ModelProto and TensorProto bytes become the checked structs of onnx_model.h. Every number is
// checked before it sizes anything: dimensions are ≥ 0 and their product within
// MAX_TENSOR_ELEMENTS, a tensor's data (raw_data or the typed field) holds exactly the elements
// its shape says, attribute types are ones onnx.proto names. Protobuf itself does not throw
// here (a parse failure is a false return); an allocation failure is caught by catch_bad_alloc,
// as everywhere in the library.
#include <climits>
#include <cstring>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include "isa/program.h"
#include "serialize/onnx/onnx_model.h"

namespace nnasm {

namespace {

// Tensors of higher rank are refused outright (nnasm's own limit, MAX_RANK, applies later, and
// only to tensors that reach the program); this bounds loops over dims.
constexpr int MAX_HOST_RANK = 64;

// Bytes per element in raw_data; 0 where raw_data cannot hold the type (STRING, unknown types).
size_t raw_element_bytes(OnnxType t) {
  switch (t) {
    case OnnxType::UINT8: case OnnxType::INT8: case OnnxType::BOOL: return 1;
    case OnnxType::UINT16: case OnnxType::INT16: case OnnxType::FLOAT16: case OnnxType::BFLOAT16: return 2;
    case OnnxType::FLOAT: case OnnxType::INT32: case OnnxType::UINT32: return 4;
    case OnnxType::INT64: case OnnxType::UINT64: case OnnxType::DOUBLE: case OnnxType::COMPLEX64: return 8;
    case OnnxType::COMPLEX128: return 16;
    default: return 0;
  }
}

// An integer of `bytes` bytes at `p` (little-endian, as raw_data is), sign-extended for the
// signed types. UINT64 values above INT64_MAX come out negative; the caller checks.
int64_t raw_integer(const char* p, OnnxType t) {
  switch (t) {
    case OnnxType::UINT8: case OnnxType::BOOL: { uint8_t v; std::memcpy(&v, p, 1); return v; }
    case OnnxType::INT8: { int8_t v; std::memcpy(&v, p, 1); return v; }
    case OnnxType::UINT16: { uint16_t v; std::memcpy(&v, p, 2); return v; }
    case OnnxType::INT16: { int16_t v; std::memcpy(&v, p, 2); return v; }
    case OnnxType::INT32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case OnnxType::UINT32: { uint32_t v; std::memcpy(&v, p, 4); return v; }
    default: { int64_t v; std::memcpy(&v, p, 8); return v; }
  }
}

Status check_dims(const google::protobuf::RepeatedField<int64_t>& dims, const std::string& what, HostTensor* out) {
  if (dims.size() > MAX_HOST_RANK) return Status::errorf("{}: rank {} is over {}", what, dims.size(), MAX_HOST_RANK);
  int64_t n = 1;
  for (int k = 0; k < dims.size(); ++k) {
    const int64_t d = dims[k];
    if (d < 0) return Status::errorf("{}: dimension {} is {}, must be ≥ 0", what, k, d);
    if (d > MAX_TENSOR_ELEMENTS || (d > 0 && n > MAX_TENSOR_ELEMENTS / d))
      return Status::errorf("{}: more than {} elements", what, MAX_TENSOR_ELEMENTS);
    n *= d;
  }
  out->dims.assign(dims.begin(), dims.end());
  return Status::ok();
}

// How many values the typed field that holds `t` carries (for the count check) when raw_data is
// absent; -1 for a type no field holds.
int64_t typed_count(const onnx::TensorProto& p, OnnxType t) {
  switch (t) {
    case OnnxType::FLOAT: return p.float_data_size();
    case OnnxType::COMPLEX64: return p.float_data_size() / 2;
    case OnnxType::INT32: case OnnxType::INT16: case OnnxType::INT8: case OnnxType::UINT16: case OnnxType::UINT8:
    case OnnxType::BOOL: case OnnxType::FLOAT16: case OnnxType::BFLOAT16: return p.int32_data_size();
    case OnnxType::INT64: return p.int64_data_size();
    case OnnxType::DOUBLE: return p.double_data_size();
    case OnnxType::COMPLEX128: return p.double_data_size() / 2;
    case OnnxType::UINT32: case OnnxType::UINT64: return p.uint64_data_size();
    case OnnxType::STRING: return p.string_data_size();
    default: return -1;
  }
}

// The values of an integer-typed tensor, each checked against its type's range.
Status integer_values(const onnx::TensorProto& p, const std::string& what, HostTensor* out) {
  const OnnxType t = out->type;
  const int64_t n = out->numel();
  out->i.resize(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    int64_t v;
    if (p.has_raw_data()) {
      v = raw_integer(p.raw_data().data() + k * raw_element_bytes(t), t);
    } else if (t == OnnxType::INT64) {
      v = p.int64_data(static_cast<int>(k));
    } else if (t == OnnxType::UINT32 || t == OnnxType::UINT64) {
      const uint64_t u = p.uint64_data(static_cast<int>(k));
      v = u > static_cast<uint64_t>(INT64_MAX) ? -1 : static_cast<int64_t>(u);
    } else {
      v = p.int32_data(static_cast<int>(k));
    }
    if (t == OnnxType::BOOL) v = v != 0;
    if (!onnx_type_holds(t, v))
      return Status::errorf("{}: value {} at index {} is out of range for {}", what, v, k, onnx_type_name(t));
    out->i[static_cast<size_t>(k)] = v;
  }
  return Status::ok();
}

Status decode_tensor(const onnx::TensorProto& p, const std::string& what, HostTensor* out) {
  *out = HostTensor();
  if (p.data_location() == onnx::TensorProto::EXTERNAL)
    return Status::errorf("{}: its data is in an external file, which the importer does not read", what);
  if (p.has_segment()) return Status::errorf("{}: segmented tensors are not supported", what);
  out->type = static_cast<OnnxType>(p.data_type());
  if (out->type == OnnxType::UNDEFINED || onnx_type_name(out->type).rfind("type ", 0) == 0)
    return Status::errorf("{}: unknown data type {}", what, p.data_type());
  NNASM_TRY(check_dims(p.dims(), what, out));
  const int64_t n = out->numel();
  const std::string type_text = fmt::format("{}[{}]", onnx_type_name(out->type), fmt::join(out->dims, ","));
  if (p.has_raw_data()) {
    const size_t es = raw_element_bytes(out->type);
    if (es == 0) return Status::errorf("{}: raw_data cannot hold {}", what, onnx_type_name(out->type));
    if (p.raw_data().size() != static_cast<uint64_t>(n) * es)
      return Status::errorf("{}: raw_data holds {} bytes, {} needs {}", what, p.raw_data().size(), type_text,
                            static_cast<uint64_t>(n) * es);
  } else if (typed_count(p, out->type) != n) {
    return Status::errorf("{}: holds {} values, {} needs {}", what, typed_count(p, out->type), type_text, n);
  }
  if (out->type == OnnxType::FLOAT) {
    out->f.resize(static_cast<size_t>(n));
    if (p.has_raw_data()) std::memcpy(out->f.data(), p.raw_data().data(), static_cast<size_t>(n) * 4);
    else std::copy(p.float_data().begin(), p.float_data().end(), out->f.begin());
    return Status::ok();
  }
  if (onnx_type_is_integer(out->type)) return integer_values(p, what, out);
  out->has_values = false;
  return Status::ok();
}

OnnxAttrType attr_type(const onnx::AttributeProto& a) {
  if (a.type() != onnx::AttributeProto::UNDEFINED) return static_cast<OnnxAttrType>(a.type());
  // Models from before IR version 2 may leave the type out: the field that is set says it.
  if (a.has_f()) return OnnxAttrType::FLOAT;
  if (a.has_i()) return OnnxAttrType::INT;
  if (a.has_s()) return OnnxAttrType::STRING;
  if (a.has_t()) return OnnxAttrType::TENSOR;
  if (a.has_g()) return OnnxAttrType::GRAPH;
  if (a.floats_size()) return OnnxAttrType::FLOATS;
  if (a.ints_size()) return OnnxAttrType::INTS;
  if (a.strings_size()) return OnnxAttrType::STRINGS;
  return OnnxAttrType::UNDEFINED;
}

Status decode_node(const onnx::NodeProto& p, size_t index, OnnxNode* out) {
  out->name = p.name();
  out->op_type = p.op_type();
  out->domain = p.domain();
  out->inputs.assign(p.input().begin(), p.input().end());
  out->outputs.assign(p.output().begin(), p.output().end());
  const std::string node = p.name().empty() ? fmt::format("node #{} (op {})", index, p.op_type())
                                            : fmt::format("node '{}' (op {})", p.name(), p.op_type());
  for (const onnx::AttributeProto& a : p.attribute()) {
    OnnxAttr& at = out->attrs.emplace_back();
    at.name = a.name();
    at.type = attr_type(a);
    if (std::string(onnx_attr_type_name(at.type)).rfind("type ", 0) == 0)
      return Status::errorf("{}: attribute '{}' has unknown type {}", node, a.name(), static_cast<int>(a.type()));
    at.f = a.f();
    at.i = a.i();
    at.s = a.s();
    at.floats.assign(a.floats().begin(), a.floats().end());
    at.ints.assign(a.ints().begin(), a.ints().end());
    at.strings.assign(a.strings().begin(), a.strings().end());
    if (at.type == OnnxAttrType::TENSOR)
      NNASM_TRY(decode_tensor(a.t(), fmt::format("{}: attribute '{}'", node, a.name()), &at.t));
  }
  return Status::ok();
}

Status decode_value_info(const onnx::ValueInfoProto& p, const std::string& what, OnnxValueInfo* out) {
  out->name = p.name();
  if (!p.type().has_tensor_type()) {
    out->is_tensor = false;
    return Status::ok();
  }
  const onnx::TypeProto::Tensor& t = p.type().tensor_type();
  out->type = static_cast<OnnxType>(t.elem_type());
  out->has_shape = t.has_shape();
  if (t.shape().dim_size() > MAX_HOST_RANK)
    return Status::errorf("{} '{}': rank {} is over {}", what, p.name(), t.shape().dim_size(), MAX_HOST_RANK);
  for (const onnx::TensorShapeProto::Dimension& d : t.shape().dim()) {
    OnnxDim& od = out->dims.emplace_back();
    if (d.has_dim_value()) {
      if (d.dim_value() < 0)
        return Status::errorf("{} '{}': dimension {} is {}, must be ≥ 0", what, p.name(), out->dims.size() - 1,
                              d.dim_value());
      od.known = true;
      od.value = d.dim_value();
    } else {
      od.param = d.dim_param();
    }
  }
  return Status::ok();
}

Status decode_graph(const onnx::GraphProto& g, OnnxGraph* out) {
  out->name = g.name();
  if (g.sparse_initializer_size() > 0)
    return Status::errorf("sparse initializer '{}': sparse tensors are not supported",
                          g.sparse_initializer(0).values().name());
  for (int k = 0; k < g.initializer_size(); ++k) {
    OnnxInitializer& in = out->initializers.emplace_back();
    in.name = g.initializer(k).name();
    NNASM_TRY(decode_tensor(g.initializer(k), fmt::format("initializer '{}'", in.name), &in.value));
  }
  for (const onnx::ValueInfoProto& v : g.input()) NNASM_TRY(decode_value_info(v, "graph input", &out->inputs.emplace_back()));
  for (const onnx::ValueInfoProto& v : g.output())
    NNASM_TRY(decode_value_info(v, "graph output", &out->outputs.emplace_back()));
  for (int k = 0; k < g.node_size(); ++k) NNASM_TRY(decode_node(g.node(k), static_cast<size_t>(k), &out->nodes.emplace_back()));
  return Status::ok();
}

// Parses `bytes` as message `m`; false when they are not one (or are over protobuf's 2 GiB).
// The partial parse does not insist on proto2's required fields (onnx.proto has none), so a
// failure never makes protobuf log.
bool parse_message(google::protobuf::MessageLite* m, std::string_view bytes) {
  if (bytes.size() > static_cast<size_t>(INT_MAX)) return false;
  return m->ParsePartialFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

}  // namespace

Status onnx_decode(std::string_view bytes, const std::string& what, OnnxModel* out) {
  return catch_bad_alloc(
      [&]() -> Status {
        *out = OnnxModel();
        onnx::ModelProto m;
        if (!parse_message(&m, bytes))
          return Status::errorf("{}: error: not an ONNX model (the protobuf message does not parse)", what);
        if (!m.has_graph()) return Status::errorf("{}: error: not an ONNX model (it has no graph)", what);
        out->ir_version = m.ir_version();
        out->producer = m.producer_version().empty() ? m.producer_name()
                                                     : fmt::format("{} {}", m.producer_name(), m.producer_version());
        for (const onnx::OperatorSetIdProto& o : m.opset_import()) out->opsets.push_back({o.domain(), o.version()});
        return decode_graph(m.graph(), &out->graph).with_prefix(what + ": error: ");
      },
      [&] { return fmt::format("{}: error: out of memory while decoding the model", what); });
}

Status onnx_decode_tensor(std::string_view bytes, const std::string& what, HostTensor* out, std::string* name) {
  return catch_bad_alloc(
      [&]() -> Status {
        onnx::TensorProto p;
        if (!parse_message(&p, bytes))
          return Status::errorf("{}: error: not an ONNX tensor (the protobuf message does not parse)", what);
        if (name) *name = p.name();
        return decode_tensor(p, fmt::format("{}: error: tensor '{}'", what, p.name()), out);
      },
      [&] { return fmt::format("{}: error: out of memory while decoding the tensor", what); });
}

}  // namespace nnasm
