// One ONNX backend node test through the importer and the executor (node_case.h).
#include "tests/onnx/node_case.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "engine/executor.h"
#include "serialize/model_file.h"
#include "serialize/onnx/onnx_import.h"

namespace nnasm {

namespace {

constexpr double RTOL = 1e-3, ATOL = 1e-7;
constexpr uint64_t MAX_TEST_FILE_BYTES = uint64_t(1) << 30;

// One import of the test's model, with the context and program it filled.
struct Attempt {
  Context ctx;
  Program p{ctx};
  ImportReport report;
  OnnxGraphInfo info;
  Status status;
};

std::unique_ptr<Attempt> import(const std::string& bytes, const OnnxImportOptions& o) {
  auto a = std::make_unique<Attempt>();
  a->ctx.set_log([](const std::string&) {});
  a->status = onnx_import(bytes, "model.onnx", o, &a->p, &a->report, &a->info);
  return a;
}

NodeCaseResult finish(NodeCaseResult r, NodeCaseResult::Outcome o, std::string reason) {
  r.outcome = o;
  r.reason = std::move(reason);
  return r;
}

std::vector<std::string> data_sets(const std::string& dir) {
  std::vector<std::string> v;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().rfind("test_data_set_", 0) == 0) v.push_back(it->path().string());
  std::sort(v.begin(), v.end());
  return v;
}

bool exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

Status read_tensor(const std::string& path, HostTensor* t) {
  std::string bytes;
  NNASM_TRY(read_file_limited(path, MAX_TEST_FILE_BYTES, &bytes));
  return onnx_decode_tensor(bytes, path, t);
}

// Empty when `got` (a program tensor) matches `want`; else what differs.
std::string compare(const std::string& name, const Tensor& got, const HostTensor& want) {
  const Shape& s = got.desc.type.shape;
  const std::vector<int64_t> dims(s.dims.begin(), s.dims.begin() + s.rank);
  if (dims != want.dims)
    return fmt::format("output '{}': shape [{}], expected [{}]", name, fmt::join(dims, ","), fmt::join(want.dims, ","));
  if (!want.has_values) return fmt::format("output '{}': the expected values are {}", name, onnx_type_name(want.type));
  const bool f32 = got.desc.type.dtype == DType::F32;
  // BOOL is held as f32 0 and 1: each must be the expected false or true exactly.
  if (f32 && want.type == OnnxType::BOOL) {
    for (int64_t k = 0; k < want.numel(); ++k)
      if (got.f32()[k] != static_cast<float>(want.i[k]))
        return fmt::format("output '{}'[{}]: {}, expected {}", name, k, got.f32()[k], want.i[k] ? "true (1)" : "false (0)");
    return "";
  }
  if (f32 != want.is_float())
    return fmt::format("output '{}': {} values, expected {}", name, dtype_name(got.desc.type.dtype), onnx_type_name(want.type));
  const DType dt = got.desc.type.dtype;
  for (int64_t k = 0; k < want.numel(); ++k) {
    if (dt == DType::I8 || dt == DType::U8) {
      const int64_t g = dt == DType::I8 ? int64_t(static_cast<const int8_t*>(got.storage())[k])
                                        : int64_t(static_cast<const uint8_t*>(got.storage())[k]);
      if (g != want.i[k]) return fmt::format("output '{}'[{}]: {}, expected {}", name, k, g, want.i[k]);
      continue;
    }
    if (!f32) {
      if (got.i32()[k] != want.i[k]) return fmt::format("output '{}'[{}]: {}, expected {}", name, k, got.i32()[k], want.i[k]);
      continue;
    }
    const double g = got.f32()[k], w = want.f[k];
    const bool ok = (std::isnan(g) && std::isnan(w)) || g == w || std::fabs(g - w) <= ATOL + RTOL * std::fabs(w);
    if (!ok) return fmt::format("output '{}'[{}]: {}, expected {}", name, k, g, w);
  }
  return "";
}

}  // namespace

const char* outcome_name(NodeCaseResult::Outcome o) {
  switch (o) {
    case NodeCaseResult::PASSED: return "passed";
    case NodeCaseResult::FAILED: return "failed";
    case NodeCaseResult::UNSUPPORTED: return "unsupported";
  }
  return "?";
}

