// The flow importer (serialize/flow/flow_import.h): orders a function's operations by their data
// dependencies, makes the tensors they use, lowers each through the table in flow_ops.cpp, takes
// back whatever an operation it could not map had declared (Program::rollback), and decides the
// program's outputs.
#include "serialize/flow/flow_import.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <functional>
#include <queue>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "serialize/flow/flow_lowering.h"
#include "serialize/import_names.h"
#include "serialize/model_file.h"
#include "serialize/model_frame.h"

namespace nnasm {

// What the import knows of each flow variable.
struct FlowVarState {
  TensorId tensor = NO_TENSOR;
  size_t producer = FLOW_NONE;  // the operation of the function that computes it
  bool left_out = false;        // its producer was left out
  bool computed = false;        // an imported operation computed (or, Reference, named) it
  bool read = false;            // an imported operation read it
  bool read_by_left_out = false;
};

class FlowImporter {
 public:
  FlowImporter(const Flow& flow, const FlowFunction& fn, Program* p, ImportReport* report, const FlowImportOptions& o)
      : flow_(flow), fn_(fn), p_(*p), report_(*report), opt_(o), vars_(flow.vars.size()) {}

  Status run();

  const Flow& flow() const { return flow_; }
  Program& program() { return p_; }
  FlowVarState& var(size_t v) { return vars_[v]; }
  const std::string& name_of(size_t v) { return names_.map(flow_.vars[v].name); }
  std::string fresh_name(const std::string& base) { return names_.fresh(base); }
  int64_t batch() const { return opt_.batch; }
  // The tensor for variable `v`: made on first use as a constant, param or input.
  Result<TensorId> tensor(size_t v);
  // Records that `v` is now `id`; a note when the listing spells the variable differently.
  void own(size_t v, TensorId id);
  void note(std::string line) { report_.notes.push_back(std::move(line)); }
  // The variables the operation being lowered has read so far.
  std::vector<size_t>& reads() { return reads_; }
  // Marks `v` as given a tensor by the operation being lowered, to be taken back if it fails.
  void touch(size_t v) { touched_.push_back(v); }

 private:
  std::vector<size_t> dependency_order(std::vector<bool>* in_cycle) const;
  void lower(size_t op_index, bool in_cycle);
  Status add_outputs();
  bool is_output(size_t v) const;

  const Flow& flow_;
  const FlowFunction& fn_;
  Program& p_;
  ImportReport& report_;
  const FlowImportOptions& opt_;
  std::vector<FlowVarState> vars_;
  std::vector<size_t> ops_;  // the function's operations, once each, in the order it lists them
  std::vector<bool> in_connector_;
  ImportNames names_;
  std::vector<size_t> reads_, touched_;
};

namespace {

// The nnasm type of variable `v`, batch dimensions set to `batch`; the error says why there is
// none.
Status tensor_type(const FlowVariable& var, int64_t batch, TensorType* out) {
  switch (var.dtype) {
    case FlowDType::FLOAT32: out->dtype = DType::F32; break;
    case FlowDType::INT32: out->dtype = DType::I32; break;
    case FlowDType::NONE: return Status::error("the file gives it no element type");
    default: return Status::errorf("{} has no nnasm element type (only float32 and int32 have)", flow_dtype_name(var.dtype));
  }
  if (var.shape.size() > static_cast<size_t>(MAX_RANK))
    return Status::errorf("rank {} is over the limit of {}", var.shape.size(), MAX_RANK);
  out->shape = Shape();
  for (int64_t d : var.shape) out->shape.dims[out->shape.rank++] = d == -1 ? batch : d;
  return check_shape(out->shape, "shape " + flow_shape_text(var.shape));
}

bool has_batch_dim(const FlowVariable& var) {
  return std::find(var.shape.begin(), var.shape.end(), -1) != var.shape.end();
}

// Values of a float32 or int32 variable with data (its size checked by flow_read), as a
// TensorDesc holds them.
std::vector<double> values_of(const FlowVariable& var) {
  const size_t n = var.data.size() / 4;
  std::vector<double> v(n);
  for (size_t k = 0; k < n; ++k) {
    const uint32_t bits = static_cast<uint32_t>(load_le(var.data.data() + 4 * k, 4));
    if (var.dtype == FlowDType::FLOAT32) {
      float f;
      std::memcpy(&f, &bits, 4);
      v[k] = f;
    } else {
      v[k] = static_cast<int32_t>(bits);
    }
  }
  return v;
}

bool truthy(const std::string* v) { return v && (*v == "1" || *v == "T" || *v == "true"); }

// A whole decimal integer, spaces around it allowed (Myelin writes "1, 0" in lists).
bool parse_int(std::string_view s, int64_t* out) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty();
}

}  // namespace

