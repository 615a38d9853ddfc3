// `nnasm import FILE [-o OUT.nnm] [--listing OUT.nnasm] [--shape NAME=D0,D1,...]...`: a model from
// another framework as an nnasm program. The importer is chosen by the file's content, not its
// name: Myelin's .flow files start with "flow" (serialize/flow/), anything else is read as ONNX
// (a protobuf ModelProto; serialize/onnx/). Every problem is printed, one line each, before the
// command fails, so that one run shows all that a model needs.
#include <cstring>

#include <fmt/format.h>

#include "serialize/atomic_file.h"
#include "serialize/flow/flow_import.h"
#include "serialize/listing.h"
#include "serialize/model_file.h"
#include "serialize/onnx/onnx_import.h"
#include "shell/cli/cli.h"

namespace nnasm {

namespace {

// "NAME=D0,D1,..." (dimensions positive) into `shapes`.
Status parse_shape(const std::string& arg, std::map<std::string, std::vector<int64_t>>* shapes) {
  const size_t eq = arg.rfind('=');
  const std::string bad = fmt::format("nnasm: error: --shape '{}': expected NAME=D0,D1,... with positive dimensions", arg);
  if (eq == std::string::npos || eq == 0) return Status::error(bad);
  std::vector<int64_t> dims;
  for (size_t p = eq + 1; p <= arg.size();) {
    const size_t q = std::min(arg.find(',', p), arg.size());
    const std::string d = arg.substr(p, q - p);
    char* end = nullptr;
    const long long v = std::strtoll(d.c_str(), &end, 10);
    if (d.empty() || *end != '\0' || v < 1 || v > MAX_TENSOR_ELEMENTS) return Status::error(bad);
    dims.push_back(v);
    p = q + 1;
  }
  (*shapes)[arg.substr(0, eq)] = dims;
  return Status::ok();
}

// A listing that carries its weights: params and state get their values inline.
std::string listing_with_values(Program& p) {
  for (TensorId id : p.tensors()) {
    Tensor& t = Context::of(p)->at(id);
    if ((t.desc.role == Role::PARAM || t.desc.role == Role::STATE) && !t.data.empty())
      t.desc.values.assign(t.f32(), t.f32() + t.numel());
  }
  return program_print(p);
}

// Prints the report of an import: every problem (an error), the notes — those about the graph's
// inputs and outputs (renamed, narrowed), which a user needs to run the model, always; the other
// renamings only with --verbose — and what came in. `what`: "nodes" or "operations".
Status print_report(const ImportOptions& o, const Status& s, const ImportReport& report, const Program& p, const char* what) {
  for (const std::string& line : report.problems) fmt::print(stderr, "{}: error: {}\n", o.file, line);
  if (!s) return s;
  if (!report.complete()) return Status::errorf("{}: error: {} of {} {} not imported", o.file, report.problems.size(), report.nodes, what);
  size_t hidden = 0;
  for (const std::string& line : report.notes) {
    if (line.rfind("graph ", 0) == 0 || line.rfind("input ", 0) == 0) note("{}", line);
    else if (verbosity() >= 2) note_verbose("{}", line);
    else ++hidden;
  }
  if (hidden) note("{} other note{} (--verbose lists them)", hidden, hidden == 1 ? "" : "s");
  size_t params = 0;
  for (TensorId id : p.tensors()) params += p.desc(id).role == Role::PARAM;
  fmt::print("{}: imported {} of {} {} as {} instruction{}; inputs {}; outputs {}; {} param{}\n", o.file,
             report.imported, report.nodes, what, p.code().size(), p.code().size() == 1 ? "" : "s",
             tensor_names(p, p.inputs()), tensor_names(p, p.outputs()), params, params == 1 ? "" : "s");
  return Status::ok();
}

Status import_onnx(const ImportOptions& o, const std::string& bytes, Program* p) {
  OnnxImportOptions opt;
  for (const std::string& s : o.shapes) NNASM_TRY(parse_shape(s, &opt.shapes));
  ImportReport report;
  OnnxGraphInfo info;
  const Status s = onnx_import(bytes, o.file, opt, p, &report, &info);
  return print_report(o, s, report, *p, "nodes");
}

Status import_flow(const ImportOptions& o, const std::string& bytes, Program* p) {
  if (!o.shapes.empty()) return Status::errorf("nnasm: error: --shape is for ONNX models; a .flow file takes --batch");
  FlowImportOptions opt;
  opt.function = o.function;
  opt.batch = o.batch > 0 ? o.batch : 1;
  opt.weights_as_params = o.weights_as_params;
  ImportReport report;
  const Status s = flow_import_bytes(bytes, o.file, p, &report, opt);
  return print_report(o, s, report, *p, "operations");
}

}  // namespace

Status cmd_import(const ImportOptions& o) {
  std::string bytes;
  NNASM_TRY(read_file_limited(o.file, ModelLimits().max_file_bytes, &bytes));
  Context ctx;
  Program p(ctx);
  const bool flow = bytes.compare(0, 4, "flow") == 0;
  if (!flow && (!o.function.empty() || o.weights_as_params))
    return Status::errorf("nnasm: error: --function and --weights-as-params are for .flow files");
  NNASM_TRY(flow ? import_flow(o, bytes, &p) : import_onnx(o, bytes, &p));
  std::unique_ptr<Program> rebatched;
  if (!flow) NNASM_TRY(at_batch(p, o.batch, o.file, &rebatched));
  if (rebatched) note("written at batch {}", o.batch);
  Program& out = rebatched ? *rebatched : p;
  if (!o.out.empty()) NNASM_TRY(model_save(out, o.out));
  if (!o.listing.empty()) {
    // With a model file the listing names the weights it holds (edit, then `nnasm build LISTING
    // --weights OUT.nnm`); alone, it carries them.
    const std::string text = o.out.empty() ? listing_with_values(out) : program_print(out);
    NNASM_TRY(write_file_atomic(o.listing, text));
  }
  if (o.out.empty() && o.listing.empty()) note("nothing written (give -o OUT.nnm and/or --listing OUT.nnasm)");
  return Status::ok();
}

}  // namespace nnasm
