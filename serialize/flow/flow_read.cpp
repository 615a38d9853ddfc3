// The flow file reader (serialize/flow/flow.h has the layout). Written from the format's
// description, not from Myelin's code: Myelin trusts its files (a short file or a negative length
// ends the process there), this reader checks every number against the bytes that remain.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "serialize/flow/flow.h"
#include "serialize/model_frame.h"

namespace nnasm {

namespace {

constexpr uint32_t kMagic = 0x776f6c66;  // "flow" read as a little-endian int
constexpr int kMinVersion = 3, kMaxVersion = 6;

struct DTypeRow {
  const char* name;
  FlowDType type;
  size_t size;
};
// Myelin's dtype names and element sizes; "float" and "int" are its synonyms.
constexpr DTypeRow kDTypes[] = {
    {"void", FlowDType::NONE, 0},         {"float16", FlowDType::FLOAT16, 2},   {"float32", FlowDType::FLOAT32, 4},
    {"float64", FlowDType::FLOAT64, 8},   {"bfloat16", FlowDType::BFLOAT16, 2}, {"int8", FlowDType::INT8, 1},
    {"int16", FlowDType::INT16, 2},       {"int32", FlowDType::INT32, 4},       {"int64", FlowDType::INT64, 8},
    {"uint8", FlowDType::UINT8, 1},       {"uint16", FlowDType::UINT16, 2},     {"bool", FlowDType::BOOL, 1},
    {"string", FlowDType::STRING, 0},     {"complex64", FlowDType::COMPLEX64, 8},
    {"complex128", FlowDType::COMPLEX128, 16}, {"qint8", FlowDType::QINT8, 1}, {"qint16", FlowDType::QINT16, 2},
    {"qint32", FlowDType::QINT32, 4},     {"quint8", FlowDType::QUINT8, 1},     {"quint16", FlowDType::QUINT16, 2},
    {"resource", FlowDType::RESOURCE, 0}, {"float", FlowDType::FLOAT32, 4},     {"int", FlowDType::INT32, 4},
};

const DTypeRow* dtype_row(FlowDType t) {
  for (const DTypeRow& r : kDTypes)
    if (r.type == t) return &r;
  return nullptr;
}

// Smallest record sizes, for checking a count against the bytes left before reserving for it.
constexpr uint64_t kStrBytes = 4, kIntBytes = 4, kAttrBytes = 2 * kStrBytes;

// Reads fields from the front of the file, each checked against what remains. `part_` says which
// artifact is being read; a message adds the field.
class Reader {
 public:
  Reader(std::string_view b, const std::string& what) : b_(b), what_(what) {}

  uint64_t offset() const { return pos_; }
  uint64_t left() const { return b_.size() - pos_; }
  void set_part(std::string part) { part_ = std::move(part); }

  Status fail(uint64_t at, std::string_view field, const std::string& msg) const {
    return Status::errorf("{}: byte {}: error: {}{}{}: {}", what_, at, part_, part_.empty() ? "" : ": ", field, msg);
  }