Result<TensorId> FlowImporter::tensor(size_t v) {
  FlowVarState& st = vars_[v];
  if (st.tensor != NO_TENSOR) return st.tensor;
  const FlowVariable& var = flow_.vars[v];
  if (st.producer != FLOW_NONE && !st.left_out)
    return Status::errorf("it is computed by operation {}, which comes later", flow_quote(flow_.ops[st.producer].name));
  TensorDesc d;
  Status s = tensor_type(var, opt_.batch, &d.type);
  if (!s) {
    if (st.left_out)
      return Status::errorf("operation {}, which computes it, was left out, and it cannot be an input instead: {}",
                            flow_quote(flow_.ops[st.producer].name), s.message());
    return s;
  }
  d.name = name_of(v);
  if (!var.data.empty()) {
    if (var.data.size() != static_cast<size_t>(d.type.shape.numel()) * 4)
      return Status::errorf("{} bytes of data for {}", var.data.size(), d.type.str());
    const bool param = var.learnable() || (opt_.weights_as_params && d.type.dtype == DType::F32);
    d.role = param ? Role::PARAM : Role::CONST;
    d.values = values_of(var);
  } else if (var.learnable()) {
    d.role = Role::PARAM;
    d.init = {InitKind::ZEROS, 0, 0};
    note(fmt::format("param @{}: learnable but without values in the file, initialized with zeros (Myelin's default)",
                     d.name));
  } else {
    d.role = Role::INPUT;
    if (st.left_out)
      note(fmt::format("input %{}: computed by operation {}, which was left out", d.name,
                       flow_quote(flow_.ops[st.producer].name)));
    if (has_batch_dim(var))
      note(fmt::format("input %{}: batch dimensions (-1) of {} set to {}", d.name, flow_shape_text(var.shape), opt_.batch));
  }
  Result<TensorId> id = p_.declare(std::move(d));
  if (!id) return id.status();
  own(v, *id);
  return *id;
}

void FlowImporter::own(size_t v, TensorId id) {
  touch(v);
  vars_[v].tensor = id;
  const TensorDesc& d = p_.desc(id);
  if (d.name != flow_.vars[v].name)
    note(fmt::format("variable {} is {}{}", flow_quote(flow_.vars[v].name), d.sigil(), d.name));
}

