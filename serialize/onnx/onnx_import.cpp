// The ONNX importer's driver (onnx_import.h): decode, check the opset, declare the graph inputs,
// take in the initializers, map every node in order (folding what is known at import time), then
// name and mark the graph outputs. Chains of nodes recognised as one instruction (onnx_fuse_quant.cpp)
// are lowered at their last node. Problems are collected, one line each, and reported together.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "serialize/onnx/onnx_import.h"
#include "isa/program_size.h"
#include "serialize/onnx/onnx_lower.h"
#include "serialize/onnx/onnx_ops.h"

namespace nnasm {

namespace {

constexpr int64_t MIN_OPSET = 7, MAX_OPSET = 17;

// Below MIN_OPSET, the op types whose definition at every opset from `since` on is the one the
// mappings follow (later versions only added types or took away the legacy consumed_inputs):
// a model of these alone imports at such an opset too.
struct OldOp {
  const char* type;
  int64_t since;
};
constexpr OldOp OLD_OPSET_OPS[] = {{"Elu", 6},     {"GlobalAveragePool", 1}, {"GlobalMaxPool", 1}, {"HardSigmoid", 6},
                                   {"InstanceNormalization", 6}, {"Not", 1}, {"ReduceLogSum", 1}, {"Selu", 6},
                                   {"Softplus", 1}, {"Softsign", 1}};

constexpr const char* OLD_OPSET_NOTE =
    ", and below that models of Elu, HardSigmoid, InstanceNormalization, Selu (since 6), GlobalAveragePool, "
    "GlobalMaxPool, Not, ReduceLogSum, Softplus and Softsign (since 1) alone";

bool reads_at_old_opset(const OnnxGraph& g, int64_t opset) {
  return std::all_of(g.nodes.begin(), g.nodes.end(), [&](const OnnxNode& n) {
    return (n.domain.empty() || n.domain == "ai.onnx") &&
           std::any_of(std::begin(OLD_OPSET_OPS), std::end(OLD_OPSET_OPS),
                       [&](const OldOp& o) { return n.op_type == o.type && opset >= o.since; });
  });
}

std::string node_label(const OnnxNode& node, size_t index, int64_t opset) {
  const std::string who = node.name.empty() ? fmt::format("node #{}", index) : fmt::format("node '{}'", node.name);
  return fmt::format("{} (op {}, opset {})", who, node.op_type, opset);
}

// The shape of graph input `in`: the model's, with --shape filling symbolic dimensions.
Status input_shape(const OnnxValueInfo& in, const OnnxImportOptions& o, std::vector<int64_t>* dims) {
  auto given = o.shapes.find(in.name);
  if (given != o.shapes.end()) {
    const std::vector<int64_t>& g = given->second;
    if (in.has_shape && g.size() != in.dims.size())
      return Status::errorf("graph input '{}': --shape gives rank {}, the model says {}", in.name, g.size(), in.dims.size());
    for (size_t k = 0; k < g.size(); ++k)
      if (in.has_shape && in.dims[k].known && in.dims[k].value != g[k])
        return Status::errorf("graph input '{}': --shape gives dimension {} as {}, the model says {}", in.name, k, g[k],
                              in.dims[k].value);
    *dims = g;
    return Status::ok();
  }
  if (!in.has_shape) return Status::errorf("graph input '{}' has no shape; give it with --shape {}=D0,D1,...", in.name, in.name);
  dims->clear();
  for (size_t k = 0; k < in.dims.size(); ++k) {
    const OnnxDim& d = in.dims[k];
    if (!d.known)
      return Status::errorf("graph input '{}': dimension {} is symbolic ({}); give the shape with --shape {}=D0,D1,...",
                            in.name, k, d.param.empty() ? "unnamed" : "'" + d.param + "'", in.name);
    dims->push_back(d.value);
  }
  return Status::ok();
}

// Where a graph output's declared static dimensions (or rank) are not the computed ones, the
// note that says so; empty where they agree (symbolic or unnamed dimensions accept any size).
// As ONNX Runtime decides by default (its strict shape inference is off): the computed shape is
// kept and the model still loads, since exporters do write wrong output shapes — PyTorch declares
// [2,591] for tests/golden/onnx/ceil_pool.onnx, whose output is [2,573] in PyTorch too.
std::string declared_shape_note(const OnnxValueInfo& out, const Shape& got) {
  if (!out.has_shape) return "";
  bool same = static_cast<int>(out.dims.size()) == got.rank;
  std::vector<std::string> shown;
  for (size_t k = 0; k < out.dims.size(); ++k) {
    const OnnxDim& d = out.dims[k];
    shown.push_back(d.known ? std::to_string(d.value) : d.param.empty() ? "?" : d.param);
    if (d.known && same && d.value != got[static_cast<int>(k)]) same = false;
  }
  if (same) return "";
  return fmt::format("graph output '{}': the model declares shape [{}], the import computes {} and keeps it", out.name,
                     fmt::join(shown, ","), got.str());
}

class Importer {
 public:
  Importer(const OnnxModel& m, const OnnxImportOptions& o, Program& p, ImportReport& r)
      : m_(m), o_(o), r_(r), l_(p, m.default_opset(), r) {}