  Status bytes(uint64_t n, std::string_view field, std::string_view* out) {
    if (n > left())
      return fail(pos_, field, fmt::format("{} byte{} needed, {} left", n, n == 1 ? "" : "s", left()));
    *out = b_.substr(pos_, n);
    pos_ += n;
    return Status::ok();
  }
  Status i32(int32_t* v, std::string_view field) {
    std::string_view s;
    NNASM_TRY(bytes(4, field, &s));
    *v = static_cast<int32_t>(static_cast<uint32_t>(load_le(s.data(), 4)));
    return Status::ok();
  }
  Status u64(uint64_t* v, std::string_view field) {
    std::string_view s;
    NNASM_TRY(bytes(8, field, &s));
    *v = load_le(s.data(), 8);
    return Status::ok();
  }
  // A u64 size and that many bytes (a variable's or a blob's data).
  Status sized_data(std::string_view* out) {
    const uint64_t at = pos_;
    uint64_t size = 0;
    NNASM_TRY(u64(&size, "data size"));
    if (size > left()) return fail(at, "data size", fmt::format("{} bytes, but {} are left", size, left()));
    return bytes(size, "data", out);
  }
  // A count of records of at least `min_each` bytes each: never more than the bytes left can hold.
  Status count(size_t* n, uint64_t min_each, std::string_view field) {
    const uint64_t at = pos_;
    int32_t v = 0;
    NNASM_TRY(i32(&v, field));
    if (v < 0) return fail(at, field, fmt::format("{} is negative", v));
    if (uint64_t(v) * min_each > left())
      return fail(at, field, fmt::format("{} entries of at least {} bytes need {}, {} are left", v, min_each,
                                         uint64_t(v) * min_each, left()));
    *n = static_cast<size_t>(v);
    return Status::ok();
  }
  Status str(std::string* s, std::string_view field) {
    const uint64_t at = pos_;
    int32_t len = 0;
    NNASM_TRY(i32(&len, field));
    if (len < 0) return fail(at, field, fmt::format("length {} is negative", len));
    if (uint64_t(len) > left())
      return fail(at, field, fmt::format("length {} runs past the end of the file ({} bytes left)", len, left()));
    s->assign(b_.data() + pos_, static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return Status::ok();
  }
  Status flags(int version, uint32_t* f) {
    if (version < 5) return Status::ok();
    int32_t v = 0;
    NNASM_TRY(i32(&v, "flags"));
    *f = static_cast<uint32_t>(v);
    return Status::ok();
  }
  Status attrs(std::vector<FlowAttr>* out) {
    size_t n = 0;
    NNASM_TRY(count(&n, kAttrBytes, "attribute count"));
    out->resize(n);
    for (FlowAttr& a : *out) {
      NNASM_TRY(str(&a.name, "attribute name"));
      NNASM_TRY(str(&a.value, fmt::format("attribute {} value", flow_quote(a.name))));
    }
    return Status::ok();
  }
  // A list of names of variables (or whatever `index` resolves), each turned into an index.
  template <typename Index>
  Status names(std::vector<size_t>* out, std::string_view what_count, std::string_view what_each, Index index) {
    size_t n = 0;
    NNASM_TRY(count(&n, kStrBytes, what_count));
    out->resize(n);
    for (size_t k = 0; k < n; ++k) {
      const uint64_t at = pos_;
      std::string name;
      const std::string field = fmt::format("{} {}", what_each, k);
      NNASM_TRY(str(&name, field));
      (*out)[k] = index(name);
      if ((*out)[k] == FLOW_NONE) return fail(at, field, fmt::format("nothing is named {}", flow_quote(name)));
    }
    return Status::ok();
  }

 private:
  std::string_view b_;
  const std::string& what_;
  uint64_t pos_ = 0;
  std::string part_;
};

// Registers `name` for variable `v` unless a variable before it has that name or alias already.
void add_var_name(Flow* f, const std::string& name, size_t v) {
  auto [it, inserted] = f->var_names.emplace(name, v);
  if (!inserted && v < it->second) it->second = v;
}

Status read_dtype(Reader& r, FlowVariable* var) {
  const uint64_t at = r.offset();
  std::string type;
  NNASM_TRY(r.str(&type, "type"));
  std::string_view t = type;
  if (!t.empty() && t[0] == '&') {
    var->flags |= FLOW_VAR_REF;
    t.remove_prefix(1);
  }
  if (t.empty()) return Status::ok();
  for (const DTypeRow& row : kDTypes) {
    if (t == row.name) {
      var->dtype = row.type;
      return Status::ok();
    }
  }
  return r.fail(at, "type", fmt::format("unknown element type {}", flow_quote(type)));
}

// The data must hold exactly the shape's elements when the type has a fixed size.
Status check_data_size(Reader& r, uint64_t at, const FlowVariable& var) {
  const size_t elem = flow_dtype_size(var.dtype);
  if (var.data.empty() || elem == 0) return Status::ok();
  const std::string shape = flow_shape_text(var.shape);
  if (std::find(var.shape.begin(), var.shape.end(), -1) != var.shape.end())
    return r.fail(at, "data", fmt::format("{} bytes of data for the shape {}, whose batch dimension (-1) leaves its size open",
                                          var.data.size(), shape));
  const bool empty = std::find(var.shape.begin(), var.shape.end(), 0) != var.shape.end();
  uint64_t n = empty ? 0 : 1, bytes = 0;
  bool over = false;
  for (int64_t d : var.shape) over = over || __builtin_mul_overflow(n, uint64_t(d), &n);
  over = over || __builtin_mul_overflow(n, uint64_t(elem), &bytes);
  if (over || bytes != var.data.size())
    return r.fail(at, "data", fmt::format("{} bytes, but {}{} needs {}", var.data.size(), flow_dtype_name(var.dtype), shape,
                                          over ? std::string("more than 2^64") : fmt::format("{}", bytes)));
  return Status::ok();
}

// The start every artifact's record shares: its flags (version 5 on) and its name, after which
// messages name it ("variable 3 ('w')").
Status read_head(Reader& r, int version, const char* kind, size_t index, uint32_t* flags, std::string* name) {
  r.set_part(fmt::format("{} {}", kind, index));
  NNASM_TRY(r.flags(version, flags));
  NNASM_TRY(r.str(name, "name"));
  r.set_part(fmt::format("{} {} ({})", kind, index, flow_quote(*name)));
  return Status::ok();
}

Status read_variable(Reader& r, int version, size_t index, Flow* f) {
  FlowVariable& var = f->vars[index];
  NNASM_TRY(read_head(r, version, "variable", index, &var.flags, &var.name));
  size_t n = 0;
  NNASM_TRY(r.count(&n, kStrBytes, "alias count"));
  var.aliases.resize(n);
  for (size_t k = 0; k < n; ++k) NNASM_TRY(r.str(&var.aliases[k], fmt::format("alias {}", k)));
  NNASM_TRY(read_dtype(r, &var));
  NNASM_TRY(r.count(&n, kIntBytes, "rank"));
  var.shape.resize(n);
  for (size_t d = 0; d < n; ++d) {
    const uint64_t at = r.offset();
    int32_t v = 0;
    NNASM_TRY(r.i32(&v, fmt::format("dimension {}", d)));
    if (v < -1) return r.fail(at, fmt::format("dimension {}", d), fmt::format("{} (only -1, the batch size, may be negative)", v));
    var.shape[d] = v;
  }
  if (version >= 6) NNASM_TRY(r.attrs(&var.attrs));
  const uint64_t size_at = r.offset();
  NNASM_TRY(r.sized_data(&var.data));
  NNASM_TRY(check_data_size(r, size_at, var));
  add_var_name(f, var.name, index);
  for (const std::string& a : var.aliases) add_var_name(f, a, index);
  return Status::ok();
}

Status read_operation(Reader& r, int version, size_t index, Flow* f,
                      std::unordered_map<std::string, size_t>* op_names) {
  FlowOperation& op = f->ops[index];
  NNASM_TRY(read_head(r, version, "operation", index, &op.flags, &op.name));
  NNASM_TRY(r.str(&op.type, "type"));
  auto var = [f](const std::string& name) { return f->find_var(name); };
  NNASM_TRY(r.names(&op.inputs, "input count", "input", var));
  NNASM_TRY(r.names(&op.outputs, "output count", "output", var));
  NNASM_TRY(r.attrs(&op.attrs));
  // Myelin names an operation's first output after the operation too.
  if (!op.outputs.empty()) {
    std::vector<std::string>& aliases = f->vars[op.outputs[0]].aliases;
    if (std::find(aliases.begin(), aliases.end(), op.name) == aliases.end()) aliases.push_back(op.name);
    add_var_name(f, op.name, op.outputs[0]);
  }
  op_names->emplace(op.name, index);
  return Status::ok();
}

Status read_blob(Reader& r, int version, size_t index, FlowBlob* blob) {
  NNASM_TRY(read_head(r, version, "blob", index, &blob->flags, &blob->name));
  NNASM_TRY(r.str(&blob->type, "type"));
  NNASM_TRY(r.attrs(&blob->attrs));
  return r.sized_data(&blob->data);
}

Status read_flow(Reader& r, Flow* f) {
  r.set_part("header");
  const uint64_t version_at = 4;
  int32_t magic = 0, version = 0;
  NNASM_TRY(r.i32(&magic, "magic"));
  if (static_cast<uint32_t>(magic) != kMagic) return r.fail(0, "magic", "not a flow file (it does not start with \"flow\")");
  NNASM_TRY(r.i32(&version, "version"));
  if (version < kMinVersion || version > kMaxVersion)
    return r.fail(version_at, "version", fmt::format("{} is not supported (this reader knows {} to {})", version, kMinVersion, kMaxVersion));
  f->version = version;
  uint32_t unused = 0;
  NNASM_TRY(r.flags(version, &unused));

  const uint64_t flags_bytes = version >= 5 ? kIntBytes : 0;
  size_t n = 0;
  r.set_part("variables");
  const uint64_t var_bytes = flags_bytes + 3 * kStrBytes + kIntBytes + 8 + (version >= 6 ? kIntBytes : 0);
  NNASM_TRY(r.count(&n, var_bytes, "variable count"));
  f->vars.resize(n);
  for (size_t k = 0; k < n; ++k) NNASM_TRY(read_variable(r, version, k, f));

  r.set_part("operations");
  NNASM_TRY(r.count(&n, flags_bytes + 2 * kStrBytes + 3 * kIntBytes, "operation count"));
  f->ops.resize(n);
  std::unordered_map<std::string, size_t> op_names;
  for (size_t k = 0; k < n; ++k) NNASM_TRY(read_operation(r, version, k, f, &op_names));

  r.set_part("functions");
  NNASM_TRY(r.count(&n, flags_bytes + kStrBytes + kIntBytes, "function count"));
  f->funcs.resize(n);
  auto op = [&op_names](const std::string& name) {
    auto it = op_names.find(name);
    return it == op_names.end() ? FLOW_NONE : it->second;
  };
  for (size_t k = 0; k < n; ++k) {
    FlowFunction& fn = f->funcs[k];
    NNASM_TRY(read_head(r, version, "function", k, &fn.flags, &fn.name));
    NNASM_TRY(r.names(&fn.ops, "operation count", "operation", op));
  }

  r.set_part("connectors");
  NNASM_TRY(r.count(&n, flags_bytes + kStrBytes + kIntBytes, "connector count"));
  f->cnxs.resize(n);
  for (size_t k = 0; k < n; ++k) {
    FlowConnector& c = f->cnxs[k];
    NNASM_TRY(read_head(r, version, "connector", k, &c.flags, &c.name));
    NNASM_TRY(r.names(&c.links, "link count", "link", [f](const std::string& name) { return f->find_var(name); }));
  }

  if (version >= 4) {
    r.set_part("blobs");
    NNASM_TRY(r.count(&n, flags_bytes + 2 * kStrBytes + kIntBytes + 8, "blob count"));
    f->blobs.resize(n);
    for (size_t k = 0; k < n; ++k) NNASM_TRY(read_blob(r, version, k, &f->blobs[k]));
  }
  r.set_part("end");
  if (r.left() != 0)
    return r.fail(r.offset(), "trailing bytes", fmt::format("{} bytes after the last section", r.left()));
  return Status::ok();
}

}  // namespace

const char* flow_dtype_name(FlowDType t) {
  const DTypeRow* r = dtype_row(t);
  return r ? r->name : "?";
}

size_t flow_dtype_size(FlowDType t) {
  const DTypeRow* r = dtype_row(t);
  return r ? r->size : 0;
}

const std::string* flow_attr(const std::vector<FlowAttr>& attrs, const std::string& name) {
  for (auto it = attrs.rbegin(); it != attrs.rend(); ++it)
    if (it->name == name) return &it->value;
  return nullptr;
}

std::string flow_printable(const std::string& name) {
  constexpr size_t kMaxShown = 80;
  std::string s;
  for (size_t k = 0; k < name.size() && k < kMaxShown; ++k) {
    const unsigned char c = static_cast<unsigned char>(name[k]);
    s += c >= 0x20 && c < 0x7f ? std::string(1, name[k]) : fmt::format("\\x{:02x}", c);
  }
  if (name.size() > kMaxShown) s += "...";
  return s;
}

std::string flow_quote(const std::string& name) { return "'" + flow_printable(name) + "'"; }

std::string flow_shape_text(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ",")); }

Status flow_read(std::string_view bytes, const std::string& what, Flow* out) {
  *out = Flow();
  Reader r(bytes, what);
  return catch_bad_alloc([&] { return read_flow(r, out); },
                         [&] { return fmt::format("{}: byte {}: error: out of memory", what, r.offset()); });
}

}  // namespace nnasm
