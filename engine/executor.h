// The executor. `prepare` does all the work once: it plans the temporaries into one arena
// (engine/memory_plan.h) and allocates storage for every other tensor of the program, fills params
// and constants, and resolves each instruction to a kernel function and its operand pointers.
// `run` is then a tight loop over that flat array: no map lookups, no allocation, no virtual
// calls.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/context.h"
#include "engine/memory_plan.h"
#include "engine/thread_pool.h"
#include "isa/program.h"
#include "isa/status.h"
#include "jit/false_sharing.h"
#include "ops/op.h"

namespace nnasm {

// How prepare(program, options) changes the program before it prepares it.
struct PrepareOptions {
  // The batch to run at (engine/rebatch.h: every input's leading dimension); 0 keeps the
  // program's own.
  int64_t batch = 0;
};

class Executor {
 public:
  // Requires: `program` is finished (every tensor defined) and outlives the executor, as does its
  // context. Params that were never initialized are initialized from the context's seed; params
  // already holding values (a second prepare, a loaded model) keep them. Errors: unfinished
  // program, failed allocation (naming the tensor). Allocates; not thread-safe.
  // Unless the context's opt_level() is 0, prepare first optimizes a copy of the program
  // (engine/passes/pass.h) and runs that: program() is then the copy, whose temporaries may
  // differ from the original's (inputs, outputs, params, state and handed-out gradients keep
  // their names and meaning). It then plans the copy's private temporaries into one arena of
  // this executor's own (no other executor sees or changes it), checks the plan with verify_plan
  // (an error here is the planner's bug, reported rather than run), and gives every other tensor
  // storage of its own in the context. At opt_level() 0 nothing is planned: every tensor owns
  // its storage in the context. Errors also when the program's tensor map is not a Context.
  static Result<std::unique_ptr<Executor>> prepare(const Program& program);
  // prepare(program) of the program changed as `options` say: at another batch, a copy made by
  // with_batch (engine/rebatch.h), which the executor owns and program() returns (params,
  // constants and state shared with `program`; its inputs and outputs are the copy's, found by
  // name). Errors also those of with_batch, which say why a program cannot change its batch.
  // The copy's own tensors (inputs, outputs, temporaries, derived layouts) leave the context
  // when the executor dies; the context must not be used by another thread then.
  static Result<std::unique_ptr<Executor>> prepare(const Program& program, const PrepareOptions& options);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Runs the forward section. Performs no allocation. Not thread-safe per executor. Steps with
  // several parts run them on the context's thread pool (as it was at prepare); results are
  // bitwise the same for any thread count.
  void run() { run(Section::FORWARD); }
  // Runs one section's instructions in order. No allocation. A forward run first runs the derive
  // section (isa/instruction.h) when it has not run since the context's params last changed
  // (Context::params_changed; an update section counts as a change); an instance never does:
  // it reads its template's.
  void run(Section s);
  // One training step: forward, backward, update. No allocation.
  void train_step();
  // Where a parallel step's time goes, part by part, summed over run_timed calls: how long after
  // the step began the part started (the hand-off to its thread) and how long it ran. A line
  // pair each: parts on different threads write theirs as they finish, and a worker's store
  // waiting for the line of the caller's would hold back its store of "done" (x86 keeps stores
  // in order), adding a transfer to every step it times.
  struct alignas(FALSE_SHARING_BYTES) PartTime {
    double start = 0, busy = 0;  // seconds
  };
  // Runs section s as run(s) does (the same run index), but step by step through the interpreter
  // loop, adding each instruction's wall time in seconds to seconds[i] (i indexes
  // program().code(); the array holds at least that many) and, with `parts`, part t's times to
  // parts[i · max_parts() + t] for each instruction split into parts (a part of the job of
  // steps joined to it runs their kernels too). For profiles (which instructions take the time),
  // not for the hot path: it reads the clock twice per instruction and per part. No allocation.
  void run_timed(Section s, double* seconds, PartTime* parts = nullptr);
  // The most parts any instruction runs as (1 when none is split).
  int max_parts() const { return max_parts_; }

  // The mode kernels see (dropout, batch norm); starts as the program's mode. Training makes
  // BATCHNORM2D write its running statistics in place, so it is refused, the mode unchanged,
  // when the program's cannot be written (a const, or a tensor that is also another operand:
  // Program::check_state_writable, whose message names the fix).
  Status set_training(bool t);
  bool training() const { return state_.training; }
  // Random draws (DROPOUT's masks) follow the context's seed, the instruction's key and the
  // forward run's index, which counts forward runs from 0; backward and update see the index of
  // the forward run before them. set_run_index(i) makes the next forward run the i-th, so it
  // draws what the i-th run drew (the gradient checker pins it to compare runs with one mask).
  void set_run_index(uint64_t i) { forward_runs_ = i; }
  // The index the next forward run gets: the forward runs done so far (save it with a model to
  // resume training with the same dropout masks).
  uint64_t run_index() const { return forward_runs_; }

