// The runtime's tensor map and its settings.
#include "engine/context.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "engine/usable_cpus.h"
#include "ops/op.h"

namespace nnasm {

Context::Context(uint64_t seed) : TensorMap(op_semantics()), seed_(seed) {
  std::string warning;
  jit_ = jit_config_from_env(&warning);
  if (!warning.empty()) log(warning);
  int n = usable_cpus().threads;
  if (const char* env = std::getenv("NNASM_THREADS"); env && *env) {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (*end == 0 && v >= 1) n = static_cast<int>(std::min(v, 256L));
    else log(std::string("NNASM_THREADS=") + env + " is not a positive integer; ignored");
  }
  set_threads(n);
  if (const char* env = std::getenv("NNASM_OPT"); env && *env) {
    if ((env[0] == '0' || env[0] == '1') && env[1] == 0) opt_level_ = env[0] - '0';
    else log(std::string("NNASM_OPT=") + env + " is not 0 or 1; ignored");
  }
  if (const char* env = std::getenv("NNASM_FLUSH_DENORMALS"); env && *env) {
    if ((env[0] == '0' || env[0] == '1') && env[1] == 0) flush_denormals_ = env[0] == '1';
    else log(std::string("NNASM_FLUSH_DENORMALS=") + env + " is not 0 or 1; ignored");
  }
}

void Context::set_threads(int n) {
  n = std::clamp(n, 1, 256);
  if (n != threads_) pool_.reset();
  threads_ = n;
}

const std::shared_ptr<ThreadPool>& Context::thread_pool() {
  if (!pool_)
    pool_ = parallel_for_ ? std::make_shared<ThreadPool>(threads_, parallel_for_, parallel_for_user_)
                          : std::make_shared<ThreadPool>(threads_, spin_us_);
  return pool_;
}

void Context::set_parallel_for(ThreadPool::ExternalFn fn, void* user) {
  parallel_for_ = fn;
  parallel_for_user_ = user;
  pool_.reset();
}

void Context::set_pool_spin_us(int us) {
  spin_us_ = us;
  pool_.reset();
}

void Context::log(const std::string& msg) const {
  if (log_) log_(msg);
  else std::fprintf(stderr, "nnasm: %s\n", msg.c_str());
}

Context* Context::of(const Program& p) {
  TensorMap& m = p.tensor_map();
  return m.stores_values() ? static_cast<Context*>(&m) : nullptr;
}

Tensor& Context::add(TensorDesc desc) {
  desc.id = next_id();
  Tensor& t = tensors_[desc.id];
  t.desc = std::move(desc);
  return t;
}

Tensor* Context::find(TensorId id) {
  auto it = tensors_.find(id);
  return it == tensors_.end() ? nullptr : &it->second;
}

const Tensor* Context::find(TensorId id) const {
  auto it = tensors_.find(id);
  return it == tensors_.end() ? nullptr : &it->second;
}

TensorDesc* Context::find_desc(TensorId id) {
  Tensor* t = find(id);
  return t ? &t->desc : nullptr;
}

const TensorDesc* Context::find_desc(TensorId id) const {
  const Tensor* t = find(id);
  return t ? &t->desc : nullptr;
}

}  // namespace nnasm
