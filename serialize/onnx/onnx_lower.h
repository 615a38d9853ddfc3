// The importer's working state, shared by its driver (onnx_import.cpp) and the op mappings
// (onnx_ops_*.cpp): what each ONNX value is (a tensor of the program, or values known at import
// time), and the NodeLowering handed to an op's mapping, through which it reads the node's
// inputs and attributes and records instructions. Internal to serialize/onnx/.
#pragma once
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "isa/program.h"
#include "isa/status.h"
#include "serialize/import_names.h"
#include "serialize/import_report.h"
#include "serialize/onnx/onnx_model.h"

namespace nnasm {

// One ONNX value as the importer knows it.
struct OnnxValue {
  enum class Kind : uint8_t { HOST, TENSOR, FAILED };
  Kind kind = Kind::FAILED;
  // HOST: the values, known at import time. Materialized into the program on first use at run
  // time (then `id` is set too).
  HostTensor host;
  // HOST from a FLOAT initializer: a weight. It becomes a param (a state for batch-norm
  // statistics) and is never folded into another constant, so that it stays trainable.
  bool weight = false;
  TensorId id = NO_TENSOR;
  // ONNX's element type; an i32 tensor may stand for INT64 (narrowed), an f32 one for BOOL (0/1).
  OnnxType type = OnnxType::FLOAT;
};

class OnnxLowering;

// A node being mapped. Its mapping reads inputs and attributes, records instructions with emit()
// and sets every wanted output. Errors are Status values whose message becomes the node's
// problem line after "node 'NAME' (op TYPE, opset N): ".
class NodeLowering {
 public:
  NodeLowering(OnnxLowering& l, const OnnxNode& node);

  const OnnxNode& node() const { return node_; }
  int64_t opset() const;
  Program& program() const;

  // Inputs. An optional input left out (an empty name, or past the end) is absent.
  int inputs() const { return static_cast<int>(node_.inputs.size()); }
  bool has(int k) const { return k < inputs() && !node_.inputs[k].empty(); }
  // Requires between lo and hi inputs present-or-empty (hi -1: no upper bound) and input 0.. lo-1 present.
  Status expect_inputs(int lo, int hi) const;
  const OnnxValue& value(int k) const;
  // Whether input k is known at import time.
  bool is_host(int k) const { return value(k).kind == OnnxValue::Kind::HOST; }
  // Input k's values, which must be known at import time; `what` names the input in the error.
  Status host(int k, const char* what, const HostTensor** out) const;
  // Input k's dimensions (known for every value, at import time or not); empty when absent.
  std::vector<int64_t> dims(int k) const;
  OnnxType type(int k) const { return value(k).type; }
  // Input k as a tensor of the program, materializing values known at import time (`role` for
  // a weight: PARAM, or STATE for running statistics). Always f32 or i32: an i8 or u8 tensor (a
  // graph input of INT8 or UINT8, a QuantizeLinear's result) is widened to i32 first, so that
  // only the quantization mappings (onnx_ops_quant.cpp) ever see the 8-bit dtypes.
  Status tensor(int k, TensorId* out, Role role = Role::PARAM);

  // Attributes. `v` holds the default and is overwritten when the node has the attribute; an
  // attribute of another type is an error naming both types. Every attribute a mapping never
  // asks for is a problem ("attribute 'foo' is not supported"), so none is silently ignored.
  bool has_attr(const char* name) const;
  Status attr(const char* name, int64_t* v);
  Status attr(const char* name, float* v);
  Status attr(const char* name, std::string* v);
  Status attr(const char* name, std::vector<int64_t>* v);
  Status attr(const char* name, std::vector<float>* v);
  Status attr(const char* name, std::vector<std::string>* v);
  Status attr(const char* name, const HostTensor** v);
  // An INT attribute the node must have.
  Status required_attr(const char* name, int64_t* v);
  // A list of integers that is attribute `name` before opset `since` and input `input` (known
  // at import time) from then on, as ONNX moved axes, pads, starts and splits. `given` says
  // whether the node has it; `v` is left alone when not.
  Status list_arg(const char* name, int input, int64_t since, std::vector<int64_t>* v, bool* given);
  // Marks an attribute as understood without reading it (one that does not change the result).
  void accept_attr(const char* name) { read_attrs_.insert(name); }
  // The first attribute never read, or null.
  const OnnxAttr* unread_attr() const;