  // Another executor of the same prepared program, for running it concurrently: it shares the
  // program, the params, constants and state (read-only: an instance runs the forward section in
  // the mode this executor had) and the generated kernels, and owns everything a run writes — its
  // own arena, inputs, outputs and other temporaries, kernel scratch and run state, and the state
  // a forward run carries to the next (Program::carried_state: a recurrent layer's h stepped per
  // frame), which starts from its initial values as reset_state leaves it. Runs through
  // the interpreter loop (a dispatch stream bakes in one executor's addresses). Requires this
  // executor to outlive the instance and nobody to run update sections meanwhile. Allocates (all
  // of it here: its runs do not); thread-safe with respect to other instances of this executor.
  Result<std::unique_ptr<Executor>> instantiate() const;
  // Sets the state a forward run carries to the next (Program::carried_state: ASSIGN's
  // destinations, such as the h and c of a recurrent layer stepped once per frame) back to its
  // initial values: what the declarations give (init kind or inline values, drawn from the
  // context's seed as a fresh prepare would), which is also where an instance starts. Writes this
  // executor's copies only (an instance's own, a template's the context's); params and other
  // state (running statistics, optimizer moments) stay as they are. Abandons a run_steps run in
  // progress. No allocation; not thread-safe with a run of this executor.
  void reset_state();
  // Where tensor `id` lives for this executor: an instance's own copy for what runs write, the
  // shared storage otherwise; nullptr if the program has no such tensor or it has no storage.
  void* data(TensorId id) const;
  // Makes the run read (an input) or write (an output) tensor `id` at `p` instead of its own
  // storage: zero-copy binding of a caller's buffer. Requires `p` 64-byte aligned with room for
  // storage_bytes of the tensor's type (kernels touch whole 64-byte lines), and `id` an input or
  // output with storage of its own (never a planned temporary). Errors otherwise; nullptr restores
  // the tensor's own storage. Not thread-safe with a run of this executor; allocates only on a
  // tensor's first binding.
  Status bind(TensorId id, void* p);

  // Runs up to `max_steps` instructions of the forward section (after the derive section, as
  // run() does), starting where the previous call
  // stopped (a new forward run when the previous one finished); true once the run is complete.
  // Lets a caller spread one run over several frames; run() abandons a run in progress. No
  // allocation.
  bool run_steps(size_t max_steps);

  // A tensor of the program by name; nullptr if there is no such tensor. A planned temporary is
  // this executor's own record of it, whose storage is its slot in this executor's arena (an
  // instance's: in the instance's arena); its value is meaningful only until a later instruction
  // reuses the slot, so read outputs after a run (make a tensor an output to read it). Every
  // other tensor is the context's, which is the template's copy: an instance's own inputs,
  // outputs and carried state are at data(id).
  Tensor* tensor(const std::string& name) const;
  const Program& program() const { return *program_; }
  // Where program()'s temporaries live: empty at opt_level() 0.
  const MemoryPlan& memory_plan() const { return plan_; }
  // Name of the kernel instruction `i` runs: "ref", or a generated kernel's name such as
  // "f32_relu__avx512".
  const char* kernel_name(size_t i) const;
  // Whether run() calls a generated dispatch stream (else the interpreter loop).
  bool streamed() const { return stream_[0] != nullptr; }
  // How many parallel parts instruction `i` runs as (1: one kernel on the calling thread; 0: its
  // parts run in the parallel job of the instruction before it, each right after that one's).
  int parts(size_t i) const { return i < steps_.size() ? steps_[i].n_parts : 0; }