// Kahn's algorithm, the earliest-listed ready operation first, so that a function already in
// dependency order (as Myelin writes them) keeps its order. Operations on a cycle come last.
std::vector<size_t> FlowImporter::dependency_order(std::vector<bool>* in_cycle) const {
  const size_t n = ops_.size();
  std::vector<std::vector<size_t>> users(n);
  std::vector<size_t> waiting(n, 0);
  std::vector<size_t> position(flow_.ops.size(), FLOW_NONE);
  for (size_t k = 0; k < n; ++k) position[ops_[k]] = k;
  for (size_t k = 0; k < n; ++k) {
    const FlowOperation& op = flow_.ops[ops_[k]];
    std::vector<size_t> reads = op.inputs;
    for (size_t v : flow_extra_reads(flow_, op)) reads.push_back(v);
    std::sort(reads.begin(), reads.end());
    reads.erase(std::unique(reads.begin(), reads.end()), reads.end());
    for (size_t v : reads) {
      const size_t producer = vars_[v].producer;
      if (producer == FLOW_NONE || producer == ops_[k]) continue;
      users[position[producer]].push_back(k);
      ++waiting[k];
    }
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<size_t>> ready;
  for (size_t k = 0; k < n; ++k)
    if (waiting[k] == 0) ready.push(k);
  std::vector<size_t> order;
  while (!ready.empty()) {
    const size_t k = ready.top();
    ready.pop();
    order.push_back(k);
    for (size_t u : users[k])
      if (--waiting[u] == 0) ready.push(u);
  }
  in_cycle->assign(n, false);
  for (size_t k = 0; k < n; ++k)
    if (waiting[k] != 0) {
      (*in_cycle)[k] = true;
      order.push_back(k);
    }
  return order;
}

void FlowImporter::lower(size_t op_index, bool in_cycle) {
  const FlowOperation& op = flow_.ops[op_index];
  const Program::Checkpoint mark = p_.checkpoint();
  const size_t notes = report_.notes.size();
  reads_.clear();
  touched_.clear();
  FlowOpContext c(*this, op);
  Status s = in_cycle ? Status::error("it depends on its own result (a cycle in the function)") : flow_lower(c);
  ++report_.nodes;
  if (s) {
    ++report_.imported;
    for (size_t v : reads_) vars_[v].read = true;
    return;
  }
  p_.rollback(mark);
  report_.notes.resize(notes);
  for (size_t v : touched_) {
    vars_[v].tensor = NO_TENSOR;
    vars_[v].computed = false;
  }
  report_.problems.push_back(fmt::format("op {} (type {}): {}", flow_quote(op.name), flow_printable(op.type), s.message()));
  for (size_t v : op.outputs)
    if (vars_[v].producer == op_index) vars_[v].left_out = true;
  for (size_t v : op.inputs) vars_[v].read_by_left_out = true;
}

bool FlowImporter::is_output(size_t v) const {
  const FlowVarState& st = vars_[v];
  if (!st.computed) return false;
  const FlowVariable& var = flow_.vars[v];
  return (var.flags & FLOW_VAR_OUT) || in_connector_[v] || truthy(flow_.ops[st.producer].attr("output")) || !st.read ||
         st.read_by_left_out;
}

// Marks the outputs; one that is not a value of its own (a Reference to a weight) gets a COPY,
// since a program's output is something it computes.
Status FlowImporter::add_outputs() {
  for (size_t v = 0; v < vars_.size(); ++v) {
    if (!is_output(v)) continue;
    TensorId id = vars_[v].tensor;
    if (p_.desc(id).name != name_of(v)) {
      Result<std::vector<TensorId>> out = p_.append_new(make_instruction(Opcode::COPY, {id}, {}));
      if (!out) return out.status();
      id = out.value()[0];
      NNASM_TRY(p_.rename(id, name_of(v)));
    }
    p_.mark_output(id);
  }
  return Status::ok();
}

Status FlowImporter::run() {
  if (!p_.tensors().empty() || !p_.code().empty()) return Status::error("the program to import into is not empty");
  if (opt_.batch < 1) return Status::errorf("the batch size must be at least 1, not {}", opt_.batch);
  std::vector<bool> listed(flow_.ops.size(), false);
  for (size_t o : fn_.ops)
    if (!listed[o]) {
      listed[o] = true;
      ops_.push_back(o);
    }
  // Names in variable order, so that a variable's listing name does not depend on which operation
  // uses it first.
  std::vector<bool> used(flow_.vars.size(), false);
  for (size_t o : ops_) {
    const FlowOperation& op = flow_.ops[o];
    for (size_t v : op.outputs)
      if (vars_[v].producer == FLOW_NONE) vars_[v].producer = o;
    for (size_t v : op.inputs) used[v] = true;
    for (size_t v : op.outputs) used[v] = true;
    for (size_t v : flow_extra_reads(flow_, op)) used[v] = true;
  }
  for (size_t v = 0; v < used.size(); ++v)
    if (used[v]) names_.map(flow_.vars[v].name);
  in_connector_.assign(flow_.vars.size(), false);
  for (const FlowConnector& c : flow_.cnxs)
    for (size_t v : c.links) in_connector_[v] = true;

  std::vector<bool> in_cycle;
  const std::vector<size_t> order = dependency_order(&in_cycle);
  for (size_t k : order) lower(ops_[k], in_cycle[k]);
  NNASM_TRY(add_outputs());
  NNASM_TRY(p_.finish());
  return check_program_bytes(p_, opt_.max_program_bytes);
}

// FlowOpContext: what a mapping in flow_ops.cpp sees.

Status FlowOpContext::expect_inputs(size_t lo, size_t hi) const {
  const size_t n = op_.inputs.size();
  if (n >= lo && n <= hi) return Status::ok();
  const std::string want = lo == hi ? fmt::format("{}", lo) : fmt::format("{} or {}", lo, hi);
  return Status::errorf("takes {} input{}, got {}", want, hi == 1 ? "" : "s", n);
}

Status FlowOpContext::inputs(size_t n, std::vector<TensorId>* out) {
  out->clear();
  for (size_t k = 0; k < n && k < op_.inputs.size(); ++k) {
    Result<TensorId> t = var_tensor(op_.inputs[k]);
    if (!t) return t.status().with_prefix(fmt::format("input {} {}: ", k, flow_quote(imp_.flow().vars[op_.inputs[k]].name)));
    out->push_back(*t);
  }
  return Status::ok();
}

Result<TensorId> FlowOpContext::var_tensor(size_t v) {
  Result<TensorId> t = imp_.tensor(v);
  if (t) imp_.reads().push_back(v);
  return t;
}

Status FlowOpContext::input_ints(size_t k, std::vector<int64_t>* out) const {
  const FlowVariable& var = imp_.flow().vars[op_.inputs[k]];
  const std::string what = fmt::format("input {} {}", k, flow_quote(var.name));
  const size_t size = var.dtype == FlowDType::INT32 ? 4 : var.dtype == FlowDType::INT64 ? 8 : 0;
  if (size == 0 || var.data.empty())
    return Status::errorf("{}: must be a constant of int32 or int64 values, is {}{}", what, flow_dtype_name(var.dtype),
                          var.data.empty() ? " without data" : "");
  out->resize(var.data.size() / size);
  for (size_t i = 0; i < out->size(); ++i) {
    const uint64_t bits = load_le(var.data.data() + size * i, size);
    (*out)[i] = size == 4 ? static_cast<int32_t>(static_cast<uint32_t>(bits)) : static_cast<int64_t>(bits);
  }
  return Status::ok();
}

const TensorType& FlowOpContext::type(TensorId id) const { return imp_.program().desc(id).type; }

bool FlowOpContext::output_shape(Shape* s) const {
  if (op_.outputs.size() != 1) return false;
  TensorType t;
  const FlowVariable& var = imp_.flow().vars[op_.outputs[0]];
  if (var.shape.empty() || !tensor_type(var, imp_.batch(), &t)) return false;
  *s = t.shape;
  return true;
}

bool FlowOpContext::attr_bool(const std::string& key) const { return truthy(op_.attr(key)); }

Status FlowOpContext::attr_int(const std::string& key, int64_t def, int64_t* out) const {
  const std::string* v = op_.attr(key);
  *out = def;
  if (v && !parse_int(*v, out)) return Status::errorf("attribute {} is {}, not an integer", key, flow_quote(*v));
  return Status::ok();
}

Status FlowOpContext::attr_ints(const std::string& key, bool* found, std::vector<int64_t>* out) const {
  const std::string* v = op_.attr(key);
  *found = v != nullptr;
  out->clear();
  if (!v) return Status::ok();
  std::string_view s = *v;
  if (s.size() >= 2 && s.front() == '[' && s.back() == ']') s = s.substr(1, s.size() - 2);
  while (!s.empty()) {
    const size_t comma = s.find(',');
    int64_t n = 0;
    if (!parse_int(s.substr(0, comma), &n))
      return Status::errorf("attribute {} is {}, not a list of integers", key, flow_quote(*v));
    out->push_back(n);
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return Status::ok();
}

size_t FlowOpContext::find_var(const std::string& name) const { return imp_.flow().find_var(name); }

// The operation's one output variable, which it must compute itself.
static Result<size_t> sole_output(FlowImporter& imp, const FlowOperation& op) {
  if (op.outputs.size() != 1) return Status::errorf("has {} outputs; its mapping makes one", op.outputs.size());
  const size_t v = op.outputs[0];
  const FlowVarState& st = imp.var(v);
  if (st.producer != FLOW_NONE && &imp.flow().ops[st.producer] != &op)
    return Status::errorf("output {} is computed by operation {} already", flow_quote(imp.flow().vars[v].name),
                          flow_quote(imp.flow().ops[st.producer].name));
  return v;
}

Result<TensorId> FlowOpContext::emit(Instruction ins) {
  std::string mnemonic = op_info(ins.op).mnemonic;
  std::transform(mnemonic.begin(), mnemonic.end(), mnemonic.begin(), [](unsigned char c) { return std::tolower(c); });
  const std::string base = op_.name + "_" + mnemonic;
  Result<std::vector<TensorId>> out = imp_.program().append_new(std::move(ins));
  if (!out) return out.status();
  const TensorId id = out.value()[0];
  NNASM_TRY(imp_.program().rename(id, imp_.fresh_name(base)));
  return id;
}

Status FlowOpContext::finish(Instruction ins) {
  Result<size_t> v = sole_output(imp_, op_);
  if (!v) return v.status();
  const FlowVariable& var = imp_.flow().vars[*v];
  const Opcode opcode = ins.op;
  Result<std::vector<TensorId>> out = imp_.program().append_new(std::move(ins));
  if (!out) return out.status();
  const TensorId id = out.value()[0];
  const TensorType& made = imp_.program().desc(id).type;
  // The file's type, when it gives one, must be what the instruction computes: a mapping that
  // disagrees with Myelin's would give other numbers.
  TensorType want;
  if (var.dtype != FlowDType::NONE && !var.shape.empty()) {
    Status s = tensor_type(var, imp_.batch(), &want);
    if (!s || !(want == made))
      return Status::errorf("output {} is {}{} in the file, but {} makes {}", flow_quote(var.name),
                            flow_dtype_name(var.dtype), flow_shape_text(var.shape), op_info(opcode).mnemonic,
                            made.str());
  }
  NNASM_TRY(imp_.program().rename(id, imp_.name_of(*v)));
  imp_.own(*v, id);
  imp_.var(*v).computed = true;
  return Status::ok();
}

Status FlowOpContext::alias(TensorId id) {
  Result<size_t> v = sole_output(imp_, op_);
  if (!v) return v.status();
  imp_.touch(*v);
  imp_.var(*v).tensor = id;
  imp_.var(*v).computed = true;
  return Status::ok();
}

Status flow_import(const Flow& flow, Program* out, ImportReport* report, const FlowImportOptions& options) {
  *report = ImportReport();
  if (flow.funcs.empty()) return Status::error("the flow has no functions to import");
  const FlowFunction* fn = &flow.funcs[0];
  if (!options.function.empty()) {
    fn = nullptr;
    std::vector<std::string> names;
    for (const FlowFunction& f : flow.funcs) {
      if (f.name == options.function && !fn) fn = &f;
      names.push_back(flow_quote(f.name));
    }
    if (!fn)
      return Status::errorf("the flow has no function {} (it has {})", flow_quote(options.function), fmt::join(names, ", "));
  }
  FlowImporter imp(flow, *fn, out, report, options);
  return catch_bad_alloc([&] { return imp.run(); }, [] { return std::string("out of memory"); })
      .with_prefix(fmt::format("function {}: ", flow_quote(fn->name)));
}

Status flow_import_bytes(std::string_view bytes, const std::string& what, Program* out, ImportReport* report,
                         const FlowImportOptions& options) {
  Flow flow;
  NNASM_TRY(flow_read(bytes, what, &flow));
  return flow_import(flow, out, report, options).with_prefix(what + ": error: ");
}

Status flow_import_file(const std::string& path, Program* out, ImportReport* report, const FlowImportOptions& options) {
  std::string bytes;
  NNASM_TRY(read_file_limited(path, options.max_file_bytes, &bytes));
  return flow_import_bytes(bytes, path, out, report, options);
}

}  // namespace nnasm