  // Records one instruction; `imms` sets immediates by schema key (the rest keep defaults). Its
  // output is a new temporary named after the node's first output.
  Status emit(Opcode op, std::vector<TensorId> in, std::initializer_list<std::pair<const char*, Imm>> imms,
              TensorId* out);
  // The same for an op of several outputs (LSTM's y, last h and last c): a new temporary each.
  Status emit(Opcode op, std::vector<TensorId> in, std::initializer_list<std::pair<const char*, Imm>> imms,
              std::vector<TensorId>* outs);
  // y = x as `dims`: a RESHAPE, or x itself when it already has them.
  Status reshape(TensorId x, const std::vector<int64_t>& dims, TensorId* y);
  // A const holding `t` (integer values narrowed to i32, checked), for values a mapping derives.
  Status constant(const HostTensor& t, TensorId* out);
  // A const of `dtype` holding `t`'s values (integers for i8, u8 and i32; the program checks
  // they fit), for the quantization mappings' 8-bit operands.
  Status typed_constant(const HostTensor& t, DType dtype, TensorId* out);
  // A rank-0 f32 const.
  Status scalar(float v, TensorId* out);
  // An f32 const of `dims` holding `value` everywhere (an init kind: no values are stored).
  Status filled(const std::vector<int64_t>& dims, float value, TensorId* out);
  TensorType tensor_type(TensorId id) const { return program().desc(id).type; }

  // Outputs: each wanted output (a non-empty name) gets a tensor or values.
  int outputs() const { return static_cast<int>(node_.outputs.size()); }
  bool wants(int k) const { return k < outputs() && !node_.outputs[k].empty(); }
  void set(int k, TensorId id, OnnxType type);
  void set(int k, HostTensor t);
  // The results as set, by output position (FAILED where none was set).
  const std::vector<OnnxValue>& results() const { return results_; }
  // Tensors this node's instructions created (the driver gives the outputs among them their
  // ONNX names).
  const std::vector<TensorId>& created() const { return created_; }

 private:
  const OnnxAttr* find_attr(const char* name, OnnxAttrType want, Status* s);

  OnnxLowering& l_;
  const OnnxNode& node_;
  std::set<std::string> read_attrs_;
  std::vector<OnnxValue> results_;
  std::vector<TensorId> created_;
};

// The importer's state over one model: the program, the names, the values by ONNX name.
class OnnxLowering {
 public:
  OnnxLowering(Program& p, int64_t opset, ImportReport& report) : p_(p), opset_(opset), report_(report) {}

  Program& program() const { return p_; }
  int64_t opset() const { return opset_; }
  ImportNames& names() { return names_; }
  ImportReport& report() { return report_; }
  std::map<std::string, OnnxValue>& values() { return values_; }
  // The ONNX names of the graph's inputs and outputs, so that their renamings read as such.
  std::set<std::string> graph_inputs, graph_outputs;
  // Graph inputs a node needed known at import time (OnnxGraphInfo::needed_constant).
  std::set<std::string> needed_constant;

  // Gives a value known at import time a tensor of the program: for a weight a tensor of `role`
  // (PARAM or STATE) holding its values in storage, else (or when `role` is CONST) a const; named `name`'s listing name, or a fresh temporary's when `name` is
  // empty. Checks what a tensor needs: rank ≤ 6, no zero-size dimension, integers within i32.
  Status materialize(OnnxValue& v, const std::string& name, Role role, TensorId* out);
  // A name for a new temporary: `base` followed by a number, used by neither the program nor
  // any ONNX name.
  std::string temp_name(const std::string& base);
  // Declares a tensor under `onnx_name`'s listing name, noting a renaming.
  Result<TensorId> declare(const std::string& onnx_name, TensorDesc d, bool type_known);
  // Renames a temporary to `onnx_name`'s listing name, noting a renaming.
  Status name_tensor(TensorId id, const std::string& onnx_name);

 private:
  void note_rename(const std::string& onnx_name, const std::string& listing_name);

  Program& p_;
  int64_t opset_;
  ImportReport& report_;
  ImportNames names_;
  std::map<std::string, OnnxValue> values_;
  std::map<std::string, int> temp_counter_;
};

// The dtype a tensor of ONNX type t has in the program (FLOAT → f32, the integers → i32, BOOL →
// f32 holding 0 and 1); false for types nnasm has no counterpart for.
bool onnx_to_dtype(OnnxType t, DType* out);
// nnasm Shape of ONNX dims; an error when the rank is over MAX_RANK or a dimension is 0.
Status dims_to_shape(const std::vector<int64_t>& dims, Shape* out);
std::vector<int64_t> shape_dims(const Shape& s);

}  // namespace nnasm