  Status run(const std::string& what) {
    r_.nodes = m_.graph.nodes.size();
    const int64_t opset = m_.default_opset();
    const bool old_but_read = opset >= 1 && opset < MIN_OPSET && reads_at_old_opset(m_.graph, opset);
    if ((opset < MIN_OPSET && !old_but_read) || opset > MAX_OPSET) {
      problem(opset < 0 ? "the model does not import the default ONNX domain (ai.onnx)"
                        : fmt::format("the model's opset is {}; the importer reads opsets {} to {}{}", opset, MIN_OPSET,
                                      MAX_OPSET, opset < MIN_OPSET ? OLD_OPSET_NOTE : ""));
      return Status::errorf("{}: error: {}", what, r_.problems.back());
    }
    for (const auto& given : o_.shapes)
      if (!std::any_of(m_.graph.inputs.begin(), m_.graph.inputs.end(), [&](const OnnxValueInfo& v) { return v.name == given.first; }))
        return Status::errorf("{}: error: --shape {}: the model has no graph input of that name", what, given.first);
    for (const OnnxValueInfo& v : m_.graph.inputs) l_.graph_inputs.insert(v.name);
    for (const OnnxValueInfo& v : m_.graph.outputs) l_.graph_outputs.insert(v.name);
    reserve_names();
    initializers();
    inputs();
    readers_ = onnx_readers(m_.graph);
    for (size_t k = 0; k < m_.graph.nodes.size(); ++k) node(k);
    outputs();
    if (!r_.problems.empty())
      return Status::errorf("{}: error: {} problem{}; {} of {} nodes imported", what, r_.problems.size(),
                            r_.problems.size() == 1 ? "" : "s", r_.imported, r_.nodes);
    NNASM_TRY(l_.program().finish().with_prefix(what + ": error: "));
    // The loader refuses a program over this limit: never write a model file it would refuse.
    return check_program_bytes(l_.program()).with_prefix(what + ": error: ");
  }

  OnnxGraphInfo graph_info() {
    OnnxGraphInfo g;
    for (const OnnxValueInfo& v : m_.graph.inputs) {
      const TensorId id = l_.program().find(l_.names().map(v.name));
      if (id != NO_TENSOR && l_.program().desc(id).role == Role::INPUT) g.inputs.emplace_back(v.name, l_.names().map(v.name));
    }
    for (const OnnxValueInfo& v : m_.graph.outputs) {
      auto it = output_names_.find(v.name);
      g.outputs.emplace_back(v.name, it != output_names_.end() ? it->second : l_.names().map(v.name));
    }
    g.needed_constant.assign(l_.needed_constant.begin(), l_.needed_constant.end());
    return g;
  }

