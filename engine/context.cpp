// The per-model tensor map and its id generator.
#include "engine/context.h"

#include <cstdio>
#include <random>

namespace nnasm {
namespace {
uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
}  // namespace

Context::Context(uint64_t seed) : seed_(seed) {
  std::random_device rd;
  id_state_ = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  std::string warning;
  jit_ = jit_config_from_env(&warning);
  if (!warning.empty()) log(warning);
}

void Context::log(const std::string& msg) const {
  if (log_) log_(msg);
  else std::fprintf(stderr, "nnasm: %s\n", msg.c_str());
}

TensorId Context::next_id() {
  for (;;) {
    TensorId id = splitmix64(id_state_);
    if (id != NO_TENSOR && !tensors_.count(id)) return id;
  }
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

}  // namespace nnasm
