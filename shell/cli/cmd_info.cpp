// `nnasm info [FILE] [--memory]`: what the machine offers the JIT and what a listing or model file holds — the
// questions a user asks before timing or shipping a model — and, with --memory, where the
// executor puts its temporaries.

#include <fmt/format.h>

#include "engine/context.h"
#include "engine/executor.h"
#include "engine/usable_cpus.h"
#include "isa/opcode.h"
#include "serialize/listing.h"
#include "shell/cli/cli.h"

namespace nnasm {

namespace {

std::string count_of(const Program& p, Role role, int64_t* elements) {
  int n = 0;
  *elements = 0;
  for (TensorId id : p.tensors())
    if (p.desc(id).role == role) {
      ++n;
      *elements += p.desc(id).type.shape.numel();
    }
  return fmt::format("{}", n);
}

// The bytes of the params' values, each at its type's size.
double param_bytes(const Program& p) {
  double b = 0;
  for (TensorId id : p.tensors())
    if (p.desc(id).role == Role::PARAM) b += double(p.desc(id).type.shape.numel()) * dtype_size(p.desc(id).type.dtype);
  return b;
}

// "; 2 i8, 3 f32" when the tensors of `role` are not all f32, else "".
std::string types_of(const Program& p, Role role) {
  int count[DTYPE_COUNT] = {};
  for (TensorId id : p.tensors())
    if (p.desc(id).role == role) ++count[static_cast<int>(p.desc(id).type.dtype)];
  int all = 0;
  for (int c : count) all += c;
  if (all == count[static_cast<int>(DType::F32)]) return "";
  std::string s;
  for (int t = 0; t < DTYPE_COUNT; ++t)
    if (count[t]) s += fmt::format("{}{} {}", s.empty() ? "; " : ", ", count[t], dtype_name(static_cast<DType>(t)));
  return s;
}

std::string list(const Program& p, const std::vector<TensorId>& ids) {
  std::string s;
  for (TensorId id : ids) {
    const TensorDesc& d = p.desc(id);
    s += fmt::format("{}{}{} {}", s.empty() ? "" : ", ", d.sigil(), d.name, d.type.str());
  }
  return s.empty() ? "none" : s;
}

std::string operand(const Program& p, TensorId id) { return fmt::format("{}{}", p.desc(id).sigil(), p.desc(id).name); }

std::string kib(size_t bytes) { return fmt::format("{} bytes ({:.1f} KiB)", bytes, bytes / 1024.0); }

// Instruction i's trailing note: each output's arena offset, the input it was written over and
// the tensors sharing its slot, or "own storage".
std::string memory_note(const Program& p, const MemoryPlan& plan, size_t i) {
  const Instruction& ins = p.code()[i];
  std::vector<std::string> notes;
  bool any_planned = false;
  for (TensorId id : ins.out) {
    const PlannedTensor* t = plan.find(id);
    std::string n = ins.out.size() > 1 ? operand(p, id) + ": " : "";
    if (!t) {
      notes.push_back(n + "own storage");
      continue;
    }
    any_planned = true;
    n += fmt::format("arena +{}", t->offset);
    if (t->in_place_of != NO_TENSOR) n += ", in place of " + operand(p, t->in_place_of);
    const std::vector<TensorId> shared = plan.sharing(id);
    for (size_t k = 0; k < shared.size(); ++k) n += (k ? ", " : ", shares ") + operand(p, shared[k]);
    notes.push_back(n);
  }
  return any_planned ? fmt::format("{}", fmt::join(notes, "; ")) : "own storage";
}

std::string plan_line(const MemoryPlan& plan) {
  const double ratio = plan.unplanned_bytes ? 100.0 * plan.arena_bytes / plan.unplanned_bytes : 0;
  return fmt::format("{} temporaries, {} unplanned -> arena {}: {:.1f}%", plan.tensors.size(), kib(plan.unplanned_bytes),
                     kib(plan.arena_bytes), ratio);
}

// The memory plan the executor makes for `p` (optimized first, as `nnasm run` would), the plan
// of the listing as written for comparison, then the listing the executor runs with each
// instruction's memory note.
Status print_memory(const Program& p) {
  Result<std::unique_ptr<Executor>> ex = Executor::prepare(p);
  if (!ex) return ex.status();
  const Program& run = ex.value()->program();
  const MemoryPlan& plan = ex.value()->memory_plan();
  if (Context::of(p)->opt_level() == 0) {
    fmt::print("memory:   not planned (NNASM_OPT=0): every tensor has storage of its own\n");
  } else {
    size_t in_place = 0;
    for (const PlannedTensor& t : plan.tensors) in_place += t.in_place_of != NO_TENSOR;
    fmt::print("memory:   as run (optimized): {}\n", plan_line(plan));
    fmt::print("          peak live {}, {} written in place\n", kib(plan.peak_bytes), in_place);
    fmt::print("          as written, planned without optimizing: {}\n", plan_line(plan_memory(p)));
  }
  size_t own = 0, n_own = 0;
  for (TensorId id : run.tensors())
    if (!plan.find(id)) {
      own += storage_bytes(run.desc(id).type);
      ++n_own;
    }
  fmt::print("          not planned: {} tensors, {} (inputs, outputs, params, state, gradients)\n\n", n_own, kib(own));
  fmt::print("{}", program_print(run, [&](size_t i) { return memory_note(run, plan, i); }));
  return Status::ok();
}

}  // namespace

Status cmd_info(const InfoOptions& o) {
  if (o.memory && o.file.empty()) return Status::error("nnasm: error: info --memory needs a listing FILE");
  Context ctx;
  const CpuInfo& cpu = cpu_info();
  const JitConfig& jit = ctx.jit();
  fmt::print("cpu:      {} ({})\n", cpu.vendor, cpu.features.empty() ? "no vector features" : cpu.features);
  if (cpu.l2_bytes > 0) fmt::print("l2:       {} KiB per core\n", cpu.l2_bytes / 1024);
  fmt::print("isa:      {} (best {}, cap {}{})\n", isa_name(jit.isa()), isa_name(cpu.best), isa_name(jit.cap),
             jit.enabled ? "" : ", JIT off: NNASM_JIT=0");
  // The parallel steps' threads: one per core this process may use unless NNASM_THREADS (which
  // Context read, ignoring a bad value) set another count; and what the default came from.
  const UsableCpus u = usable_cpus();
  std::string usable = u.cores > 0 ? fmt::format("{} core{}", u.cores, u.cores == 1 ? "" : "s") : "cores unknown";
  if (u.allowed > 0) usable += fmt::format(" of the {} CPU{} this process may use", u.allowed, u.allowed == 1 ? "" : "s");
  usable += fmt::format(", {} online", u.online);
  if (u.quota > 0) usable += fmt::format(", cgroup quota {:g} CPUs", u.quota);
  fmt::print("threads:  {} ({}{})\n", ctx.threads(), ctx.threads() == u.threads ? "one per core: " : "NNASM_THREADS; ", usable);
  if (o.file.empty()) return Status::ok();

  Program p(ctx);
  ModelMeta meta;
  bool is_model = false;
  NNASM_TRY(load_program(o.file, &p, &meta, &is_model));
  int64_t param_elems = 0, state_elems = 0, unused = 0;
  const std::string params = count_of(p, Role::PARAM, &param_elems);
  const std::string states = count_of(p, Role::STATE, &state_elems);
  fmt::print("file:     {} ({}, {} mode)\n", o.file, is_model ? "model file" : "listing",
             p.training() ? "training" : "inference");
  if (is_model) {
    fmt::print("format:   {}.{}, written by {}; {} bytes; sections", meta.major, meta.minor, meta.producer, meta.file_bytes);
    for (const SectionSummary& s : meta.sections) fmt::print(" {} ({} bytes)", s.tag, s.bytes);
    fmt::print("\n");
    fmt::print("opcodes:  table {:016x}{}\n", meta.opcode_hash,
               meta.same_opcode_table ? " (this build's)" : fmt::format(" (this build has {:016x})", opcode_table_hash()));
    fmt::print("values:   {} tensors stored, {} left to their initializer; seed {}, run index {}\n",
               meta.tensors_with_values, meta.tensors_without_values, meta.seed, meta.run_index);
  }
  fmt::print("inputs:   {}\n", list(p, p.inputs()));
  fmt::print("outputs:  {}\n", list(p, p.outputs()));
  fmt::print("params:   {} tensors, {} values ({:.1f} KiB{})\n", params, param_elems, param_bytes(p) / 1024.0,
             types_of(p, Role::PARAM));
  fmt::print("state:    {} tensors, {} values\n", states, state_elems);
  fmt::print("consts:   {} tensors\n", count_of(p, Role::CONST, &unused));
  for (Section s : {Section::FORWARD, Section::BACKWARD, Section::UPDATE}) {
    const auto [b, e] = p.section_range(s);
    fmt::print("{:<9} {} instructions\n", fmt::format("{}:", section_name(s)), e - b);
  }
  if (!o.memory) {
    Result<std::unique_ptr<Executor>> ex = Executor::prepare(p);
    if (!ex) return ex.status();
    fmt::print("arena:    {} for the temporaries as run (details: --memory)\n", kib(ex.value()->memory_plan().arena_bytes));
  }
  if (o.memory) return print_memory(p);
  return Status::ok();
}

}  // namespace nnasm