 private:
  // Every ONNX name gets its listing name up front, in one fixed order, so that renamings never
  // depend on which values happen to reach the program.
  void reserve_names() {
    for (const OnnxValueInfo& v : m_.graph.inputs) l_.names().map(v.name);
    for (const OnnxInitializer& in : m_.graph.initializers) l_.names().map(in.name);
    for (const OnnxNode& n : m_.graph.nodes)
      for (const std::string& o : n.outputs)
        if (!o.empty()) l_.names().map(o);
  }

  void problem(std::string line) { r_.problems.push_back(std::move(line)); }

  void initializers() {
    for (const OnnxInitializer& in : m_.graph.initializers) {
      OnnxValue& v = l_.values()[in.name];
      v.kind = OnnxValue::Kind::HOST;
      v.host = in.value;
      v.type = in.value.type;
      v.weight = in.value.is_float();
    }
  }

  void inputs() {
    for (const OnnxValueInfo& in : m_.graph.inputs) {
      // Before IR version 4 initializers are listed as inputs too: they stay initializers.
      if (l_.values().count(in.name)) continue;
      OnnxValue& v = l_.values()[in.name];
      auto fixed = o_.constant_inputs.find(in.name);
      if (fixed != o_.constant_inputs.end()) {
        if (in.type != OnnxType::UNDEFINED && in.type != fixed->second.type) {
          problem(fmt::format("graph input '{}' is {}, and its given value {}", in.name, onnx_type_name(in.type),
                              onnx_type_name(fixed->second.type)));
          continue;
        }
        v.kind = OnnxValue::Kind::HOST;
        v.host = fixed->second;
        v.type = fixed->second.type;
        continue;
      }
      Status s = declare_input(in, &v);
      if (!s) problem(s.message());
    }
  }

  Status declare_input(const OnnxValueInfo& in, OnnxValue* v) {
    if (!in.is_tensor) return Status::errorf("graph input '{}' is not a tensor (a sequence, map or optional)", in.name);
    TensorDesc d;
    d.role = Role::INPUT;
    if (!onnx_to_dtype(in.type, &d.type.dtype))
      return Status::errorf("graph input '{}' is {}: nnasm tensors are f32, i32 or BOOL (as f32 0/1)", in.name, onnx_type_name(in.type));
    // INT8 and UINT8 come in as the bytes they are (a quantized model's input); the mappings that
    // do not read them as such get them widened to i32 (NodeLowering::tensor).
    if (in.type == OnnxType::INT8) d.type.dtype = DType::I8;
    if (in.type == OnnxType::UINT8) d.type.dtype = DType::U8;
    std::vector<int64_t> dims;
    NNASM_TRY(input_shape(in, o_, &dims));
    NNASM_TRY(dims_to_shape(dims, &d.type.shape).with_prefix(fmt::format("graph input '{}': ", in.name)));
    Result<TensorId> id = l_.declare(in.name, std::move(d), true);
    if (!id) return id.status();
    if (in.type == OnnxType::BOOL)
      r_.notes.push_back(fmt::format("graph input '{}' is BOOL; the program reads it as f32 0 and 1", in.name));
    else if (in.type != OnnxType::FLOAT && in.type != OnnxType::INT32 && in.type != OnnxType::INT8 && in.type != OnnxType::UINT8)
      r_.notes.push_back(fmt::format("graph input '{}' is {}; the program reads it as i32", in.name, onnx_type_name(in.type)));
    v->kind = OnnxValue::Kind::TENSOR;
    v->id = *id;
    v->type = in.type;
    return Status::ok();
  }

  void fail_outputs(const OnnxNode& n) {
    for (const std::string& o : n.outputs)
      if (!o.empty()) l_.values()[o].kind = OnnxValue::Kind::FAILED;
  }

