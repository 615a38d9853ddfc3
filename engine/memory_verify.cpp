// The memory plan's verifier: lifetimes recounted from the code, then a sweep in program order
// over the slots live at each instruction.
#include <algorithm>
#include <functional>
#include <map>
#include <queue>
#include <unordered_set>

#include <fmt/format.h>

#include "engine/memory_plan.h"
#include "engine/tensor.h"

namespace nnasm {

namespace {

struct Life {
  size_t first = 0, last = 0;
};

std::string name_of(const Program& p, TensorId id) { return fmt::format("{}{}", p.desc(id).sigil(), p.desc(id).name); }

// `y` was written over `x` in place, as the planner may: one slot, x's last read is the
// instruction defining y, and that instruction's op allows it for some operand that is x.
bool written_in_place(const Program& p, const PlannedTensor& x, const Life& lx, const PlannedTensor& y,
                      const Life& ly) {
  if (x.offset != y.offset || x.bytes != y.bytes || lx.last != ly.first) return false;
  const Instruction& ins = p.code()[ly.first];
  for (size_t k = 0; k < ins.in.size(); ++k)
    if (ins.in[k] == x.id && may_write_in_place(p, ins, k)) return true;
  return false;
}

}  // namespace

Status verify_plan(const Program& p, const MemoryPlan& plan) {
  const Uses u(p);
  const std::vector<Instruction>& code = p.code();
  std::unordered_map<TensorId, Life> life;
  for (size_t i = 0; i < code.size(); ++i) {
    for (TensorId id : code[i].in)
      if (auto it = life.find(id); it != life.end()) it->second.last = i;
    for (TensorId id : code[i].out)
      if (!life.count(id)) life[id] = Life{i, i};
  }

  std::unordered_set<TensorId> seen;
  for (const PlannedTensor& t : plan.tensors) {
    const std::string name = name_of(p, t.id);
    if (!seen.insert(t.id).second) return Status::errorf("memory plan: {} is planned twice", name);
    if (!plannable(p, u, t.id))
      return Status::errorf("memory plan: {} is planned but is not a temporary private to the code", name);
    if (t.offset % 64) return Status::errorf("memory plan: {} at offset {} is not 64-byte aligned", name, t.offset);
    if (t.bytes != storage_bytes(p.desc(t.id).type))
      return Status::errorf("memory plan: {} has {} bytes, its type needs {}", name, t.bytes,
                            storage_bytes(p.desc(t.id).type));
    if (t.offset > plan.arena_bytes || t.bytes > plan.arena_bytes - t.offset)
      return Status::errorf("memory plan: {} at [{}, {}) is outside the arena of {} bytes", name, t.offset,
                            t.offset + t.bytes, plan.arena_bytes);
  }

  // A sweep in order of definition over the slots live at that instruction, kept by offset. They
  // never overlap one another (a slot written over in place gives its place to the new one), so
  // a new slot meets only its neighbours, and each meeting is an error or a hand-over.
  std::vector<const PlannedTensor*> by_first;
  for (const PlannedTensor& t : plan.tensors) by_first.push_back(&t);
  std::sort(by_first.begin(), by_first.end(), [&](const PlannedTensor* a, const PlannedTensor* b) {
    return life.at(a->id).first < life.at(b->id).first;
  });
  std::map<size_t, const PlannedTensor*> live;  // offset → slot
  using Ending = std::pair<size_t, const PlannedTensor*>;  // last read, slot
  std::priority_queue<Ending, std::vector<Ending>, std::greater<Ending>> endings;
  for (const PlannedTensor* t : by_first) {
    const Life& lt = life.at(t->id);
    for (; !endings.empty() && endings.top().first < lt.first; endings.pop()) {
      auto it = live.find(endings.top().second->offset);
      if (it != live.end() && it->second == endings.top().second) live.erase(it);
    }
    auto it = live.upper_bound(t->offset);
    if (it != live.begin() && std::prev(it)->second->offset + std::prev(it)->second->bytes > t->offset) --it;
    for (; it != live.end() && it->first < t->offset + t->bytes;) {
      const PlannedTensor& o = *it->second;
      if (!written_in_place(p, o, life.at(o.id), *t, lt))
        return Status::errorf(
            "memory plan: {} (live at instructions {}..{}) and {} ({}..{}) are live together but share bytes "
            "[{}, {})",
            name_of(p, o.id), life.at(o.id).first, life.at(o.id).last, name_of(p, t->id), lt.first, lt.last,
            std::max(o.offset, t->offset), std::min(o.offset + o.bytes, t->offset + t->bytes));
      it = live.erase(it);
    }
    live[t->offset] = t;
    endings.push({lt.last, t});
  }
  return Status::ok();
}

}  // namespace nnasm
