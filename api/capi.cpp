// The C API (api/nnasm.h) over the engine: a model is a context, its program and a prepared
// template executor that never runs; an instance is Executor::instantiate of that template. Every
// entry point catches everything, so no exception crosses into C; failures set the calling
// thread's last error. The version-1 ABI (no struct_size, a log callback without a level) is kept
// here beside the current one: see "Version 1" below.
#include "api/nnasm.h"
// This file defines the version-1 symbols that nnasm.h maps to their growable successors.
#undef nnasm_model_options_init
#undef nnasm_model_input_info
#undef nnasm_model_output_info

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "api/capi_internal.h"
#include "engine/executor.h"
#include "engine/version.h"
#include "serialize/listing.h"
#include "serialize/model_file.h"
#include "serialize/model_frame.h"
#include "serialize/model_source.h"

namespace nnasm::capi {

namespace {
thread_local std::string t_last_error;
}  // namespace

nnasm_status fail(nnasm_status code, const std::string& msg) {
#if defined(__cpp_exceptions)
  try {
    t_last_error = msg;
  } catch (...) {  // no memory for the message: the code still says what happened
  }
#else
  t_last_error = msg;
#endif
  return code;
}

}  // namespace nnasm::capi

namespace {

using nnasm::Status;
using nnasm::TensorId;
using nnasm::capi::fail;
using nnasm::capi::guarded;

// Version 1 of the structs, as a host built against that nnasm.h lays them out. Its options are
// version 2's without log_level (version 2 appended it and kept every other field at its offset),
// except that they began with abi_version (= 1) where struct_size is now and that their log
// callback took no level. Its tensor infos had no struct_size.
constexpr uint32_t ABI_V1 = 1;
constexpr size_t OPTIONS_V1_SIZE = offsetof(nnasm_model_options, log_level);
using LogFnV1 = void (*)(void* user, const char* message);
static_assert(sizeof(void*) != 8 || OPTIONS_V1_SIZE == 80, "version 1's options were 80 bytes on 64-bit hosts");
struct TensorInfoV1 {
  const char* name;
  int32_t dtype;
  int rank;
  int64_t dims[NNASM_MAX_RANK];
  size_t bytes;
  size_t buffer_bytes;
};

// Where a struct_size-led struct starts to be one (its first sized version's fields), and the
// largest struct_size believed (more is an uninitialized struct, not a newer header).
constexpr size_t OPTIONS_MIN = offsetof(nnasm_model_options, log_level) + sizeof(nnasm_log_level);
constexpr size_t TENSOR_INFO_MIN = offsetof(nnasm_tensor_info, name) + sizeof(const char*);
constexpr size_t METADATA_MIN = offsetof(nnasm_model_metadata_info, isa) + sizeof(nnasm_isa);
constexpr uint32_t STRUCT_SIZE_MAX = 4096;
static_assert(int(nnasm::Isa::REF) == NNASM_ISA_REF && int(nnasm::Isa::AVX2) == NNASM_ISA_AVX2 &&
                  int(nnasm::Isa::AVX512) == NNASM_ISA_AVX512,
              "nnasm_isa numbers the levels as jit/cpu.h does");

// Checks a struct_size the caller gave for a `what` of which this library knows `known` bytes.
nnasm_status check_struct_size(uint32_t size, size_t min, const char* what) {
  if (size < min)
    return fail(NNASM_ERR_ABI, fmt::format("{}: struct_size {} is smaller than any version's ({} bytes or more): set it "
                                           "to sizeof the struct{}",
                                           what, size, min,
                                           std::strcmp(what, "options") == 0 ? " (nnasm_model_options_init does)" : ""));
  if (size > STRUCT_SIZE_MAX)
    return fail(NNASM_ERR_ABI, fmt::format("{}: struct_size {} is larger than any struct (uninitialized?): set it to "
                                           "sizeof the struct",
                                           what, size));
  return NNASM_OK;
}

// Writes `full` into the caller's `dst` as far as its struct_size reaches, zeroes what lies past
// this library's struct, and sets dst->struct_size to the part that holds fields.
template <typename T>
nnasm_status write_sized(T* dst, T full, size_t min, const char* what) {
  uint32_t size = 0;
  std::memcpy(&size, dst, sizeof size);
  if (nnasm_status s = check_struct_size(size, min, what)) return s;
  const size_t n = std::min<size_t>(size, sizeof(T));
  full.struct_size = static_cast<uint32_t>(n);
  std::memcpy(dst, &full, n);
  if (size > n) std::memset(reinterpret_cast<char*>(dst) + n, 0, size - n);
  return NNASM_OK;
}

// Reads the caller's options (NULL: defaults) of either version into `o`; `v1_log` says the log
// callback is version 1's.
nnasm_status read_options(const nnasm_model_options* in, nnasm_model_options* o, bool* v1_log) {
  nnasm_model_options_init_sized(o, sizeof *o);
  *v1_log = false;
  if (!in) return NNASM_OK;
  uint32_t first = 0;
  std::memcpy(&first, in, sizeof first);
  if (first == ABI_V1) {  // the default level: version 1's log received everything
    std::memcpy(o, in, OPTIONS_V1_SIZE);
    o->struct_size = sizeof *o;
    *v1_log = true;
    return NNASM_OK;
  }
  if (nnasm_status s = check_struct_size(first, OPTIONS_MIN, "options")) return s;
  const char* bytes = reinterpret_cast<const char*>(in);
  for (size_t k = sizeof *o; k < first; ++k)
    if (bytes[k] != 0)
      return fail(NNASM_ERR_ABI, fmt::format("options: byte {} of {} is set, past the {} this library (nnasm {}, ABI "
                                             "version {}) knows: a newer nnasm.h's option; use a newer library or "
                                             "leave it 0",
                                             k, first, sizeof *o, NNASM_VERSION_STRING, NNASM_ABI_VERSION));
  std::memcpy(o, in, std::min<size_t>(first, sizeof *o));
  o->struct_size = sizeof *o;
  return NNASM_OK;
}

// Where the model's log goes: the host's callback of either version, filtered by level.
struct LogSink {
  nnasm_log_fn fn = nullptr;
  void* user = nullptr;
  bool v1 = false;
  nnasm_log_level level = NNASM_LOG_OFF;
  void operator()(nnasm_log_level l, const std::string& msg) const {
    if (!fn || l > level || l <= NNASM_LOG_OFF) return;
    // Back to the type the host stored (through void (*)(void), which converts to and from any).
    if (v1) reinterpret_cast<LogFnV1>(reinterpret_cast<void (*)(void)>(fn))(user, msg.c_str());
    else fn(user, l, msg.c_str());
  }
};

struct Io {
  std::string name;
  TensorId id;
  nnasm_tensor_info info;
};

}  // namespace

