// The C API (api/nnasm.h) over the engine: a model is a context, its program and a prepared
// template executor that never runs; an instance is Executor::instantiate of that template. Every
// entry point catches everything, so no exception crosses into C; failures set the calling
// thread's last error.
#include "api/nnasm.h"

#include <atomic>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/executor.h"
#include "engine/version.h"
#include "serialize/listing.h"
#include "serialize/model_file.h"
#include "serialize/model_frame.h"
#include "serialize/model_source.h"

namespace {

using nnasm::Status;
using nnasm::TensorId;

thread_local std::string t_last_error;

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

// Runs `body` (returning nnasm_status), turning any escaping exception into a status. Built
// without exceptions (make check-noexcept) there is nothing to catch: the engine reports every
// failure as a Status, and only a failed allocation, which then ends the process, is left.
template <typename F>
nnasm_status guarded(F&& body) {
#if defined(__cpp_exceptions)
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(NNASM_ERR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return fail(NNASM_ERR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(NNASM_ERR_INTERNAL, "internal error");
  }
#else
  return body();
#endif
}

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
    io.info.dtype = d.type.dtype == nnasm::DType::I32 ? NNASM_I32 : NNASM_F32;
    io.info.rank = d.type.shape.rank;
    for (int k = 0; k < d.type.shape.rank; ++k) io.info.dims[k] = d.type.shape[k];
    io.info.bytes = static_cast<size_t>(d.type.shape.numel()) * nnasm::dtype_size(d.type.dtype);
    io.info.buffer_bytes = nnasm::storage_bytes(d.type);
    v.push_back(std::move(io));
  }
  for (Io& io : v) io.info.name = io.name.c_str();  // after the vector stopped moving
  return v;
}

nnasm_status load(std::string_view bytes, const std::string& what, const nnasm_model_options* opts,
                  nnasm_model** out) {
  if (!out) return fail(NNASM_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = nullptr;
  nnasm_model_options o;
  nnasm_model_options_init(&o);
  if (opts) {
    if (opts->abi_version != NNASM_ABI_VERSION)
      return fail(NNASM_ERR_ABI, fmt::format("options from nnasm.h ABI version {}, this library has {} (call "
                                             "nnasm_model_options_init)",
                                             opts->abi_version, NNASM_ABI_VERSION));
    o = *opts;
  }
  if (o.threads < 1 || o.threads > 256) return fail(NNASM_ERR_INVALID_ARGUMENT, fmt::format("threads {}: expected 1 to 256", o.threads));
  auto m = std::make_unique<nnasm_model>();
  nnasm::JitConfig jit = m->ctx.jit();
  if (o.isa && !nnasm::isa_from_name(o.isa, &jit.cap))
    return fail(NNASM_ERR_INVALID_ARGUMENT, fmt::format("isa '{}': expected avx512, avx2 or ref", o.isa));
  jit.enabled = o.jit != 0;
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
  if (o.log) {
    const nnasm_log_fn fn = o.log;
    void* user = o.log_user;
    m->ctx.set_log([fn, user](const std::string& msg) { fn(user, msg.c_str()); });
  } else {
    m->ctx.set_log([](const std::string&) {});
  }
  Status s = nnasm::check_model_bytes(bytes, what);
  if (s && nnasm::is_model_file(bytes)) {
    s = nnasm::model_decode(bytes, what, &m->program);
  } else if (s) {
    s = nnasm::program_parse(bytes, what, &m->program);
    if (s) s = nnasm::check_listing_not_empty(m->program, what);
  }
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
  *out = m.release();
  return NNASM_OK;
}

// The index of `name` in `ios`, or -1. No allocation.
int find(const std::vector<Io>& ios, const char* name) {
  for (size_t i = 0; i < ios.size(); ++i)
    if (ios[i].name == name) return static_cast<int>(i);
  return -1;
}

nnasm_status info_at(const nnasm_model* m, std::vector<Io> nnasm_model::*ios, size_t i, nnasm_tensor_info* info,
                     const char* what) {
  if (!m || !info) return fail(NNASM_ERR_INVALID_ARGUMENT, "model or info is NULL");
  const std::vector<Io>& v = m->*ios;
  if (i >= v.size()) return fail(NNASM_ERR_NOT_FOUND, fmt::format("{} {}: the model has {}", what, i, v.size()));
  *info = v[i].info;
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
const char* nnasm_last_error(void) { return t_last_error.c_str(); }

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

void nnasm_model_options_init(nnasm_model_options* o) {
  if (!o) return;
  std::memset(o, 0, sizeof *o);
  o->abi_version = NNASM_ABI_VERSION;
  o->threads = 1;
  o->jit = 1;
}

nnasm_status nnasm_model_load_file(const char* path, const nnasm_model_options* opts, nnasm_model** out) {
  return guarded([&] {
    if (out) *out = nullptr;
    if (!path) return fail(NNASM_ERR_INVALID_ARGUMENT, "path is NULL");
    std::string bytes;
    const Status s = nnasm::read_file_limited(path, nnasm::ModelLimits().max_file_bytes, &bytes);
    if (!s) return fail(NNASM_ERR_IO, s.message());
    return load(bytes, path, opts, out);
  });
}

nnasm_status nnasm_model_load_memory(const void* data, size_t size, const nnasm_model_options* opts, nnasm_model** out) {
  return guarded([&] {
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

nnasm_status nnasm_model_input_info(const nnasm_model* m, size_t index, nnasm_tensor_info* info) {
  return guarded([&] { return info_at(m, &nnasm_model::inputs, index, info, "input"); });
}

nnasm_status nnasm_model_output_info(const nnasm_model* m, size_t index, nnasm_tensor_info* info) {
  return guarded([&] { return info_at(m, &nnasm_model::outputs, index, info, "output"); });
}

nnasm_status nnasm_model_instruction_count(const nnasm_model* m, size_t* count) {
  if (!m || !count) return fail(NNASM_ERR_INVALID_ARGUMENT, "model or count is NULL");
  *count = m->instructions;
  return NNASM_OK;
}

nnasm_status nnasm_instance_create(nnasm_model* m, nnasm_instance** out) {
  return guarded([&] {
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
  return guarded([&] {
    if (!data || !bytes) return fail(NNASM_ERR_INVALID_ARGUMENT, "data or bytes is NULL");
    return lookup(in, name, true, true, data, bytes);
  });
}

nnasm_status nnasm_instance_bind(nnasm_instance* in, const char* name, void* buffer, size_t bytes) {
  return guarded([&] {
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
  return guarded([&] {
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
  if (!in || !info) return fail(NNASM_ERR_INVALID_ARGUMENT, "instance or info is NULL");
  const std::vector<Io>& v = io_of(in).inputs;
  if (index >= v.size()) return fail(NNASM_ERR_NOT_FOUND, fmt::format("input {}: the model has {}", index, v.size()));
  *info = v[index].info;
  return NNASM_OK;
}

nnasm_status nnasm_instance_output_info(const nnasm_instance* in, size_t index, nnasm_tensor_info* info) {
  if (!in || !info) return fail(NNASM_ERR_INVALID_ARGUMENT, "instance or info is NULL");
  const std::vector<Io>& v = io_of(in).outputs;
  if (index >= v.size()) return fail(NNASM_ERR_NOT_FOUND, fmt::format("output {}: the model has {}", index, v.size()));
  *info = v[index].info;
  return NNASM_OK;
}

}  // extern "C"
