// The small facts about ONNX's types that the decoder and the importer share (names, ranges), and
// the HostTensor and OnnxModel helpers. No protobuf here.
#include <cstdint>

#include <fmt/format.h>

#include "serialize/onnx/onnx_model.h"

namespace nnasm {

std::string onnx_type_name(OnnxType t) {
  switch (t) {
    case OnnxType::UNDEFINED: return "UNDEFINED";
    case OnnxType::FLOAT: return "FLOAT";
    case OnnxType::UINT8: return "UINT8";
    case OnnxType::INT8: return "INT8";
    case OnnxType::UINT16: return "UINT16";
    case OnnxType::INT16: return "INT16";
    case OnnxType::INT32: return "INT32";
    case OnnxType::INT64: return "INT64";
    case OnnxType::STRING: return "STRING";
    case OnnxType::BOOL: return "BOOL";
    case OnnxType::FLOAT16: return "FLOAT16";
    case OnnxType::DOUBLE: return "DOUBLE";
    case OnnxType::UINT32: return "UINT32";
    case OnnxType::UINT64: return "UINT64";
    case OnnxType::COMPLEX64: return "COMPLEX64";
    case OnnxType::COMPLEX128: return "COMPLEX128";
    case OnnxType::BFLOAT16: return "BFLOAT16";
  }
  return fmt::format("type {}", static_cast<int32_t>(t));
}

bool onnx_type_is_integer(OnnxType t) {
  switch (t) {
    case OnnxType::UINT8: case OnnxType::INT8: case OnnxType::UINT16: case OnnxType::INT16: case OnnxType::INT32:
    case OnnxType::INT64: case OnnxType::BOOL: case OnnxType::UINT32: case OnnxType::UINT64: return true;
    default: return false;
  }
}

bool onnx_type_holds(OnnxType t, int64_t v) {
  switch (t) {
    case OnnxType::BOOL: return v == 0 || v == 1;
    case OnnxType::UINT8: return v >= 0 && v <= UINT8_MAX;
    case OnnxType::INT8: return v >= INT8_MIN && v <= INT8_MAX;
    case OnnxType::UINT16: return v >= 0 && v <= UINT16_MAX;
    case OnnxType::INT16: return v >= INT16_MIN && v <= INT16_MAX;
    case OnnxType::INT32: return v >= INT32_MIN && v <= INT32_MAX;
    case OnnxType::UINT32: return v >= 0 && v <= UINT32_MAX;
    // UINT64 values above INT64_MAX are not representable in the int64 the importer folds in.
    case OnnxType::INT64: return true;
    case OnnxType::UINT64: return v >= 0;
    default: return false;
  }
}

const char* onnx_attr_type_name(OnnxAttrType t) {
  switch (t) {
    case OnnxAttrType::UNDEFINED: return "UNDEFINED";
    case OnnxAttrType::FLOAT: return "FLOAT";
    case OnnxAttrType::INT: return "INT";
    case OnnxAttrType::STRING: return "STRING";
    case OnnxAttrType::TENSOR: return "TENSOR";
    case OnnxAttrType::GRAPH: return "GRAPH";
    case OnnxAttrType::FLOATS: return "FLOATS";
    case OnnxAttrType::INTS: return "INTS";
    case OnnxAttrType::STRINGS: return "STRINGS";
    case OnnxAttrType::TENSORS: return "TENSORS";
    case OnnxAttrType::GRAPHS: return "GRAPHS";
    case OnnxAttrType::SPARSE_TENSOR: return "SPARSE_TENSOR";
    case OnnxAttrType::SPARSE_TENSORS: return "SPARSE_TENSORS";
    case OnnxAttrType::TYPE_PROTO: return "TYPE_PROTO";
    case OnnxAttrType::TYPE_PROTOS: return "TYPE_PROTOS";
  }
  return "type ?";
}

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

int64_t OnnxModel::default_opset() const {
  for (const OnnxOpset& o : opsets)
    if (o.domain.empty() || o.domain == "ai.onnx") return o.version;
  return -1;
}

}  // namespace nnasm
