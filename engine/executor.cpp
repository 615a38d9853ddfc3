// prepare: storage, initialization, kernel resolution; run: the dispatch loop.
#include "engine/executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <unordered_set>

#include <fmt/format.h>

#include "engine/denormals.h"
#include "engine/init.h"
#include "engine/passes/pass.h"
#include "engine/rebatch.h"
#include "jit/stream.h"

namespace nnasm {

Result<std::unique_ptr<Executor>> Executor::prepare(const Program& program, const PrepareOptions& options) {
  if (options.batch == 0) return prepare(program);
  Result<std::unique_ptr<Program>> copy = with_batch(program, options.batch);
  if (!copy) return copy.status();
  Result<std::unique_ptr<Executor>> ex = prepare(**copy);
  if (ex) (*ex)->rebatched_ = std::move(*copy);
  return ex;
}

Result<std::unique_ptr<Executor>> Executor::prepare(const Program& original) {
  NNASM_TRY(original.finish());
  Context* const runtime = Context::of(original);
  if (!runtime) return Status::error("the program's tensors are descriptors alone: build it over a Context to run it");
  Context& ctx = *runtime;
  std::unique_ptr<Executor> ex(new Executor(original, ctx));
  if (ctx.opt_level() > 0) {
    ex->optimized_ = std::make_unique<Program>(original);
    NNASM_TRY(optimize(*ex->optimized_, ctx.opt_level(), nullptr, ctx.passes()));
    ex->program_ = ex->optimized_.get();
  }
  const Program& p = *ex->program_;
  if (ctx.opt_level() > 0) NNASM_TRY(ex->plan_arena());
  for (TensorId id : p.tensors()) {
    if (ex->plan_.find(id)) continue;
    Tensor& t = ctx.at(id);
    const bool fresh = !t.allocated();
    if (!t.allocate(ctx.allocator()))
      return Status::errorf("cannot allocate {} bytes for {}{}", storage_bytes(t.desc.type), t.desc.sigil(), t.desc.name);
    const Role r = t.desc.role;
    if (r == Role::CONST || ((r == Role::PARAM || r == Role::STATE) && fresh)) init_tensor(t, ctx.seed());
  }

  size_t n_in = 0, n_out = 0;
  for (const Instruction& ins : p.code()) {
    n_in += ins.in.size();
    n_out += ins.out.size();
  }
  ex->in_ptrs_.reserve(n_in);
  ex->out_ptrs_.reserve(n_out);
  ex->types_.reserve(n_in + n_out);
  ex->steps_.reserve(p.code().size());
  for (const Instruction& ins : p.code()) {
    Step s{};
    s.fn = op_hooks(ins.op).ref;
    s.args.ins = &ins;
    s.args.state = &ex->state_;
    s.args.n_in = static_cast<int>(ins.in.size());
    s.args.n_out = static_cast<int>(ins.out.size());
    s.args.in = ex->in_ptrs_.data() + ex->in_ptrs_.size();
    s.args.in_type = ex->types_.data() + ex->types_.size();
    for (TensorId id : ins.in) {
      ex->in_ptrs_.push_back(ex->storage(id));
      ex->types_.push_back(ctx.at(id).desc.type);
    }
    s.args.out = ex->out_ptrs_.data() + ex->out_ptrs_.size();
    s.args.out_type = ex->types_.data() + ex->types_.size();
    for (TensorId id : ins.out) {
      ex->out_ptrs_.push_back(ex->storage(id));
      ex->types_.push_back(ctx.at(id).desc.type);
    }
    s.kernel = "ref";
    s.n_parts = 1;
    ex->choose_kernel(&s, ins);
    ex->steps_.push_back(s);
  }

  NNASM_TRY(ex->prepare_carried());
  for (int k = 0; k < SECTION_COUNT; ++k) ex->sections_[k] = p.section_range(static_cast<Section>(k));
  ex->join_parallel_steps();
  ex->state_.training = p.training();
  // finish() refused a training program whose statistics are read-only; an inference one may
  // still be switched to training later, which asks this.
  ex->state_writable_ = p.check_state_writable();
  ex->state_.seed = ctx.seed();
  ex->state_.flush_denormals = ctx.flush_denormals();

  size_t scratch = 0;
  int max_parts = 1;
  for (const Step& s : ex->steps_) {
    if (ScratchFn f = op_hooks(s.args.ins->op).scratch) scratch = std::max(scratch, f(*s.args.ins, s.args.in_type, s.args.out_type));
    max_parts = std::max(max_parts, s.n_parts);
  }
  if (scratch) {
    // One stride for a step that runs whole, which its parts share when it is split (a K
    // split's slots), then one stride per part: the steps joined into one job use the scratch
    // of their part and the shared stride at the same time.
    const size_t stride = (scratch + 63) / 64 * 64, bytes = stride * (max_parts > 1 ? max_parts + 1 : 1);
    ex->scratch_ = AlignedBuffer(bytes, ctx.allocator());
    if (ex->scratch_.empty()) return Status::errorf("cannot allocate {} bytes of kernel scratch", bytes);
    char* base = static_cast<char*>(ex->scratch_.data());
    for (Step& s : ex->steps_) s.args.scratch = s.args.shared = base;
    for (Step& s : ex->steps_)
      for (int k = 0; k < s.n_parts && s.n_parts > 1; ++k)
        for (int c = 0; c < s.chain; ++c) {
          Part& part = ex->parts_[s.first_part + static_cast<size_t>(k * s.chain + c)];
          part.args.scratch = base + (k + 1) * stride;
          part.args.shared = base;
        }
  }
  ex->max_parts_ = max_parts;
  if (max_parts > 1) ex->pool_ = ctx.thread_pool();
  for (Step& s : ex->steps_) {
    s.parts = s.n_parts > 1 ? &ex->parts_[s.first_part] : nullptr;
    s.pool = ex->pool_.get();
  }
  if (ctx.jit().enabled && ctx.jit().stream) ex->build_streams();
  return ex;
}

Status Executor::plan_arena() {
  const Program& p = *program_;
  plan_ = plan_memory(p);
  NNASM_TRY(verify_plan(p, plan_).with_prefix("internal error: "));
  if (plan_.tensors.empty()) return Status::ok();
  arena_ = AlignedBuffer(plan_.arena_bytes, ctx_->allocator());
  if (arena_.empty()) return Status::errorf("cannot allocate the {}-byte arena of the temporaries", plan_.arena_bytes);
  char* const arena = static_cast<char*>(arena_.data());
  planned_.resize(plan_.tensors.size());
  for (size_t k = 0; k < plan_.tensors.size(); ++k) {
    planned_[k].desc = p.desc(plan_.tensors[k].id);
    planned_[k].arena_slot = arena + plan_.tensors[k].offset;
  }
  return Status::ok();
}

Executor::~Executor() {
  // A copy at another batch is this executor's alone: its inputs, outputs and temporaries, and
  // what the optimizer derived for it, leave the context with it, so that preparing at one batch
  // after another does not grow the context. Its params, constants and state are the original's.
  if (!rebatched_) return;
  std::unordered_set<TensorId> shared, own;
  for (TensorId id : rebatched_->tensors())
    if (rebatched_->desc(id).sigil() == '@') shared.insert(id);
  for (const Program* p : {rebatched_.get(), optimized_.get()})
    if (p)
      for (TensorId id : p->tensors())
        if (!shared.count(id)) own.insert(id);
  planned_.clear();
  for (TensorId id : own) ctx_->remove(id);
}

Status Executor::prepare_carried() {
  const std::vector<TensorId> ids = program_->carried_state();
  size_t total = 0;
  for (TensorId id : ids) total += padded_bytes(ctx_->at(id).data.bytes());
  if (!total) return Status::ok();
  carried_init_own_ = AlignedBuffer(total, ctx_->allocator());
  if (carried_init_own_.empty()) return Status::errorf("cannot allocate {} bytes for the initial state", total);
  char* const base = static_cast<char*>(carried_init_own_.data());
  size_t offset = 0;
  for (TensorId id : ids) {
    // The values a fresh prepare would give, whatever the tensor holds now (a loaded model's).
    Tensor fresh;
    fresh.desc = ctx_->at(id).desc;
    if (!fresh.allocate()) return Status::errorf("cannot allocate the initial values of @{}", fresh.desc.name);
    init_tensor(fresh, ctx_->seed());
    std::memcpy(base + offset, fresh.data.data(), fresh.data.bytes());
    carried_.push_back(Carried{id, fresh.data.bytes(), offset, storage(id)});
    offset += padded_bytes(fresh.data.bytes());
  }
  carried_init_ = base;
  return Status::ok();
}

bool Executor::carried(TensorId id) const {
  for (const Carried& c : carried_)
    if (c.id == id) return true;
  return false;
}

void Executor::reset_state() {
  next_step_ = 0;
  for (const Carried& c : carried_) std::memcpy(c.at, carried_init_ + c.init_offset, c.bytes);
}

Status Executor::set_training(bool t) {
  if (t && !state_writable_) return state_writable_;
  state_.training = t;
  return Status::ok();
}

void* Executor::storage(TensorId id) const {
  if (const PlannedTensor* s = plan_.find(id)) return planned_[static_cast<size_t>(s - plan_.tensors.data())].arena_slot;
  return ctx_->at(id).storage();
}

void Executor::build_streams() {
  Context& ctx = *ctx_;
  for (int k = 0; k < SECTION_COUNT; ++k) {
    const auto [b, e] = sections_[k];
    std::vector<StreamCall> calls;
    calls.reserve(e - b);
    for (size_t i = b; i < e; ++i) {
      const Step& s = steps_[i];
      if (s.n_parts == 0) continue;  // runs in the job of the step before
      if (s.n_parts > 1) calls.push_back(StreamCall{reinterpret_cast<const void*>(&run_parallel), &s});
      else calls.push_back(StreamCall{reinterpret_cast<const void*>(s.fn), &s.args});
    }
    Result<std::shared_ptr<const JitKernel>> code = build_stream(fmt::format("stream_{}", section_name(static_cast<Section>(k))), calls);
    if (!code) {
      ctx.log(fmt::format("dispatch stream not generated, using the interpreter loop: {}", code.status().message()));
      for (int j = 0; j < SECTION_COUNT; ++j) stream_[j] = nullptr;
      return;
    }
    stream_code_[k] = code.value();
    stream_[k] = code.value()->fn();
  }
}

void Executor::run_step(const Step& s) {
  if (s.n_parts > 1) s.pool->run(s.n_parts, run_part, const_cast<Step*>(&s));
  else if (s.n_parts == 1) s.fn(&s.args);
}

void Executor::derive_if_stale() const {
  if (!derives_ || derived_version_ == ctx_->params_version()) return;
  derived_version_ = ctx_->params_version();
  run_section(Section::DERIVE);
}

void Executor::run_section(Section sec) const {
  const int k = static_cast<int>(sec);
  if (stream_[k]) {
    stream_[k](nullptr);
  } else {
    const auto [b, e] = sections_[k];
    for (size_t i = b; i < e; ++i) run_step(steps_[i]);
  }
}

bool Executor::derived(TensorId id) const {
  const auto [b, e] = program_->section_range(Section::DERIVE);
  for (size_t i = b; i < e; ++i)
    for (TensorId o : program_->code()[i].out)
      if (o == id) return true;
  return false;
}

void Executor::run(Section sec) {
  const DenormalScope denormals(state_.flush_denormals);
  if (sec == Section::FORWARD) {
    derive_if_stale();
    state_.run_index = forward_runs_++;
    next_step_ = 0;  // a run_steps run in progress is abandoned
  }
  run_section(sec);
  note_param_writes(sec);
}

void Executor::note_param_writes(Section sec) {
  const auto [b, e] = sections_[static_cast<int>(sec)];
  if (sec == Section::UPDATE ? b < e : sec == Section::FORWARD && state_.training)
    ctx_->params_changed();  // updated params; running statistics a training run wrote
}

namespace {
// A parallel step timed part by part (Executor::run_part_timed).
struct StepTiming {
  const void* step;
  std::chrono::steady_clock::time_point begin;
  Executor::PartTime* parts;  // the step's, indexed by task
};
}  // namespace

void Executor::run_part_timed(void* timing, int task) {
  const StepTiming& t = *static_cast<const StepTiming*>(timing);
  const auto t0 = std::chrono::steady_clock::now();
  run_part(const_cast<void*>(t.step), task);
  const auto t1 = std::chrono::steady_clock::now();
  t.parts[task].start += std::chrono::duration<double>(t0 - t.begin).count();
  t.parts[task].busy += std::chrono::duration<double>(t1 - t0).count();
}

void Executor::run_timed(Section sec, double* seconds, PartTime* parts) {
  const DenormalScope denormals(state_.flush_denormals);
  if (sec == Section::FORWARD) {
    derive_if_stale();
    state_.run_index = forward_runs_++;
  }
  const auto [b, e] = sections_[static_cast<int>(sec)];
  for (size_t i = b; i < e; ++i) {
    const Step& s = steps_[i];
    const auto t0 = std::chrono::steady_clock::now();
    if (parts && s.n_parts > 1) {
      StepTiming timing{&s, t0, parts + i * static_cast<size_t>(max_parts_)};
      s.pool->run(s.n_parts, run_part_timed, &timing);
    } else {
      run_step(s);
    }
    seconds[i] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  note_param_writes(sec);
}

void Executor::run_parallel(const void* step) { run_step(*static_cast<const Step*>(step)); }

void Executor::train_step() {
  run(Section::FORWARD);
  run(Section::BACKWARD);
  run(Section::UPDATE);
}

Tensor* Executor::tensor(const std::string& name) const {
  TensorId id = program_->find(name);
  if (id == NO_TENSOR) return nullptr;
  if (const PlannedTensor* s = plan_.find(id)) return &planned_[static_cast<size_t>(s - plan_.tensors.data())];
  return &ctx_->at(id);
}

void Executor::run_part(void* step, int task) {
  const Step& s = *static_cast<const Step*>(step);
  const DenormalScope denormals(s.args.state->flush_denormals);  // a worker's mode is its own
  const Part* p = s.parts + task * s.chain;
  for (int c = 0; c < s.chain; ++c) p[c].fn(&p[c].args);
}

void Executor::join_parallel_steps() {
  for (const auto& [b, e] : sections_)
    for (size_t i = b; i + 1 < e; ++i) join(&steps_[i], &steps_[i + 1]);
}

// Joins b to a's job: b split into a's parts along its reduction, each reading only the slice of
// a's output that a's part of the same index finishes. The batch-1 MLP's second layer so runs
// on the two halves of the first layer's output that each thread has just computed, with no
// hand-off between the layers (a hand-off costs a cache line's round trip between the cores).
bool Executor::join(Step* a, Step* b) {
  if (a->n_parts <= 1 || a->chain != 1 || b->n_parts != 1) return false;
  const Instruction &ia = *a->args.ins, &ib = *b->args.ins;
  const OpHooks &ha = op_hooks(ia.op), &hb = op_hooks(ib.op);
  if (!ha.span || !hb.span || !hb.jit || ia.out.size() != 1) return false;
  // b reads a's output as exactly one of its inputs, and writes nothing a part of a may still
  // read (the memory plan may give b's output a slot of a's inputs, free once a is done).
  int j = -1;
  for (size_t k = 0; k < ib.in.size(); ++k)
    if (ib.in[k] == ia.out[0]) {
      if (j >= 0) return false;
      j = static_cast<int>(k);
    }
  if (j < 0) return false;
  for (int o = 0; o < b->args.n_out; ++o) {
    const char* w = static_cast<const char*>(b->args.out[o]);
    const size_t wn = storage_bytes(b->args.out_type[o]);
    for (int k = 0; k < a->args.n_in; ++k) {
      const char* r = static_cast<const char*>(a->args.in[k]);
      if (w < r + storage_bytes(a->args.in_type[k]) && r < w + wn) return false;
    }
  }
  const Isa isa = ctx_->jit().isa();
  const int n = a->n_parts;
  for (int t = 0; t < n; ++t) {
    JitRequest ra{ia, a->args.in_type, a->args.out_type, isa, t, n}, rb{ib, b->args.in_type, b->args.out_type, isa, t, n};
    ra.reads_trained_param = reads_trained_param(ia);
    rb.reads_trained_param = reads_trained_param(ib);
    rb.split_reduction = true;
    int64_t w0, w1, r0, r1;
    if (!ha.span(ra, true, 0, &w0, &w1) || !hb.span(rb, false, j, &r0, &r1)) return false;
    if (r0 < r1 && (r0 < w0 || r1 > w1)) return false;
  }
  std::vector<Part> bp;
  std::vector<std::shared_ptr<const JitKernel>> kernels;
  if (!make_parts(ib, *b, n, true, &bp, &kernels)) return false;
  std::vector<Part> joined;
  for (int t = 0; t < n; ++t) {
    joined.push_back(parts_[a->first_part + t]);
    joined.push_back(bp[t]);
  }
  a->first_part = parts_.size();
  a->chain = 2;
  parts_.insert(parts_.end(), joined.begin(), joined.end());
  b->n_parts = 0;
  b->kernel = kernels[0]->name().c_str();
  jit_.insert(jit_.end(), kernels.begin(), kernels.end());
  return true;
}

bool Executor::make_parts(const Instruction& ins, const Step& s, int n, bool along_k, std::vector<Part>* parts,
                          std::vector<std::shared_ptr<const JitKernel>>* kernels) {
  Context& ctx = *ctx_;
  for (int p = 0; p < n; ++p) {
    JitRequest r{ins, s.args.in_type, s.args.out_type, ctx.jit().isa(), p, n};
    r.split_reduction = along_k;
    r.reads_trained_param = reads_trained_param(ins);
    Result<std::shared_ptr<const JitKernel>> k = op_hooks(ins.op).jit(r, ctx.kernels());
    if (!k || !k.value()) {
      if (!along_k)
        ctx.log(fmt::format("{} -> {}: part {} of {} not generated, running one part: {}", ins.info().mnemonic,
                            program_->desc(ins.out[0]).name, p, n, k ? "no kernel" : k.status().message()));
      return false;
    }
    parts->push_back(Part{k.value()->fn(), s.args});
    kernels->push_back(k.value());
  }
  return true;
}

bool Executor::reads_trained_param(const Instruction& ins) const {
  const auto [ub, ue] = program_->section_range(Section::UPDATE);
  if (ub >= ue) return false;
  for (TensorId id : ins.in)
    if (program_->desc(id).role == Role::PARAM) return true;
  return false;
}

const char* Executor::kernel_name(size_t i) const { return i < steps_.size() ? steps_[i].kernel : "?"; }

void Executor::choose_kernel(Step* s, const Instruction& ins) {
  Context& ctx = *ctx_;
  const Isa isa = ctx.jit().isa();
  const JitFn jit = op_hooks(ins.op).jit;
  if (isa == Isa::REF || !jit) return;
  JitRequest whole{ins, s->args.in_type, s->args.out_type, isa};
  whole.reads_trained_param = reads_trained_param(ins);
  Result<std::shared_ptr<const JitKernel>> k = jit(whole, ctx.kernels());
  if (!k) {
    ctx.log(fmt::format("{} -> {}: JIT failed, using the reference kernel: {}", ins.info().mnemonic,
                        program_->desc(ins.out[0]).name, k.status().message()));
    return;
  }
  if (!k.value()) return;
  s->fn = k.value()->fn();
  s->kernel = k.value()->name().c_str();
  jit_.push_back(k.value());

  const PartsFn parts = op_hooks(ins.op).parts;
  const int n = parts && ctx.threads() > 1 ? parts(whole, ctx.threads()) : 1;
  if (n <= 1) return;
  // In training, an instruction that reads a param the update section changes (a layer's
  // weights) is split along its reduction where the op can: its parts then read the weight's rows
  // that the same core's parts of the weight gradient and of the optimizer step write (those
  // split by rows), and the weights stay in that core's cache between steps instead of crossing
  // to the other core's twice a step. Otherwise, and where the op cannot, its own split.
  std::vector<Part> made;
  std::vector<std::shared_ptr<const JitKernel>> kernels;
  if (!whole.reads_trained_param || !make_parts(ins, *s, n, true, &made, &kernels)) {
    made.clear();
    kernels.clear();
    if (!make_parts(ins, *s, n, false, &made, &kernels)) return;
  }
  jit_.insert(jit_.end(), kernels.begin(), kernels.end());
  s->n_parts = n;
  s->first_part = parts_.size();
  parts_.insert(parts_.end(), made.begin(), made.end());
}

void* Executor::relocate(const void* p) const {
  const char* c = static_cast<const char*>(p);
  auto it = std::upper_bound(moved_.begin(), moved_.end(), c, [](const char* x, const Moved& m) { return x < m.from; });
  if (it == moved_.begin()) return const_cast<void*>(p);
  --it;
  return c < it->from + it->bytes ? it->to + (c - it->from) : const_cast<void*>(p);
}

void* Executor::data(TensorId id) const {
  for (const Bound& b : bound_)
    if (b.id == id) return b.now;
  if (!ctx_->find(id) || !program_->defined(id)) return nullptr;
  void* p = storage(id);
  return p ? relocate(p) : nullptr;
}

Status Executor::bind(TensorId id, void* p) {
  const Tensor* t = ctx_->find(id);
  if (!t || !program_->defined(id)) return Status::error("no such tensor");
  const TensorDesc& d = t->desc;
  if ((d.role != Role::INPUT && !d.is_output) || plan_.find(id) || t->data.empty())
    return Status::errorf("{}{} is not an input or output with storage of its own", d.sigil(), d.name);
  if (reinterpret_cast<uintptr_t>(p) % 64 != 0)
    return Status::errorf("%{}: the buffer must be 64-byte aligned", d.name);
  void* const own = relocate(t->data.data());
  Bound* b = nullptr;
  for (Bound& x : bound_)
    if (x.id == id) b = &x;
  if (!b) {
    bound_.push_back({id, own, own});
    b = &bound_.back();
  }
  void* const target = p ? p : own;
  for (const void*& q : in_ptrs_)
    if (q == b->now) q = target;
  for (void*& q : out_ptrs_)
    if (q == b->now) q = target;
  b->now = target;
  return Status::ok();
}

Result<std::unique_ptr<Executor>> Executor::instantiate() const {
  std::unique_ptr<Executor> in(new Executor(*program_, *ctx_));
  const Context& ctx = *ctx_;
  // The instance reads this executor's derived tensors, so they must be current now.
  {
    const DenormalScope denormals(state_.flush_denormals);
    derive_if_stale();
  }
  in->derives_ = false;
  // What a run writes, by the template's addresses: the arena, every tensor outside it that
  // does not persist across runs, and the state a run carries to the next.
  std::vector<const Tensor*> own;
  size_t own_bytes = 0;
  for (TensorId id : program_->tensors()) {
    const Tensor& t = ctx.at(id);
    if ((t.desc.sigil() == '@' && !carried(id)) || plan_.find(id) || t.data.empty() || derived(id)) continue;
    own.push_back(&t);
    own_bytes += padded_bytes(t.data.bytes());  // each copy 64-byte aligned, as the original
  }
  if (own_bytes) {
    in->own_ = AlignedBuffer(own_bytes, ctx.allocator());
    if (in->own_.empty()) return Status::errorf("cannot allocate {} bytes for an instance's tensors", own_bytes);
  }
  char* next = static_cast<char*>(in->own_.data());
  for (const Tensor* t : own) {
    in->moved_.push_back({static_cast<const char*>(t->data.data()), padded_bytes(t->data.bytes()), next});
    next += padded_bytes(t->data.bytes());
  }
  auto copy_buffer = [&](const AlignedBuffer& from, AlignedBuffer* to, const char* what) -> Status {
    if (from.empty()) return Status::ok();
    *to = AlignedBuffer(from.bytes(), ctx.allocator());
    if (to->empty()) return Status::errorf("cannot allocate the {}-byte {} of an instance", from.bytes(), what);
    in->moved_.push_back({static_cast<const char*>(from.data()), from.bytes(), static_cast<char*>(to->data())});
    return Status::ok();
  };
  NNASM_TRY(copy_buffer(arena_, &in->arena_, "arena"));
  NNASM_TRY(copy_buffer(scratch_, &in->scratch_, "kernel scratch"));
  std::sort(in->moved_.begin(), in->moved_.end(), [](const Moved& a, const Moved& b) { return a.from < b.from; });

  in->in_ptrs_.reserve(in_ptrs_.size());
  for (const void* p : in_ptrs_) in->in_ptrs_.push_back(in->relocate(p));
  in->out_ptrs_.reserve(out_ptrs_.size());
  for (void* p : out_ptrs_) in->out_ptrs_.push_back(in->relocate(p));
  // The argument blocks point into this executor's pointer arrays, state and scratch: re-aim them.
  auto rebase = [&](KernelArgs* a) {
    a->in = in->in_ptrs_.data() + (a->in - in_ptrs_.data());
    a->out = in->out_ptrs_.data() + (a->out - out_ptrs_.data());
    a->state = &in->state_;
    a->scratch = a->scratch ? in->relocate(a->scratch) : nullptr;
    a->shared = a->shared ? in->relocate(a->shared) : nullptr;
  };
  in->steps_ = steps_;
  in->parts_ = parts_;
  for (Step& s : in->steps_) {
    rebase(&s.args);
    s.parts = s.n_parts > 1 ? &in->parts_[s.first_part] : nullptr;
  }
  for (Part& p : in->parts_) rebase(&p.args);
  in->jit_ = jit_;
  in->pool_ = pool_;
  in->max_parts_ = max_parts_;
  std::copy(std::begin(sections_), std::end(sections_), std::begin(in->sections_));
  in->state_ = state_;
  in->state_writable_ = state_writable_;
  in->plan_ = plan_;
  in->planned_ = std::vector<Tensor>(planned_.size());
  for (size_t k = 0; k < planned_.size(); ++k) {
    in->planned_[k].desc = planned_[k].desc;
    in->planned_[k].arena_slot = in->relocate(planned_[k].arena_slot);
  }
  in->carried_ = carried_;
  for (Carried& c : in->carried_) c.at = in->relocate(c.at);
  in->carried_init_ = carried_init_;
  in->reset_state();
  return in;
}

bool Executor::run_steps(size_t max_steps) {
  const DenormalScope denormals(state_.flush_denormals);
  const auto [b, e] = sections_[static_cast<int>(Section::FORWARD)];
  if (next_step_ == 0) {
    derive_if_stale();
    state_.run_index = forward_runs_++;
  }
  size_t i = b + next_step_;
  for (const size_t stop = std::min(e, i + max_steps); i < stop; ++i) run_step(steps_[i]);
  next_step_ = i - b;
  if (i < e) return false;
  next_step_ = 0;
  return true;
}

}  // namespace nnasm