struct nnasm_model {
  std::atomic<int> refs{1};
  nnasm::Context ctx;
  nnasm::Program program{ctx};
  std::unique_ptr<nnasm::Executor> templ;
  std::vector<Io> inputs, outputs;
  size_t instructions = 0;
  std::string producer;
  bool carried_state = false;
  // Held while the context's tensor map changes (an instance prepared at another batch, or its
  // executor freed) or is read to make an instance; runs never touch the map.
  std::mutex map_lock;
};

struct nnasm_instance {
  nnasm_model* model;
  std::unique_ptr<nnasm::Executor> ex;
  std::vector<void*> in_data, out_data;  // by the model's input and output index
  bool outputs_ready = false;  // a run has finished and no run_steps run is under way
  // After nnasm_instance_set_batch: ex is prepared from a copy at that batch, whose inputs and
  // outputs these describe.
  bool rebatched = false;
  std::vector<Io> inputs, outputs;
};

namespace {
// The inputs and outputs an instance runs with.
struct IoView {
  const std::vector<Io>& inputs;
  const std::vector<Io>& outputs;
};
IoView io_of(const nnasm_instance* in) {
  return in->rebatched ? IoView{in->inputs, in->outputs} : IoView{in->model->inputs, in->model->outputs};
}
}  // namespace