 private:
  // One slice of a step's output: a kernel and its arguments (its own scratch).
  struct Part {
    KernelFn fn;
    KernelArgs args;
  };
  struct Step {
    KernelFn fn;
    KernelArgs args;
    const char* kernel;  // name, owned by the JitKernel or static
    int n_parts;         // > 1: run parts_[first_part …] on the pool instead of fn; 0: joined
    size_t first_part;
    Part* parts;         // &parts_[first_part] and the pool, set once parts_ is complete
    ThreadPool* pool;
    // Kernels per part: task t runs parts[t·chain … t·chain + chain − 1] in order, the first
    // this step's part t, the others those of the steps joined to it (join_parallel_steps).
    int chain = 1;
  };
  Executor(const Program& p, Context& ctx) : program_(&p), ctx_(&ctx) {}
  // Where tensor `id` lives for this executor's kernels: its arena slot when planned, else the
  // context's storage.
  void* storage(TensorId id) const;
  // plan_ for program(), verified, and arena_ to hold it.
  Status plan_arena();
  // Runs the derive section if the context's params changed since it last ran (never for an
  // instance). Writes only the derived tensors, which runs of instances read.
  void derive_if_stale() const;
  bool derived(TensorId id) const;  // whether the derive section computes tensor `id`
  // Section `sec`'s steps: its dispatch stream, or the loop over them. No allocation.
  void run_section(Section sec) const;
  // After section `sec` ran: tells the context when it wrote params (an update section) or
  // state (a forward run in training mode), so derive sections rerun.
  void note_param_writes(Section sec);
  // Replaces the step's reference kernel by a generated one when the context's JIT has one, and
  // splits it into parts when the op says the work pays for it.
  void choose_kernel(Step* s, const Instruction& ins);
  // One step on the calling thread, or its parts on the pool.
  static void run_step(const Step& s);
  static void run_part(void* step, int task);
  static void run_part_timed(void* timing, int task);  // a StepTiming*
  // Joins a step to the parallel job of the step before it where each of its parts reads only
  // what the same part of that step finished (the ops' span hooks say so).
  void join_parallel_steps();
  bool join(Step* a, Step* b);
  // The generated kernels of `ins`'s n parts (split along its reduction with `along_k`), as
  // parts of step `s` into *parts and *kernels; false, with both incomplete, where the op has
  // none for some part (logged unless along_k, which an op may simply not do).
  bool make_parts(const Instruction& ins, const Step& s, int n, bool along_k, std::vector<Part>* parts,
                  std::vector<std::shared_ptr<const JitKernel>>* kernels);
  // In training (the program has an update section), whether `ins` reads a param (JitRequest).
  bool reads_trained_param(const Instruction& ins) const;
  static void run_parallel(const void* step);  // a step with parts, from the dispatch stream
  // Generates each section's dispatch stream (jit/stream.h) when the context's JIT is on;
  // without one, run() loops over the steps.
  void build_streams();

  const Program* program_;
  Context* ctx_;
  std::unique_ptr<Program> rebatched_;  // prepare(program, options)'s copy at another batch
  std::unique_ptr<Program> optimized_;  // the copy program_ points to, when optimized
  RunState state_;
  // Program::check_state_writable of program(), checked at prepare: set_training(true) needs it.
  Status state_writable_;
  uint64_t forward_runs_ = 0;  // the index the next forward run gets
  // The context's params_version() when the derive section last ran; an instance's is never
  // compared (derives_ false).
  mutable uint64_t derived_version_ = ~uint64_t(0);
  bool derives_ = true;
  std::vector<Step> steps_;
  std::pair<size_t, size_t> sections_[SECTION_COUNT];  // [begin, end) of each section in steps_
  // Backing arrays that the steps' KernelArgs point into; sized before any pointer is taken.
  std::vector<const void*> in_ptrs_;
  std::vector<void*> out_ptrs_;
  std::vector<TensorType> types_;
  // The generated kernels the steps call; holding them keeps their code alive.
  std::vector<std::shared_ptr<const JitKernel>> jit_;
  std::vector<Part> parts_;
  std::shared_ptr<ThreadPool> pool_;  // set when some step has parts
  KernelFn stream_[SECTION_COUNT] = {};
  std::shared_ptr<const JitKernel> stream_code_[SECTION_COUNT];
  // One scratch area shared by all steps (they run one after another), sized for the largest,
  // once per part of the step with the most parts.
  AlignedBuffer scratch_;
  MemoryPlan plan_;
  AlignedBuffer arena_;  // the planned temporaries' slots
  // This executor's records of its planned temporaries, in plan_.tensors' order: descriptor and
  // arena slot, no storage of their own.
  mutable std::vector<Tensor> planned_;
  // An instance's: the storage of the tensors a run writes that the template kept outside its
  // arena (inputs, outputs, unplanned temporaries), and where each template byte range moved.
  AlignedBuffer own_;
  struct Moved {
    const char* from;
    size_t bytes;
    char* to;
  };
  std::vector<Moved> moved_;  // sorted by `from`
  void* relocate(const void* p) const;
  // The carried state (Program::carried_state), where this executor keeps each, and its initial
  // values: a template's own block, which its instances read.
  struct Carried {
    TensorId id;
    size_t bytes;
    size_t init_offset;  // into carried_init_
    void* at;
  };
  Status prepare_carried();
  bool carried(TensorId id) const;
  std::vector<Carried> carried_;
  AlignedBuffer carried_init_own_;
  const char* carried_init_ = nullptr;
  size_t next_step_ = 0;  // run_steps' position in the forward section (0: at the start)
  int max_parts_ = 1;
  // Caller buffers bound by bind(): tensor, its own storage, where it is now.
  struct Bound {
    TensorId id;
    void* own;
    void* now;
  };
  std::vector<Bound> bound_;
};

}  // namespace nnasm
