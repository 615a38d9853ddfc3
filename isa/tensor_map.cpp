// Fresh ids and the descriptor-only tensor map.
#include "isa/tensor_map.h"

#include <random>

namespace nnasm {

TensorId TensorMap::next_id() {
  if (!id_started_) {
    std::random_device rd;
    id_state_ = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    id_started_ = true;
  }
  for (;;) {
    uint64_t z = (id_state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    const TensorId id = z ^ (z >> 31);
    if (id != NO_TENSOR && !find_desc(id)) return id;
  }
}

TensorDesc& DescriptorMap::add_desc(TensorDesc desc) {
  desc.id = next_id();
  TensorDesc& d = descs_[desc.id];
  d = std::move(desc);
  return d;
}

TensorDesc* DescriptorMap::find_desc(TensorId id) {
  auto it = descs_.find(id);
  return it == descs_.end() ? nullptr : &it->second;
}

const TensorDesc* DescriptorMap::find_desc(TensorId id) const { return const_cast<DescriptorMap*>(this)->find_desc(id); }

}  // namespace nnasm