namespace {

void release(nnasm_model* m) {
  if (m && m->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete m;
}

std::vector<Io> describe(const nnasm::Program& p, const std::vector<TensorId>& ids) {
  std::vector<Io> v;
  for (TensorId id : ids) {
    const nnasm::TensorDesc& d = p.desc(id);
    Io io{d.name, id, {}};
    io.info.dtype = d.type.dtype == nnasm::DType::I32 ? NNASM_I32
                    : d.type.dtype == nnasm::DType::I8 ? NNASM_I8
                    : d.type.dtype == nnasm::DType::U8 ? NNASM_U8
                                                       : NNASM_F32;
    io.info.rank = d.type.shape.rank;
    for (int k = 0; k < d.type.shape.rank; ++k) io.info.dims[k] = d.type.shape[k];
    io.info.bytes = static_cast<size_t>(d.type.shape.numel()) * nnasm::dtype_size(d.type.dtype);
    io.info.buffer_bytes = nnasm::storage_bytes(d.type);
    v.push_back(std::move(io));
  }
  for (Io& io : v) io.info.name = io.name.c_str();  // after the vector stopped moving
  return v;
}

}  // namespace

nnasm_status nnasm::capi::load_program(const nnasm_model_options* opts, const std::string& what,
                                       const FillProgram& fill, nnasm_model** out) {
  if (!out) return fail(NNASM_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = nullptr;
  nnasm_model_options o;
  bool v1_log = false;
  if (nnasm_status st = read_options(opts, &o, &v1_log)) return st;
  if (o.threads < 1 || o.threads > 256) return fail(NNASM_ERR_INVALID_ARGUMENT, fmt::format("threads {}: expected 1 to 256", o.threads));
  if (o.log_level < NNASM_LOG_OFF || o.log_level > NNASM_LOG_DEBUG)
    return fail(NNASM_ERR_INVALID_ARGUMENT, fmt::format("log_level {}: expected NNASM_LOG_OFF (0) to NNASM_LOG_DEBUG (4)",
                                                        o.log_level));
  auto m = std::make_unique<nnasm_model>();
  nnasm::JitConfig jit = m->ctx.jit();
  if (o.isa && !nnasm::isa_from_name(o.isa, &jit.cap))
    return fail(NNASM_ERR_INVALID_ARGUMENT, fmt::format("isa '{}': expected avx512, avx2 or ref", o.isa));
  // NNASM_JIT=0 in the environment (the context's default) turns generated code off for every
  // host; the option can only turn it off as well.
  jit.enabled = jit.enabled && o.jit != 0;
  m->ctx.set_jit(jit);
  m->ctx.set_threads(o.threads);
  if (o.alloc || o.free) {
    if (!o.alloc || !o.free) return fail(NNASM_ERR_INVALID_ARGUMENT, "alloc and free go together");
    nnasm::HostAllocator a;
    a.alloc = o.alloc;
    a.free = o.free;
    a.user = o.alloc_user;
    m->ctx.set_allocator(a);
  }
  if (o.parallel_for) m->ctx.set_parallel_for(o.parallel_for, o.parallel_user);
  else m->ctx.set_pool_spin_us(0);  // a host's threads own the cores: ours sleep between jobs
  const LogSink log{o.log, o.log_user, v1_log, o.log_level};
  // What the engine reports on its own is a fallback it took (a kernel not generated): a warning.
  m->ctx.set_log([log](const std::string& msg) { log(NNASM_LOG_WARN, msg); });
  Status s = fill(&m->program, &m->producer);
  if (s) s = m->program.finish();
  if (!s) return fail(NNASM_ERR_BAD_MODEL, s.message());
  m->program.set_training(false);
  nnasm::Result<std::unique_ptr<nnasm::Executor>> ex = nnasm::Executor::prepare(m->program);
  if (!ex) {
    const std::string msg = ex.status().message();
    return fail(msg.find("cannot allocate") != std::string::npos ? NNASM_ERR_OUT_OF_MEMORY : NNASM_ERR_BAD_MODEL,
                what + ": " + msg);
  }
  m->templ = std::move(ex.value());
  m->templ->set_training(false);
  const nnasm::Program& run = m->templ->program();
  m->inputs = describe(run, run.inputs());
  m->outputs = describe(run, run.outputs());
  m->instructions = run.section_range(nnasm::Section::FORWARD).second - run.section_range(nnasm::Section::FORWARD).first;
  m->carried_state = !run.carried_state().empty();
  log(NNASM_LOG_INFO, fmt::format("{}: {} instructions, {} inputs, {} outputs, kernels for {}{}", what, m->instructions,
                                  m->inputs.size(), m->outputs.size(), nnasm::isa_name(m->ctx.jit().isa()),
                                  jit.enabled ? "" : " (JIT off)"));
  *out = m.release();
  return NNASM_OK;
}

namespace {

// A model file or a listing in `bytes`.
nnasm_status load(std::string_view bytes, const std::string& what, const nnasm_model_options* opts,
                  nnasm_model** out) {
  return nnasm::capi::load_program(opts, what, [&](nnasm::Program* p, std::string* producer) {
    Status s = nnasm::check_model_bytes(bytes, what);
    if (s && nnasm::is_model_file(bytes)) {
      nnasm::ModelMeta meta;
      s = nnasm::model_decode(bytes, what, p, &meta);
      *producer = meta.producer;
    } else if (s) {
      s = nnasm::program_parse(bytes, what, p);
      if (s) s = nnasm::check_listing_not_empty(*p, what);
      *producer = fmt::format("nnasm {} (listing)", NNASM_VERSION_STRING);
    }
    return s;
  }, out);
}

// The index of `name` in `ios`, or -1. No allocation.
int find(const std::vector<Io>& ios, const char* name) {
  for (size_t i = 0; i < ios.size(); ++i)
    if (ios[i].name == name) return static_cast<int>(i);
  return -1;
}

// Io `i` of `ios`, or a status; `info` is where the caller wants it.
nnasm_status io_at(const nnasm_model* m, std::vector<Io> nnasm_model::*ios, size_t i, const void* info, const char* what,
                   const Io** io) {
  if (!m || !info) return fail(NNASM_ERR_INVALID_ARGUMENT, "model or info is NULL");
  const std::vector<Io>& v = m->*ios;
  if (i >= v.size()) return fail(NNASM_ERR_NOT_FOUND, fmt::format("{} {}: the model has {}", what, i, v.size()));
  *io = &v[i];
  return NNASM_OK;
}

nnasm_status info_at(const nnasm_model* m, std::vector<Io> nnasm_model::*ios, size_t i, nnasm_tensor_info* info,
                     const char* what) {
  const Io* io = nullptr;
  if (nnasm_status s = io_at(m, ios, i, info, what, &io)) return s;
  return write_sized(info, io->info, TENSOR_INFO_MIN, "tensor info");
}

nnasm_status info_at_v1(const nnasm_model* m, std::vector<Io> nnasm_model::*ios, size_t i, TensorInfoV1* info,
                        const char* what) {
  const Io* io = nullptr;
  if (nnasm_status s = io_at(m, ios, i, info, what, &io)) return s;
  const nnasm_tensor_info& t = io->info;
  info->name = t.name;
  info->dtype = t.dtype;
  info->rank = t.rank;
  std::memcpy(info->dims, t.dims, sizeof info->dims);
  info->bytes = t.bytes;
  info->buffer_bytes = t.buffer_bytes;
  return NNASM_OK;
}

// Resolves `name` to this instance's buffer for it: an input when `input`, else an output (inputs
// are also accepted by tensor_data).
nnasm_status lookup(nnasm_instance* in, const char* name, bool inputs, bool outputs, void** data, size_t* bytes) {
  if (!in || !name) return fail(NNASM_ERR_INVALID_ARGUMENT, "instance or name is NULL");
  const IoView m = io_of(in);
  if (inputs) {
    const int i = find(m.inputs, name);
    if (i >= 0) {
      *data = in->in_data[i];
      *bytes = m.inputs[i].info.bytes;
      return NNASM_OK;
    }
  }
  if (outputs) {
    const int i = find(m.outputs, name);
    if (i >= 0) {
      *data = in->out_data[i];
      *bytes = m.outputs[i].info.bytes;
      return NNASM_OK;
    }
  }
  std::string names;
  for (const Io& io : inputs ? m.inputs : m.outputs) names += (names.empty() ? "" : ", ") + io.name;
  return fail(NNASM_ERR_NOT_FOUND, fmt::format("no {} named '{}' (the model's {}s: {})", inputs ? "input" : "output",
                                               name, inputs ? "input" : "output", names.empty() ? "none" : names));
}

// set_input (`input`: caller's bytes into the instance) and get_output (the other way).
nnasm_status copy_io(nnasm_instance* in, const char* name, bool input, void* data, size_t bytes) {
  void* tensor = nullptr;
  size_t size = 0;
  if (nnasm_status s = lookup(in, name, input, !input, &tensor, &size)) return s;
  if (!data && bytes) return fail(NNASM_ERR_INVALID_ARGUMENT, "data is NULL");
  if (bytes != size)
    return fail(NNASM_ERR_SIZE_MISMATCH,
                fmt::format("{} '{}' holds {} bytes, got {}", input ? "input" : "output", name, size, bytes));
  if (!input && !in->outputs_ready)
    return fail(NNASM_ERR_NOT_READY, fmt::format("output '{}': no run has finished on this instance yet (call "
                                                 "nnasm_instance_run first)", name));
  if (input) std::memcpy(tensor, data, bytes);
  else std::memcpy(data, tensor, bytes);
  return NNASM_OK;
}

}  // namespace

extern "C" {

const char* nnasm_version(void) { return NNASM_VERSION_STRING; }
uint32_t nnasm_abi_version(void) { return NNASM_ABI_VERSION; }
const char* nnasm_last_error(void) { return nnasm::capi::t_last_error.c_str(); }

const char* nnasm_status_string(nnasm_status s) {
  switch (s) {
    case NNASM_OK: return "ok";
    case NNASM_ERR_INVALID_ARGUMENT: return "invalid argument";
    case NNASM_ERR_NOT_FOUND: return "not found";
    case NNASM_ERR_SIZE_MISMATCH: return "size mismatch";
    case NNASM_ERR_BAD_MODEL: return "bad model";
    case NNASM_ERR_IO: return "input/output error";
    case NNASM_ERR_OUT_OF_MEMORY: return "out of memory";
    case NNASM_ERR_ABI: return "ABI mismatch";
    case NNASM_ERR_INTERNAL: return "internal error";
    case NNASM_ERR_NOT_READY: return "not ready";
  }
  return "unknown status";
}

void nnasm_model_options_init_sized(nnasm_model_options* o, size_t struct_size) {
  if (!o || struct_size < sizeof(uint32_t)) return;
  nnasm_model_options d;
  std::memset(&d, 0, sizeof d);
  d.struct_size = static_cast<uint32_t>(struct_size);
  d.threads = 1;
  d.jit = 1;
  d.log_level = NNASM_LOG_INFO;
  std::memcpy(o, &d, std::min(struct_size, sizeof d));
  if (struct_size > sizeof d) std::memset(reinterpret_cast<char*>(o) + sizeof d, 0, struct_size - sizeof d);
}

// Version 1: a host built against that nnasm.h calls it with its smaller struct.
void nnasm_model_options_init(nnasm_model_options* o) {
  nnasm_model_options_init_sized(o, OPTIONS_V1_SIZE);
  if (o) o->struct_size = ABI_V1;  // where version 1 had abi_version
}

nnasm_status nnasm_model_load_file(const char* path, const nnasm_model_options* opts, nnasm_model** out) {
  return guarded([&]() -> nnasm_status {
    if (out) *out = nullptr;
    if (!path) return fail(NNASM_ERR_INVALID_ARGUMENT, "path is NULL");
    std::string bytes;
    const Status s = nnasm::read_file_limited(path, nnasm::ModelLimits().max_file_bytes, &bytes);
    if (!s) return fail(NNASM_ERR_IO, s.message());
    return load(bytes, path, opts, out);
  });
}

nnasm_status nnasm_model_load_memory(const void* data, size_t size, const nnasm_model_options* opts, nnasm_model** out) {
  return guarded([&]() -> nnasm_status {
    if (out) *out = nullptr;
    if (!data && size) return fail(NNASM_ERR_INVALID_ARGUMENT, "data is NULL");
    return load(std::string_view(static_cast<const char*>(data), size), "<memory>", opts, out);
  });
}

void nnasm_model_free(nnasm_model* m) { release(m); }

nnasm_status nnasm_model_input_count(const nnasm_model* m, size_t* count) {
  if (!m || !count) return fail(NNASM_ERR_INVALID_ARGUMENT, "model or count is NULL");
  *count = m->inputs.size();
  return NNASM_OK;
}

nnasm_status nnasm_model_output_count(const nnasm_model* m, size_t* count) {
  if (!m || !count) return fail(NNASM_ERR_INVALID_ARGUMENT, "model or count is NULL");
  *count = m->outputs.size();
  return NNASM_OK;
}

nnasm_status nnasm_model_input_info_v2(const nnasm_model* m, size_t index, nnasm_tensor_info* info) {
  return guarded([&] { return info_at(m, &nnasm_model::inputs, index, info, "input"); });
}

nnasm_status nnasm_model_output_info_v2(const nnasm_model* m, size_t index, nnasm_tensor_info* info) {
  return guarded([&] { return info_at(m, &nnasm_model::outputs, index, info, "output"); });
}

// Version 1, for hosts built against that nnasm.h.
nnasm_status nnasm_model_input_info(const nnasm_model* m, size_t index, TensorInfoV1* info) {
  return guarded([&] { return info_at_v1(m, &nnasm_model::inputs, index, info, "input"); });
}

nnasm_status nnasm_model_output_info(const nnasm_model* m, size_t index, TensorInfoV1* info) {
  return guarded([&] { return info_at_v1(m, &nnasm_model::outputs, index, info, "output"); });
}

nnasm_status nnasm_model_instruction_count(const nnasm_model* m, size_t* count) {
  if (!m || !count) return fail(NNASM_ERR_INVALID_ARGUMENT, "model or count is NULL");
  *count = m->instructions;
  return NNASM_OK;
}

nnasm_status nnasm_model_metadata(const nnasm_model* m, nnasm_model_metadata_info* info) {
  if (!m || !info) return fail(NNASM_ERR_INVALID_ARGUMENT, "model or info is NULL");
  nnasm_model_metadata_info d;
  std::memset(&d, 0, sizeof d);
  d.isa = static_cast<nnasm_isa>(m->ctx.jit().isa());
  d.producer = m->producer.c_str();
  d.instructions = m->instructions;
  d.inputs = m->inputs.size();
  d.outputs = m->outputs.size();
  d.carried_state = m->carried_state ? 1 : 0;
  return write_sized(info, d, METADATA_MIN, "model metadata");
}

nnasm_status nnasm_instance_create(nnasm_model* m, nnasm_instance** out) {
  return guarded([&]() -> nnasm_status {
    if (!m || !out) return fail(NNASM_ERR_INVALID_ARGUMENT, "model or out is NULL");
    *out = nullptr;
    std::unique_lock<std::mutex> map_lock(m->map_lock);
    nnasm::Result<std::unique_ptr<nnasm::Executor>> ex = m->templ->instantiate();
    map_lock.unlock();
    if (!ex) return fail(NNASM_ERR_OUT_OF_MEMORY, ex.status().message());
    auto in = std::make_unique<nnasm_instance>();
    in->ex = std::move(ex.value());
    for (const Io& io : m->inputs) in->in_data.push_back(in->ex->data(io.id));
    for (const Io& io : m->outputs) in->out_data.push_back(in->ex->data(io.id));
    m->refs.fetch_add(1, std::memory_order_relaxed);
    in->model = m;
    *out = in.release();
    return NNASM_OK;
  });
}

void nnasm_instance_free(nnasm_instance* in) {
  if (!in) return;
  nnasm_model* m = in->model;
  if (in->rebatched) {
    std::lock_guard<std::mutex> map_lock(m->map_lock);
    in->ex.reset();  // its tensors leave the model's map
  }
  delete in;  // destructors free memory and never throw
  release(m);
}

nnasm_status nnasm_instance_set_input(nnasm_instance* in, const char* name, const void* data, size_t bytes) {
  return guarded([&] { return copy_io(in, name, true, const_cast<void*>(data), bytes); });
}

nnasm_status nnasm_instance_get_output(nnasm_instance* in, const char* name, void* data, size_t bytes) {
  return guarded([&] { return copy_io(in, name, false, data, bytes); });
}

nnasm_status nnasm_instance_tensor_data(nnasm_instance* in, const char* name, void** data, size_t* bytes) {
  return guarded([&]() -> nnasm_status {
    if (!data || !bytes) return fail(NNASM_ERR_INVALID_ARGUMENT, "data or bytes is NULL");
    return lookup(in, name, true, true, data, bytes);
  });
}

nnasm_status nnasm_instance_bind(nnasm_instance* in, const char* name, void* buffer, size_t bytes) {
  return guarded([&]() -> nnasm_status {
    if (!in || !name) return fail(NNASM_ERR_INVALID_ARGUMENT, "instance or name is NULL");
    const IoView m = io_of(in);
    const int i = find(m.inputs, name), o = i < 0 ? find(m.outputs, name) : -1;
    if (i < 0 && o < 0) {
      void* unused = nullptr;
      size_t n = 0;
      return lookup(in, name, true, true, &unused, &n);  // the usual "no input named" message
    }
    const Io& io = i >= 0 ? m.inputs[i] : m.outputs[o];
    if (buffer && bytes < io.info.buffer_bytes)
      return fail(NNASM_ERR_SIZE_MISMATCH, fmt::format("'{}' needs a buffer of {} bytes (its {} rounded up to 64), got {}",
                                                       name, io.info.buffer_bytes, io.info.bytes, bytes));
    const Status s = in->ex->bind(io.id, buffer);
    if (!s) return fail(NNASM_ERR_INVALID_ARGUMENT, s.message());
    (i >= 0 ? in->in_data[i] : in->out_data[o]) = in->ex->data(io.id);
    return NNASM_OK;
  });
}

nnasm_status nnasm_instance_run(nnasm_instance* in) {
  if (!in) return fail(NNASM_ERR_INVALID_ARGUMENT, "instance is NULL");
  in->ex->run();
  in->outputs_ready = true;
  return NNASM_OK;
}

nnasm_status nnasm_instance_reset_state(nnasm_instance* in) {
  if (!in) return fail(NNASM_ERR_INVALID_ARGUMENT, "instance is NULL");
  in->ex->reset_state();
  return NNASM_OK;
}

nnasm_status nnasm_instance_run_steps(nnasm_instance* in, size_t max_instructions, int* done) {
  if (!in || !done) return fail(NNASM_ERR_INVALID_ARGUMENT, "instance or done is NULL");
  *done = in->ex->run_steps(max_instructions) ? 1 : 0;
  in->outputs_ready = *done != 0;  // until then the outputs are part old, part new
  return NNASM_OK;
}

nnasm_status nnasm_instance_set_batch(nnasm_instance* in, int64_t batch) {
  return guarded([&]() -> nnasm_status {
    if (!in) return fail(NNASM_ERR_INVALID_ARGUMENT, "instance is NULL");
    if (batch < 1) return fail(NNASM_ERR_INVALID_ARGUMENT, fmt::format("batch {} is not a size: give at least 1", batch));
    std::lock_guard<std::mutex> map_lock(in->model->map_lock);
    nnasm::Result<std::unique_ptr<nnasm::Executor>> ex =
        nnasm::Executor::prepare(in->model->program, nnasm::PrepareOptions{.batch = batch});
    if (!ex) {
      const std::string msg = ex.status().message();
      return fail(msg.find("cannot allocate") != std::string::npos ? NNASM_ERR_OUT_OF_MEMORY : NNASM_ERR_INVALID_ARGUMENT, msg);
    }
    (*ex)->set_training(false);
    const nnasm::Program& run = (*ex)->program();
    in->inputs = describe(run, run.inputs());
    in->outputs = describe(run, run.outputs());
    in->ex = std::move(ex.value());
    in->rebatched = true;
    in->in_data.clear();
    in->out_data.clear();
    for (const Io& io : in->inputs) in->in_data.push_back(in->ex->data(io.id));
    for (const Io& io : in->outputs) in->out_data.push_back(in->ex->data(io.id));
    in->outputs_ready = false;
    return NNASM_OK;
  });
}

nnasm_status nnasm_instance_input_info(const nnasm_instance* in, size_t index, nnasm_tensor_info* info) {
  return guarded([&]() -> nnasm_status {
    if (!in || !info) return fail(NNASM_ERR_INVALID_ARGUMENT, "instance or info is NULL");
    const std::vector<Io>& v = io_of(in).inputs;
    if (index >= v.size()) return fail(NNASM_ERR_NOT_FOUND, fmt::format("input {}: the model has {}", index, v.size()));
    return write_sized(info, v[index].info, TENSOR_INFO_MIN, "tensor info");
  });
}

nnasm_status nnasm_instance_output_info(const nnasm_instance* in, size_t index, nnasm_tensor_info* info) {
  return guarded([&]() -> nnasm_status {
    if (!in || !info) return fail(NNASM_ERR_INVALID_ARGUMENT, "instance or info is NULL");
    const std::vector<Io>& v = io_of(in).outputs;
    if (index >= v.size()) return fail(NNASM_ERR_NOT_FOUND, fmt::format("output {}: the model has {}", index, v.size()));
    return write_sized(info, v[index].info, TENSOR_INFO_MIN, "tensor info");
  });
}

}  // extern "C"
