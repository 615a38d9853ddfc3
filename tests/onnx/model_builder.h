// Small ONNX models built in code, for the importer's tests, the CLI tests and the fuzz seeds: a
// thin layer over the protobuf classes of Debian's libonnx-dev (onnx/onnx_pb.h) that writes
// graph inputs and outputs, initializers (raw_data, as exporters write them), nodes and their
// attributes. The proto stays reachable (proto()) for tests that corrupt it on purpose.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

namespace nnasm {

class OnnxModelBuilder {
 public:
  explicit OnnxModelBuilder(int64_t opset = 13) {
    m_.set_ir_version(7);
    m_.set_producer_name("nnasm-test");
    onnx::OperatorSetIdProto* o = m_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    m_.mutable_graph()->set_name("test");
  }

  onnx::ModelProto& proto() { return m_; }
  onnx::GraphProto& graph() { return *m_.mutable_graph(); }
  std::string bytes() const { return m_.SerializeAsString(); }

  // A graph input; a dimension given as -1 is symbolic, named `symbol`.
  OnnxModelBuilder& input(const std::string& name, const std::vector<int64_t>& dims,
                          int32_t type = onnx::TensorProto::FLOAT, const std::string& symbol = "N") {
    value_info(graph().add_input(), name, dims, type, symbol);
    return *this;
  }
  OnnxModelBuilder& output(const std::string& name, int32_t type = onnx::TensorProto::FLOAT) {
    onnx::ValueInfoProto* v = graph().add_output();
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(type);
    return *this;
  }
  OnnxModelBuilder& initializer(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& v) {
    onnx::TensorProto* t = graph().add_initializer();
    tensor(t, dims, v);
    t->set_name(name);
    return *this;
  }
  OnnxModelBuilder& initializer_i64(const std::string& name, const std::vector<int64_t>& dims,
                                    const std::vector<int64_t>& v) {
    onnx::TensorProto* t = graph().add_initializer();
    tensor_i64(t, dims, v);
    t->set_name(name);
    return *this;
  }
  // An integer initializer of `type` (UINT8, INT8, INT32, ...) in int32_data, as exporters write
  // the narrow types; values are written as given, in range or not.
  OnnxModelBuilder& initializer_int(const std::string& name, const std::vector<int64_t>& dims, int32_t type,
                                    const std::vector<int32_t>& v) {
    onnx::TensorProto* t = graph().add_initializer();
    t->set_data_type(type);
    for (int64_t d : dims) t->add_dims(d);
    for (int32_t x : v) t->add_int32_data(x);
    t->set_name(name);
    return *this;
  }
  OnnxModelBuilder& initializer_bool(const std::string& name, const std::vector<int64_t>& dims, const std::vector<bool>& v) {
    onnx::TensorProto* t = graph().add_initializer();
    t->set_data_type(onnx::TensorProto::BOOL);
    for (int64_t d : dims) t->add_dims(d);
    for (bool x : v) t->add_int32_data(x);
    t->set_name(name);
    return *this;
  }
  onnx::NodeProto& node(const std::string& op, const std::vector<std::string>& in, const std::vector<std::string>& out,
                        const std::string& name = "") {
    onnx::NodeProto* n = graph().add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const std::string& s : in) n->add_input(s);
    for (const std::string& s : out) n->add_output(s);
    return *n;
  }

  static void tensor(onnx::TensorProto* t, const std::vector<int64_t>& dims, const std::vector<float>& v) {
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
  }
  static void tensor_i64(onnx::TensorProto* t, const std::vector<int64_t>& dims, const std::vector<int64_t>& v) {
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : dims) t->add_dims(d);
    for (int64_t x : v) t->add_int64_data(x);
  }

  static void attr(onnx::NodeProto& n, const std::string& name, int64_t v) {
    onnx::AttributeProto* a = add_attr(n, name, onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr(onnx::NodeProto& n, const std::string& name, float v) {
    onnx::AttributeProto* a = add_attr(n, name, onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void attr(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
    onnx::AttributeProto* a = add_attr(n, name, onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void attr(onnx::NodeProto& n, const std::string& name, const std::string& v) {
    onnx::AttributeProto* a = add_attr(n, name, onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  static void attr_strings(onnx::NodeProto& n, const std::string& name, const std::vector<std::string>& v) {
    onnx::AttributeProto* a = add_attr(n, name, onnx::AttributeProto::STRINGS);
    for (const std::string& x : v) a->add_strings(x);
  }
  static void attr_floats(onnx::NodeProto& n, const std::string& name, const std::vector<float>& v) {
    onnx::AttributeProto* a = add_attr(n, name, onnx::AttributeProto::FLOATS);
    for (float x : v) a->add_floats(x);
  }
  // A Constant node's `value`.
  static void attr_tensor(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& dims,
                          const std::vector<float>& v) {
    onnx::AttributeProto* a = add_attr(n, name, onnx::AttributeProto::TENSOR);
    tensor(a->mutable_t(), dims, v);
  }
  static void attr_tensor_i64(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& dims,
                              const std::vector<int64_t>& v) {
    onnx::AttributeProto* a = add_attr(n, name, onnx::AttributeProto::TENSOR);
    tensor_i64(a->mutable_t(), dims, v);
  }

 private:
  static onnx::AttributeProto* add_attr(onnx::NodeProto& n, const std::string& name, onnx::AttributeProto::AttributeType t) {
    onnx::AttributeProto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(t);
    return a;
  }
  static void value_info(onnx::ValueInfoProto* v, const std::string& name, const std::vector<int64_t>& dims, int32_t type,
                         const std::string& symbol) {
    v->set_name(name);
    onnx::TypeProto::Tensor* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(type);
    onnx::TensorShapeProto* s = t->mutable_shape();
    for (int64_t d : dims) {
      onnx::TensorShapeProto::Dimension* dim = s->add_dim();
      if (d < 0) dim->set_dim_param(symbol);
      else dim->set_dim_value(d);
    }
  }

  onnx::ModelProto m_;
};

// x [2,3,4] → y = x.view(x.size(0), -1) as torch.onnx.export writes it: Shape → Gather →
// Unsqueeze → Concat → Reshape (everything but the Reshape is known at import time).
inline OnnxModelBuilder pytorch_view_model() {
  using B = OnnxModelBuilder;
  B m(13);
  m.input("x", {2, 3, 4}).output("y");
  m.node("Shape", {"x"}, {"shape"});
  B::attr_tensor_i64(m.node("Constant", {}, {"zero"}), "value", {}, {0});
  m.node("Gather", {"shape", "zero"}, {"batch"});
  B::attr_tensor_i64(m.node("Constant", {}, {"axes"}), "value", {1}, {0});
  m.node("Unsqueeze", {"batch", "axes"}, {"batch1"});
  B::attr_tensor_i64(m.node("Constant", {}, {"minus1"}), "value", {1}, {-1});
  B::attr(m.node("Concat", {"batch1", "minus1"}, {"target"}), "axis", int64_t(0));
  m.node("Reshape", {"x", "target"}, {"y"});
  return m;
}

}  // namespace nnasm
