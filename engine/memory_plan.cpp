// The memory planner: lifetimes, in-place chains, and greedy-by-size first-fit placement.
#include "engine/memory_plan.h"

#include <algorithm>

#include "engine/tensor.h"

namespace nnasm {

const PlannedTensor* MemoryPlan::find(TensorId id) const {
  auto it = index_.find(id);
  return it == index_.end() ? nullptr : &tensors[it->second];
}

std::vector<TensorId> MemoryPlan::sharing(TensorId id) const {
  std::vector<TensorId> out;
  const PlannedTensor* t = find(id);
  if (!t) return out;
  for (const PlannedTensor& o : tensors)
    if (o.id != id && o.offset < t->offset + t->bytes && t->offset < o.offset + o.bytes) out.push_back(o.id);
  return out;
}

void MemoryPlan::add(const PlannedTensor& t) {
  index_[t.id] = tensors.size();
  tensors.push_back(t);
}

bool plannable(const Program& p, const Uses& u, TensorId id) {
  if (p.desc(id).role != Role::TEMPORARY || u.observable(id) || u.updated_in_place(id)) return false;
  const size_t producer = u.producer(id);
  // The derive section's results persist across runs (it runs only when the params change).
  return producer != Uses::NONE && p.code()[producer].section != Section::DERIVE;
}

bool may_write_in_place(const Program& p, const Instruction& ins, size_t k) {
  // A view's output is its input's bytes under another shape: over the input's slot it is
  // already written (its kernel skips the copy).
  if (ins.info().flags & OPF_VIEW)
    return ins.out.size() == 1 && k == 0 && storage_bytes(p.desc(ins.in[0]).type) == storage_bytes(p.desc(ins.out[0]).type);
  const OpCategory c = ins.info().category;
  if (c != OpCategory::ELEMENTWISE_UNARY && c != OpCategory::ELEMENTWISE_BINARY) return false;
  if (ins.out.size() != 1 || k >= ins.in.size()) return false;
  return p.desc(ins.in[k]).type == p.desc(ins.out[0]).type;
}

namespace {

// Tensors joined by in-place rewriting: one slot, the members' lifetimes end to end.
struct Chain {
  size_t bytes = 0, first = 0, last = 0;
  size_t offset = 0;
};

bool live_together(const Chain& a, const Chain& b) { return a.first <= b.last && b.first <= a.last; }

// Lowest offset for `c` clear of every placed chain live at the same time; `placed` is sorted by
// offset.
size_t first_fit(const Chain& c, const std::vector<const Chain*>& placed) {
  size_t at = 0;
  for (const Chain* o : placed) {
    if (!live_together(c, *o)) continue;
    if (o->offset >= at + c.bytes) break;
    at = std::max(at, o->offset + o->bytes);
  }
  return at;
}

}  // namespace

MemoryPlan plan_memory(const Program& p) {
  const Uses u(p);
  const std::vector<Instruction>& code = p.code();
  MemoryPlan plan;
  std::vector<PlannedTensor> live;
  std::unordered_map<TensorId, size_t> at;  // tensor → index into live
  for (size_t i = 0; i < code.size(); ++i)
    for (TensorId id : code[i].out) {
      if (at.count(id) || !plannable(p, u, id)) continue;
      PlannedTensor t;
      t.id = id;
      t.bytes = storage_bytes(p.desc(id).type);
      t.first = t.last = i;
      const std::vector<size_t>& r = u.readers(id);
      if (!r.empty()) t.last = std::max(i, r.back());
      at[id] = live.size();
      live.push_back(t);
    }

  // In-place chains, in program order: an output joins the chain of an input that dies at its
  // instruction, unless another output took that chain over already.
  std::vector<size_t> chain_of(live.size());
  std::vector<Chain> chains;
  std::vector<bool> continued(live.size(), false);
  for (size_t t = 0; t < live.size(); ++t) {
    const size_t i = live[t].first;
    const Instruction& ins = code[i];
    size_t joined = chains.size();
    for (size_t k = 0; k < ins.in.size() && joined == chains.size(); ++k) {
      auto it = at.find(ins.in[k]);
      if (it == at.end() || live[it->second].last != i || continued[it->second]) continue;
      if (!may_write_in_place(p, ins, k)) continue;
      continued[it->second] = true;
      live[t].in_place_of = ins.in[k];
      joined = chain_of[it->second];
    }
    if (joined == chains.size()) chains.push_back(Chain{live[t].bytes, live[t].first, live[t].last});
    Chain& c = chains[joined];
    c.last = std::max(c.last, live[t].last);
    chain_of[t] = joined;
  }

  std::vector<size_t> starts(code.size() + 1, 0), ends(code.size() + 1, 0);  // bytes per instruction
  for (const Chain& c : chains) {
    starts[c.first] += c.bytes;
    ends[c.last + 1] += c.bytes;
  }
  for (size_t i = 0, live_bytes = 0; i < code.size(); ++i) {
    live_bytes = live_bytes + starts[i] - ends[i];
    plan.peak_bytes = std::max(plan.peak_bytes, live_bytes);
  }

  std::vector<Chain*> order;
  for (Chain& c : chains) order.push_back(&c);
  std::stable_sort(order.begin(), order.end(), [](const Chain* a, const Chain* b) {
    return a->bytes != b->bytes ? a->bytes > b->bytes : a->first < b->first;
  });
  std::vector<const Chain*> placed;  // sorted by offset
  for (Chain* c : order) {
    c->offset = first_fit(*c, placed);
    auto pos = std::upper_bound(placed.begin(), placed.end(), c->offset,
                                [](size_t off, const Chain* o) { return off < o->offset; });
    placed.insert(pos, c);
    plan.arena_bytes = std::max(plan.arena_bytes, c->offset + c->bytes);
  }

  for (size_t t = 0; t < live.size(); ++t) {
    live[t].offset = chains[chain_of[t]].offset;
    plan.unplanned_bytes += live[t].bytes;
    plan.add(live[t]);
  }
  return plan;
}

}  // namespace nnasm
