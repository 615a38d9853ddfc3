// An ONNX model as the importer reads it: plain structs holding what serialize/onnx/onnx_decode.cpp
// took out of the protobuf message, every number already checked (dimensions ≥ 0, element counts
// within MAX_TENSOR_ELEMENTS, data lengths against the shapes, attribute types known). Only the
// decoder sees protobuf; the mapping onto instructions works on these.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "isa/status.h"

namespace nnasm {

// ONNX's element types (TensorProto.DataType), by their numbers in onnx.proto.
enum class OnnxType : int32_t {
  UNDEFINED = 0, FLOAT = 1, UINT8 = 2, INT8 = 3, UINT16 = 4, INT16 = 5, INT32 = 6, INT64 = 7, STRING = 8,
  BOOL = 9, FLOAT16 = 10, DOUBLE = 11, UINT32 = 12, UINT64 = 13, COMPLEX64 = 14, COMPLEX128 = 15, BFLOAT16 = 16,
};
// "FLOAT", "INT64", ...; "type 42" for a number onnx.proto does not name.
std::string onnx_type_name(OnnxType t);
// The integer types (and BOOL) whose values fit an int64_t: the ones the importer folds.
bool onnx_type_is_integer(OnnxType t);
// Whether an int64 value is representable in type t (an integer type or BOOL).
bool onnx_type_holds(OnnxType t, int64_t v);

// A tensor whose values are known at import time: an initializer, a Constant node's value, a
// folded shape computation. FLOAT values in `f`; every integer type and BOOL in `i` (as int64);
// other types (DOUBLE, FLOAT16, STRING, ...) keep their dims and type but no values
// (`has_values` false), so that a model holding one still decodes and only a node using it fails.
struct HostTensor {
  OnnxType type = OnnxType::FLOAT;
  std::vector<int64_t> dims;
  std::vector<float> f;
  std::vector<int64_t> i;
  bool has_values = true;

  int64_t numel() const;  // the product of dims (1 for a scalar); dims are checked when made
  bool is_float() const { return type == OnnxType::FLOAT; }
  // Value k as a double / an int64 (FLOAT truncated toward zero), whichever vector holds it.
  double as_double(int64_t k) const { return is_float() ? f[k] : static_cast<double>(i[k]); }
};

// AttributeProto.AttributeType numbers.
enum class OnnxAttrType : int32_t {
  UNDEFINED = 0, FLOAT = 1, INT = 2, STRING = 3, TENSOR = 4, GRAPH = 5, FLOATS = 6, INTS = 7, STRINGS = 8,
  TENSORS = 9, GRAPHS = 10, SPARSE_TENSOR = 11, SPARSE_TENSORS = 12, TYPE_PROTO = 13, TYPE_PROTOS = 14,
};
const char* onnx_attr_type_name(OnnxAttrType t);  // "INTS", ...

struct OnnxAttr {
  std::string name;
  OnnxAttrType type = OnnxAttrType::UNDEFINED;
  float f = 0;
  int64_t i = 0;
  std::string s;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  HostTensor t;  // TENSOR
};

struct OnnxNode {
  std::string name;  // may be empty
  std::string op_type;
  std::string domain;  // "" or "ai.onnx" is the default domain
  std::vector<std::string> inputs;   // "" marks an optional input left out
  std::vector<std::string> outputs;  // "" marks an optional output not wanted
  std::vector<OnnxAttr> attrs;
};

// One dimension of a graph input's or output's shape: a number, a symbol (dim_param) or unknown.
struct OnnxDim {
  bool known = false;
  int64_t value = 0;
  std::string param;  // the symbol, when not known (may be empty: no name at all)
};

struct OnnxValueInfo {
  std::string name;
  bool is_tensor = true;  // false: a sequence, map, optional or sparse tensor
  OnnxType type = OnnxType::UNDEFINED;
  bool has_shape = false;
  std::vector<OnnxDim> dims;
};

struct OnnxInitializer {
  std::string name;
  HostTensor value;
};

struct OnnxGraph {
  std::string name;
  std::vector<OnnxNode> nodes;
  std::vector<OnnxInitializer> initializers;
  std::vector<OnnxValueInfo> inputs;  // may include initializers (IR version < 4)
  std::vector<OnnxValueInfo> outputs;
};

struct OnnxOpset {
  std::string domain;
  int64_t version = 0;
};

struct OnnxModel {
  int64_t ir_version = 0;
  std::string producer;  // producer_name and producer_version
  std::vector<OnnxOpset> opsets;
  OnnxGraph graph;
  // The default domain's version ("" or "ai.onnx"), or -1 when opset_import does not name it.
  int64_t default_opset() const;
};

// Decodes ONNX ModelProto bytes into `out`. `what` names the file in messages. Errors name the
// part: "model.onnx: error: not an ONNX model (the protobuf message does not parse)",
// "model.onnx: error: initializer 'W': raw_data holds 40 bytes, FLOAT[3,4] needs 48". Allocates
// in proportion to `bytes` only (sizes are checked against the data present before anything is
// copied). Thread-safe (no shared state).
Status onnx_decode(std::string_view bytes, const std::string& what, OnnxModel* out);

// Decodes one TensorProto (a test's input_0.pb); the same checks as an initializer's.
Status onnx_decode_tensor(std::string_view bytes, const std::string& what, HostTensor* out, std::string* name = nullptr);

}  // namespace nnasm