NodeCaseResult run_node_case(const std::string& dir) {
  NodeCaseResult r;
  std::string bytes;
  Status s = read_file_limited(dir + "/model.onnx", MAX_TEST_FILE_BYTES, &bytes);
  OnnxModel m;
  if (s) s = onnx_decode(bytes, dir + "/model.onnx", &m);
  if (!s) return finish(r, NodeCaseResult::FAILED, s.message());
  std::set<std::string> ops, initialized;
  for (const OnnxNode& n : m.graph.nodes) ops.insert(n.op_type);
  r.op_types.assign(ops.begin(), ops.end());
  for (const OnnxInitializer& in : m.graph.initializers) initialized.insert(in.name);
  std::vector<std::string> inputs;
  for (const OnnxValueInfo& v : m.graph.inputs)
    if (!initialized.count(v.name)) inputs.push_back(v.name);
  // A sequence or optional input's file is no TensorProto: none is read, and the importer
  // reports the input.
  const bool tensors_only =
      std::all_of(m.graph.inputs.begin(), m.graph.inputs.end(), [](const OnnxValueInfo& v) { return v.is_tensor; });

  const std::vector<std::string> sets = data_sets(dir);
  if (sets.empty()) return finish(r, NodeCaseResult::FAILED, "no test_data_set_* directory");
  for (const std::string& set : sets) {
    std::map<std::string, HostTensor> values;
    for (size_t k = 0; tensors_only && k < inputs.size() && exists(fmt::format("{}/input_{}.pb", set, k)); ++k) {
      s = read_tensor(fmt::format("{}/input_{}.pb", set, k), &values[inputs[k]]);
      if (!s) return finish(r, NodeCaseResult::FAILED, s.message());
    }
    // Integer inputs are constants first; then any input a node needed known at import time.
    // BOOL ones are bound at run time, as f32 0 and 1.
    OnnxImportOptions options;
    for (const auto& [name, t] : values)
      if (onnx_type_is_integer(t.type) && t.type != OnnxType::BOOL) options.constant_inputs[name] = t;
    // Each import may name inputs that nodes further on need as constants (a Dropout's ratio,
    // then its training_mode): again until no new one is named.
    std::unique_ptr<Attempt> a = import(bytes, options);
    for (bool more = true; !a->status && more;) {
      more = false;
      for (const std::string& name : a->info.needed_constant)
        if (values.count(name) && !options.constant_inputs.count(name)) {
          options.constant_inputs[name] = values[name];
          more = true;
        }
      if (more) a = import(bytes, options);
    }
    if (!a->status)
      return a->report.problems.empty() ? finish(r, NodeCaseResult::FAILED, a->status.message())
                                        : finish(r, NodeCaseResult::UNSUPPORTED, a->report.problems[0]);
    for (const Instruction& ins : a->p.code())
      if (ins.op == Opcode::DROPOUT)
        return finish(r, NodeCaseResult::UNSUPPORTED,
                      "the expected output draws a random dropout mask (training mode) that only ONNX's reference "
                      "generator reproduces");
    Result<std::unique_ptr<Executor>> ex = Executor::prepare(a->p);
    if (!ex) return finish(r, NodeCaseResult::FAILED, ex.status().message());
    (*ex)->set_training(false);
    for (const auto& [onnx_name, t] : values) {
      const std::string& wanted = onnx_name;
      const auto it = std::find_if(a->info.inputs.begin(), a->info.inputs.end(), [&](const auto& n) { return n.first == wanted; });
      if (it == a->info.inputs.end()) continue;  // taken as a constant
      const Tensor& x = a->ctx.at(a->p.find(it->second));
      if (x.numel() != t.numel() || x.desc.type.dtype != DType::F32)
        return finish(r, NodeCaseResult::FAILED, fmt::format("input '{}' does not fit %{}", onnx_name, x.desc.name));
      if (t.type == OnnxType::BOOL) std::transform(t.i.begin(), t.i.end(), x.f32(), [](int64_t v) { return v ? 1.f : 0.f; });
      else std::memcpy(x.storage(), t.f.data(), t.f.size() * sizeof(float));
    }
    (*ex)->run();
    for (size_t k = 0; k < a->info.outputs.size(); ++k) {
      HostTensor want;
      s = read_tensor(fmt::format("{}/output_{}.pb", set, k), &want);
      if (!s) return finish(r, NodeCaseResult::FAILED, s.message());
      const std::string diff = compare(a->info.outputs[k].first, a->ctx.at(a->p.find(a->info.outputs[k].second)), want);
      if (!diff.empty()) return finish(r, NodeCaseResult::FAILED, diff);
    }
  }
  return finish(r, NodeCaseResult::PASSED, "");
}

}  // namespace nnasm
