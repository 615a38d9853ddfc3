// What every subcommand that takes a FILE shares: reading it as a listing or as a model file (told
// apart by the model file's magic, not by the name), the verbosity switches, and binding inputs
// from .npy files.
#include <cstring>

#include <fmt/format.h>

#include "engine/rebatch.h"
#include "serialize/listing.h"
#include "serialize/model_frame.h"
#include "serialize/model_source.h"
#include "serialize/npy.h"
#include "shell/cli/cli.h"

namespace nnasm {

namespace {
int g_verbosity = 1;

}  // namespace

std::string tensor_names(const Program& p, const std::vector<TensorId>& ids) {
  std::string s;
  for (TensorId id : ids) s += fmt::format("{}{}{}", s.empty() ? "" : ", ", p.desc(id).sigil(), p.desc(id).name);
  return s.empty() ? "none" : s;
}

void set_verbosity(int v) { g_verbosity = v; }
int verbosity() { return g_verbosity; }

Status load_program(const std::string& path, Program* p, ModelMeta* meta, bool* is_model) {
  std::string bytes;
  NNASM_TRY(read_file_limited(path, ModelLimits().max_file_bytes, &bytes));
  NNASM_TRY(check_model_bytes(bytes, path));
  const bool model = is_model_file(bytes);
  if (is_model) *is_model = model;
  if (model) {
    ModelMeta local;
    NNASM_TRY(model_decode(bytes, path, p, meta ? meta : &local));
    if (verbosity() > 1) {
      const ModelMeta& m = meta ? *meta : local;
      note_verbose("{}: model file format {}.{} by {}, {} bytes, {} tensors with values, {} to initialize, run index {}",
                   path, m.major, m.minor, m.producer, m.file_bytes, m.tensors_with_values, m.tensors_without_values,
                   m.run_index);
    }
  } else {
    NNASM_TRY(program_parse(bytes, path, p));
    NNASM_TRY(check_listing_not_empty(*p, path));
    NNASM_TRY(p->finish().with_prefix(path + ": error: "));
  }
  if (verbosity() == 0) Context::of(*p)->set_log([](const std::string&) {});
  return Status::ok();
}


Status parse_binding(const std::string& arg, const char* flag, const char* sigils, Binding* b) {
  const size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
    return Status::errorf("nnasm: error: {} '{}': expected NAME=PATH.npy", flag, arg);
  b->name = arg.substr(0, eq);
  b->path = arg.substr(eq + 1);
  if (std::strchr(sigils, b->name[0])) b->name.erase(0, 1);
  if (b->name.empty()) return Status::errorf("nnasm: error: {} '{}': expected NAME=PATH.npy", flag, arg);
  return Status::ok();
}

Status read_inputs(const Program& prog, const std::string& file, const std::vector<std::string>& args, bool all,
                   std::map<TensorId, NpyArray>* data) {
  for (const std::string& arg : args) {
    Binding b;
    NNASM_TRY(parse_binding(arg, "--in", "%", &b));
    const TensorId id = prog.find(b.name);
    if (id == NO_TENSOR)
      return Status::errorf("nnasm: error: --in {}: {} has no tensor named '{}' (its inputs: {})", b.name, file, b.name,
                            tensor_names(prog, prog.inputs()));
    const TensorDesc& d = prog.desc(id);
    if (d.role != Role::INPUT)
      return Status::errorf("nnasm: error: --in {}: {}{} is a {}, not an input (its inputs: {})", b.name, d.sigil(),
                            d.name, role_name(d.role), tensor_names(prog, prog.inputs()));
    if (data->count(id)) return Status::errorf("nnasm: error: --in {}: input %{} is given twice", b.name, d.name);
    NpyArray& a = (*data)[id];
    Status s = npy_read(b.path, &a);
    if (!s) return Status::errorf("nnasm: error: input %{}: {}", d.name, s.message());
    // A bool file read for an i32 input: its 0 and 1 as integers.
    if (a.descr == "|b1" && d.type == TensorType{DType::I32, a.type.shape}) {
      a.i32.assign(a.f32.begin(), a.f32.end());
      a.f32.clear();
      a.type.dtype = DType::I32;
    }
    if (!(a.type == d.type)) {
      const char* read_as = a.descr == "<i8" ? " (int64, narrowed)" : a.descr == "|b1" ? " (bool, as 0 and 1)" : "";
      return Status::errorf("nnasm: error: input %{}: {} holds {}{}, but %{} is {}", d.name, b.path, a.type.str(), read_as,
                            d.name, d.type.str());
    }
  }
  if (!all) return Status::ok();
  std::vector<TensorId> missing;
  for (TensorId id : prog.inputs())
    if (!data->count(id)) missing.push_back(id);
  if (!missing.empty())
    return Status::errorf("nnasm: error: input{} {} {} not given (use --in {}=PATH.npy)", missing.size() == 1 ? "" : "s",
                          tensor_names(prog, missing), missing.size() == 1 ? "is" : "are", prog.desc(missing[0]).name);
  return Status::ok();
}

void copy_inputs(Context& ctx, const std::map<TensorId, NpyArray>& data) {
  for (const auto& [id, a] : data) {
    Tensor& t = ctx.at(id);
    const DType dt = a.type.dtype;
    const void* src = dt == DType::F32                        ? static_cast<const void*>(a.f32.data())
                      : dt == DType::I8 || dt == DType::U8 ? static_cast<const void*>(a.bytes.data())
                                                              : static_cast<const void*>(a.i32.data());
    std::memcpy(t.storage(), src, static_cast<size_t>(t.numel()) * dtype_size(t.desc.type.dtype));
  }
}

Status at_batch(const Program& p, int64_t batch, const std::string& file, std::unique_ptr<Program>* out) {
  out->reset();
  if (batch == 0) return Status::ok();
  Result<std::unique_ptr<Program>> copy = with_batch(p, batch);
  if (!copy) return Status::errorf("nnasm: error: --batch {}: {}: {}", batch, file, copy.status().message());
  *out = std::move(*copy);
  return Status::ok();
}

Status load_run_program(const std::string& file, int64_t batch, const std::string& isa, Context& ctx, RunProgram* out) {
  NNASM_TRY(load_program(file, &out->loaded));
  NNASM_TRY(at_batch(out->loaded, batch, file, &out->rebatched));
  return apply_isa(ctx, isa);
}

}  // namespace nnasm
