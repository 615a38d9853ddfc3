// A Myelin flow file (Google SLING's sling/myelin, `.flow`) read into memory and checked: its
// variables, operations, functions, connectors and blobs, with every name an operation, function
// or connector uses resolved to the artifact it means. Reading it is serialize/flow/flow_read.cpp;
// bringing one of its functions into a Program is flow_import.h.
//
// The layout, versions 3 to 6 (all integers little-endian; "int" is a signed 32-bit count, "str"
// an int length and that many bytes, "attrs" an int count of (str name, str value) pairs):
//
//   header      int magic 0x776f6c66 ("flow"), int version; v5+: int flags (unused)
//   variables   int count; each: v5+ int flags; str name; int alias count, str each; str type
//               (a dtype name, "" for none, '&' in front for a reference); int rank, int per
//               dimension (-1: the batch size); v6+ attrs; u64 data size, that many bytes
//   operations  int count; each: v5+ int flags; str name; str type; int input count, str
//               (variable) each; int output count, str (variable) each; attrs
//   functions   int count; each: v5+ int flags; str name; int op count, str (operation) each
//   connectors  int count; each: v5+ int flags; str name; int link count, str (variable) each
//   blobs       v4+: int count; each: v5+ int flags; str name; str type; attrs; u64 size, bytes
//
// A variable is found by its name or any of its aliases, the first in file order winning; reading
// an operation gives its first output the operation's name as an alias, so later operations may
// name a value by the operation that makes it (Myelin does both when it loads a file).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "isa/status.h"

namespace nnasm {

// Myelin's element types, by the names its files use ("float" and "int" are read as float32 and
// int32).
enum class FlowDType : uint8_t {
  NONE,  // "" or "void": no type recorded
  FLOAT16, FLOAT32, FLOAT64, BFLOAT16, INT8, INT16, INT32, INT64, UINT8, UINT16, BOOL, STRING,
  COMPLEX64, COMPLEX128, QINT8, QINT16, QINT32, QUINT8, QUINT16, RESOURCE,
};
const char* flow_dtype_name(FlowDType t);  // "float32"; "void" for NONE
// Bytes per element; 0 for types without a fixed size in a file (NONE, STRING, RESOURCE).
size_t flow_dtype_size(FlowDType t);

// Variable flags (version 5 and later; older files have none).
enum FlowVarFlags : uint32_t {
  FLOW_VAR_IN = 1,
  FLOW_VAR_OUT = 2,
  FLOW_VAR_REF = 4,
  FLOW_VAR_LEARNABLE = 8,
};

struct FlowAttr {
  std::string name, value;
};

// The value of attribute `name`, or nullptr; the last of several wins (Myelin's SetAttr replaces).
const std::string* flow_attr(const std::vector<FlowAttr>& attrs, const std::string& name);

// A name from a file, for messages: bytes outside printable ASCII as \xNN, cut after 80
// characters; flow_quote puts it in single quotes.
std::string flow_printable(const std::string& name);
std::string flow_quote(const std::string& name);
// A flow shape as text, "[-1,784]".
std::string flow_shape_text(const std::vector<int64_t>& shape);

constexpr size_t FLOW_NONE = static_cast<size_t>(-1);

struct FlowVariable {
  uint32_t flags = 0;
  std::string name;
  std::vector<std::string> aliases;
  FlowDType dtype = FlowDType::NONE;
  std::vector<int64_t> shape;  // -1: the batch size
  std::vector<FlowAttr> attrs;
  // Points into the bytes the flow was read from; empty: no data (Myelin's "size 0").
  std::string_view data;
  bool learnable() const { return flags & FLOW_VAR_LEARNABLE; }
};

struct FlowOperation {
  uint32_t flags = 0;
  std::string name, type;
  std::vector<size_t> inputs, outputs;  // variable indices
  std::vector<FlowAttr> attrs;
  const std::string* attr(const std::string& key) const { return flow_attr(attrs, key); }
};

struct FlowFunction {
  uint32_t flags = 0;
  std::string name;
  std::vector<size_t> ops;  // operation indices, in the order the file lists them
};

struct FlowConnector {
  uint32_t flags = 0;
  std::string name;
  std::vector<size_t> links;  // variable indices
};

struct FlowBlob {
  uint32_t flags = 0;
  std::string name, type;
  std::vector<FlowAttr> attrs;
  std::string_view data;  // points into the bytes the flow was read from
};

struct Flow {
  int version = 0;
  std::vector<FlowVariable> vars;
  std::vector<FlowOperation> ops;
  std::vector<FlowFunction> funcs;
  std::vector<FlowConnector> cnxs;
  std::vector<FlowBlob> blobs;
  // Name or alias to variable index, the first variable in file order winning.
  std::unordered_map<std::string, size_t> var_names;

  size_t find_var(const std::string& name) const {
    auto it = var_names.find(name);
    return it == var_names.end() ? FLOW_NONE : it->second;
  }
};

// Reads the flow file image `bytes` into `out` (which it replaces). `what` names the file in
// messages, which read "WHAT: byte N: error: PART: ..." with N the offset of the offending field
// and PART what was being read ("variable 3 ('w'): shape"). Every count, length and size is
// checked against the bytes that remain before anything is allocated for it; data must be the
// variable's element size times its element count (for the types with a fixed size), so a
// variable with data cannot have a batch dimension. Errors: bad magic, a version other than 3-6,
// an unknown dtype, a negative count or dimension below -1, a name that resolves to nothing, bytes
// left after the blobs. Requires: `bytes` outlives `out` (data and blobs point into it).
// Thread-safe.
Status flow_read(std::string_view bytes, const std::string& what, Flow* out);

}  // namespace nnasm