  void node(size_t index) {
    // A node a chain stands for (onnx_fuse_quant.cpp) is imported with the chain's last.
    if (covered_.count(index)) {
      ++r_.imported;
      return;
    }
    auto fused = fusions_.find(index);
    const OnnxNode& n = fused != fusions_.end() ? fused->second.node : m_.graph.nodes[index];
    const std::string label = node_label(m_.graph.nodes[index], index, l_.opset());
    Status s = check_inputs(n);
    if (!s) {
      fail_outputs(n);
      // A node downstream of one already reported adds no line of its own.
      if (!s.message().empty()) problem(fmt::format("{}: {}", label, s.message()));
      return;
    }
    if (n.op_type == "DynamicQuantizeLinear" && fused == fusions_.end()) {
      std::vector<OnnxFusion> found;
      bool covered = false;
      match_dynamic_quant_linear(m_.graph, index, readers_, l_, &found, &covered);
      for (OnnxFusion& f : found) {
        covered_.insert(f.covered.begin(), f.covered.end());
        const size_t at = f.at;
        fusions_.emplace(at, std::move(f));
      }
      if (covered) {
        ++r_.imported;
        return;
      }
    }
    if (n.op_type == "QuantizeLinear" && fused == fusions_.end()) {
      std::vector<OnnxFusion> found;
      std::set<size_t> covered;
      match_static_quant_linear(m_.graph, index, readers_, l_, &found, &covered);
      for (OnnxFusion& f : found) {
        covered_.insert(f.covered.begin(), f.covered.end());
        const size_t at = f.at;
        fusions_.emplace(at, std::move(f));
      }
      covered_.insert(covered.begin(), covered.end());
      if (covered.count(index)) {
        ++r_.imported;
        return;
      }
    }
    NodeLowering nl(l_, n);
    s = fused != fusions_.end() ? fused->second.map(nl) : lower(nl);
    if (s) s = check_results(nl);
    if (!s) {
      fail_outputs(n);
      problem(fmt::format("{}: {}", label, s.message()));
      return;
    }
    s = take_results(nl);
    if (!s) {
      fail_outputs(n);
      problem(fmt::format("{}: {}", label, s.message()));
      return;
    }
    ++r_.imported;
  }

  // Ok if the node can be looked at; an error with an empty message when an input failed earlier.
  Status check_inputs(const OnnxNode& n) {
    if (!n.domain.empty() && n.domain != "ai.onnx") return Status::errorf("domain '{}' is not supported", n.domain);
    bool upstream_failed = false;
    for (const std::string& in : n.inputs) {
      if (in.empty()) continue;
      auto it = l_.values().find(in);
      if (it == l_.values().end()) return Status::errorf("input '{}' is not defined before this node", in);
      upstream_failed |= it->second.kind == OnnxValue::Kind::FAILED;
    }
    if (n.outputs.empty()) return Status::error("has no outputs");
    for (const std::string& o : n.outputs)
      if (!o.empty() && l_.values().count(o)) return Status::errorf("output '{}' is already defined", o);
    if (onnx_find_op(n.op_type) == nullptr) return Status::error("not supported");
    if (upstream_failed) return Status::error("");
    return Status::ok();
  }

  Status lower(NodeLowering& nl) {
    const OnnxOp& op = *onnx_find_op(nl.node().op_type);
    bool foldable = op.fold != nullptr;
    if (foldable && !op.reads_shapes_only)
      for (int k = 0; k < nl.inputs(); ++k)
        if (nl.has(k) && (!nl.is_host(k) || nl.value(k).weight)) foldable = false;
    if (foldable) return op.fold(nl);
    if (!op.map) return Status::error("supported only on values known at import time, and an input is computed at run time");
    return op.map(nl);
  }

  Status check_results(NodeLowering& nl) {
    if (const OnnxAttr* a = nl.unread_attr()) return Status::errorf("attribute '{}' is not supported", a->name);
    for (int k = 0; k < nl.outputs(); ++k)
      if (nl.wants(k) && nl.results()[k].kind == OnnxValue::Kind::FAILED)
        return Status::errorf("output {} ('{}') is not supported", k + 1, nl.node().outputs[k]);
    return Status::ok();
  }

