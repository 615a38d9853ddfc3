// A Context is the runtime's tensor map (id → descriptor and stored values; isa/tensor_map.h) and
// owns everything else that belongs to one model: no process-wide mutable state, so two models in
// one process never collide. Not thread-safe:
// one thread builds or runs a context at a time.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/tensor.h"
#include "engine/thread_pool.h"
#include "isa/tensor_map.h"
#include "jit/cpu.h"
#include "jit/kernel.h"

namespace nnasm {

class Program;

class Context final : public TensorMap {
 public:
  // `seed` drives parameter initialization; ids come from the tensor map's own generator, so
  // that ids of different contexts do not coincide. Shape inference is the ops registry's.
  static constexpr uint64_t DEFAULT_SEED = 0x6e6e61736dULL;
  explicit Context(uint64_t seed = DEFAULT_SEED);

  // The context a program's tensors live in; nullptr when the program was built over a tensor
  // map that is not a runtime's (a DescriptorMap), which cannot be run.
  static Context* of(const Program& p);

  // Adds a tensor with a fresh id (the desc's id is overwritten). References stay valid until
  // the context dies: the map is node-based.
  Tensor& add(TensorDesc desc);
  // Removes a tensor (used to roll back a failed recording).
  void remove(TensorId id) override { tensors_.erase(id); }
  // The tensor map's view of the same tensors.
  TensorDesc& add_desc(TensorDesc desc) override { return add(std::move(desc)).desc; }
  TensorDesc* find_desc(TensorId id) override;
  const TensorDesc* find_desc(TensorId id) const override;
  bool stores_values() const override { return true; }
  Tensor* find(TensorId id);
  const Tensor* find(TensorId id) const;
  Tensor& at(TensorId id) { return tensors_.at(id); }
  const Tensor& at(TensorId id) const { return tensors_.at(id); }
  size_t size() const { return tensors_.size(); }

  uint64_t seed() const { return seed_; }
  void set_seed(uint64_t s) { seed_ = s; }

  // Tells the executors of this context that params (or constants) were written since their
  // last run, so that each recomputes its derive section (isa/instruction.h) before its next
  // forward run. Executors call it after an update section and after a forward run in training
  // mode (running statistics); whoever else writes a param, constant or state through a pointer
  // after a run (a loader, a gradient check) must call it too. Counts the changes.
  void params_changed() { ++params_version_; }
  uint64_t params_version() const { return params_version_; }

  // Code generation: from the environment at construction (NNASM_JIT, NNASM_ISA), changeable
  // before prepare. The cache holds every kernel generated for this context.
  const JitConfig& jit() const { return jit_; }
  void set_jit(const JitConfig& c) { jit_ = c; }
  KernelCache& kernels() { return kernels_; }

  // The optimizer level prepare applies to a copy of the program (engine/passes/pass.h): 1 by
  // default (-O1), 0 runs the program as written. NNASM_OPT=0|1 at construction.
  int opt_level() const { return opt_level_; }
  void set_opt_level(int level) { opt_level_ = level < 0 ? 0 : level; }
  // The passes prepare runs at a level above 0: empty (the default) runs the level's table;
  // otherwise exactly these, by name (`nnasm opt --list`), e.g. to keep chains unfused.
  const std::vector<std::string>& passes() const { return passes_; }
  void set_passes(std::vector<std::string> names) { passes_ = std::move(names); }

  // Whether executors prepared from now on flush denormal floats to zero while they run
  // (engine/denormals.h): true by default, NNASM_FLUSH_DENORMALS=0 at construction turns it off.
  bool flush_denormals() const { return flush_denormals_; }
  void set_flush_denormals(bool on) { flush_denormals_ = on; }

  // Threads for the parallel steps of executors prepared from now on: NNASM_THREADS at
  // construction (default: usable_cpus(), one per physical core the constructing thread may run
  // on, capped by the cgroup's CPU quota; engine/usable_cpus.h); 1 runs everything on the
  // caller's thread. set_threads drops the current pool (executors prepared with it keep it
  // alive) and clamps n to [1, 256].
  int threads() const { return threads_; }
  void set_threads(int n);
  // The pool of threads() threads, started on first use (allocates, starts threads). Executors
  // share it; the pool lets one job run at a time (a second caller runs its tasks itself).
  const std::shared_ptr<ThreadPool>& thread_pool();

  // Where the big blocks of this context's tensors and executors come from (HostAllocator); the
  // C heap by default. Set before anything is allocated; `a` is copied and lives with the context.
  void set_allocator(const HostAllocator& a) { allocator_ = a; has_allocator_ = a.alloc != nullptr; }
  const HostAllocator* allocator() const { return has_allocator_ ? &allocator_ : nullptr; }
  // Runs the parallel steps of executors prepared from now on on a host's job system instead of
  // our threads (ThreadPool::ExternalFn); null restores our pool. Parts are sized for threads().
  void set_parallel_for(ThreadPool::ExternalFn fn, void* user);
  // How long our pool's workers spin after a job before sleeping (default ThreadPool::SPIN_US;
  // 0: never spin, e.g. when a host's own threads need the cores).
  void set_pool_spin_us(int us);

  // Where the engine reports what it decided on its own (a kernel that fell back to the
  // reference, an ignored setting). Default: standard error with an "nnasm: " prefix.
  void set_log(std::function<void(const std::string&)> log) { log_ = std::move(log); }
  void log(const std::string& msg) const;

 private:
  uint64_t params_version_ = 0;
  std::unordered_map<TensorId, Tensor> tensors_;
  uint64_t seed_;
  JitConfig jit_;
  KernelCache kernels_;
  int threads_ = 1;
  int opt_level_ = 1;
  bool flush_denormals_ = true;
  std::vector<std::string> passes_;
  std::shared_ptr<ThreadPool> pool_;
  std::function<void(const std::string&)> log_;
  HostAllocator allocator_;
  bool has_allocator_ = false;
  ThreadPool::ExternalFn parallel_for_ = nullptr;
  void* parallel_for_user_ = nullptr;
  int spin_us_ = ThreadPool::SPIN_US;
};

}  // namespace nnasm