  Status take_results(NodeLowering& nl) {
    const OnnxNode& n = nl.node();
    for (int k = 0; k < nl.outputs(); ++k) {
      if (!nl.wants(k)) continue;
      const OnnxValue& v = nl.results()[k];
      // A tensor this node made carries the output's name; one it passed through keeps its own.
      if (v.kind == OnnxValue::Kind::TENSOR &&
          std::find(nl.created().begin(), nl.created().end(), v.id) != nl.created().end() &&
          l_.program().desc(v.id).name != l_.names().map(n.outputs[k]))
        NNASM_TRY(l_.name_tensor(v.id, n.outputs[k]));
      l_.values()[n.outputs[k]] = v;
    }
    return Status::ok();
  }

  void outputs() {
    std::set<TensorId> marked;
    for (const OnnxValueInfo& out : m_.graph.outputs) {
      auto it = l_.values().find(out.name);
      if (it == l_.values().end()) {
        problem(fmt::format("graph output '{}' is not computed by any node", out.name));
        continue;
      }
      if (it->second.kind == OnnxValue::Kind::FAILED) continue;
      Status s = output(out, it->second, &marked);
      if (!s) problem(fmt::format("graph output '{}': {}", out.name, s.message()));
    }
  }

  // Marks the tensor of graph output `out` as a program output under the output's name; a value
  // that is an input, a constant, an earlier output or a tensor under another name is copied to
  // a tensor of that name first (of a fresh name when an input already has it).
  Status output(const OnnxValueInfo& out, OnnxValue& v, std::set<TensorId>* marked) {
    DType want;
    if (out.is_tensor && out.type != OnnxType::UNDEFINED && !onnx_to_dtype(out.type, &want))
      return Status::errorf("it is {}: nnasm tensors are f32, i32 or BOOL (as f32 0/1)", onnx_type_name(out.type));
    Program& p = l_.program();
    TensorId id = v.id;
    if (v.kind == OnnxValue::Kind::HOST) NNASM_TRY(l_.materialize(v, "", Role::CONST, &id));
    const std::string declared = declared_shape_note(out, p.desc(id).type.shape);
    if (!declared.empty()) r_.notes.push_back(declared);
    const std::string& name = l_.names().map(out.name);
    if (p.desc(id).role != Role::TEMPORARY || p.desc(id).name != name || marked->count(id)) {
      Instruction copy = make_instruction(Opcode::COPY, {id}, {});
      TensorDesc fresh;
      if (p.find(name) != NO_TENSOR) fresh.name = l_.temp_name(name + ".out");
      Result<TensorId> y = fresh.name.empty() ? l_.declare(out.name, fresh, false) : p.declare(fresh, false);
      if (!y) return y.status();
      if (p.desc(*y).name != name)
        r_.notes.push_back(fmt::format("graph output '{}' is %{} (an input has its name)", out.name, p.desc(*y).name));
      copy.out = {*y};
      NNASM_TRY(p.append(std::move(copy)));
      id = *y;
    }
    p.mark_output(id);
    marked->insert(id);
    output_names_[out.name] = p.desc(id).name;
    return Status::ok();
  }

  const OnnxModel& m_;
  const OnnxImportOptions& o_;
  ImportReport& r_;
  OnnxLowering l_;
  std::map<std::string, std::string> output_names_;
  OnnxReaders readers_;
  // Chains lowered as one, by the index of their last node, and the other nodes they cover.
  std::map<size_t, OnnxFusion> fusions_;
  std::set<size_t> covered_;
};

}  // namespace

Status onnx_import(std::string_view bytes, const std::string& what, const OnnxImportOptions& options, Program* out,
                   ImportReport* report, OnnxGraphInfo* info) {
  *report = ImportReport();
  OnnxModel m;
  NNASM_TRY(onnx_decode(bytes, what, &m));
  out->set_training(false);
  Importer im(m, options, *out, *report);
  Status s = im.run(what);
  if (info) *info = im.graph_info();
  return s;
}

std::vector<std::string> onnx_supported_ops() {
  std::vector<std::string> v;
  for (const OnnxOp& o : onnx_ops()) v.push_back(o.type);
  return v;
}

}  // namespace nnasm
