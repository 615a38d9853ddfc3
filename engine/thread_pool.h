// A small fork-join thread pool for the executor's parallel steps: `run` hands a job of n tasks to
// threads − 1 workers and the calling thread, and returns when every task is done. Built for
// back-to-back jobs of a few microseconds each: a job is published with one atomic store and
// tasks are claimed with compare-and-swap, so the fast path allocates nothing and makes no system
// call; a worker spins a bounded time (SPIN_US) after each job before it sleeps on a futex, so an
// idle pool burns no CPU and the next job after a pause pays one wake-up (tens of µs).
#pragma once
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace nnasm {

class ThreadPool {
 public:
  using TaskFn = void (*)(void* ctx, int task);
  static constexpr int MAX_TASKS = 0xffff;  // tasks per job
  static constexpr int SPIN_US = 40;        // default spin of a worker after a job, before it sleeps
  // A host's job system: runs fn(ctx, t) for each t in [0, n_tasks) and returns when all are done.
  using ExternalFn = void (*)(void* user, int n_tasks, TaskFn fn, void* ctx);

  // Requires threads ≥ 1 (smaller counts are taken as 1). Starts threads − 1 workers (none for
  // 1), which spin `spin_us` microseconds after each job before sleeping (0: sleep at once).
  // Allocates.
  explicit ThreadPool(int threads, int spin_us = SPIN_US);
  // A pool without threads of its own: run() hands every job to `external` (a host's
  // parallel_for), which must meet run()'s contract. `threads` is what parts are sized for.
  ThreadPool(int threads, ExternalFn external, void* user);
  // Wakes and joins the workers. Requires: no `run` in progress.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Calls fn(ctx, t) exactly once for each t in [0, n_tasks), on the workers and the calling
  // thread, and returns when all calls have returned (their writes are then visible). Requires
  // 0 ≤ n_tasks ≤ MAX_TASKS; fn must not call run on this pool. No allocation, no system call
  // unless a worker sleeps (then one futex wake). Thread-safe: a caller that finds the pool busy
  // with another caller's job runs its own tasks itself, in order.
  void run(int n_tasks, TaskFn fn, void* ctx);

  int threads() const { return external_ ? external_threads_ : static_cast<int>(workers_.size()) + 1; }
  // How many times a worker has gone to sleep since the pool started (for tests: an idle pool's
  // workers sleep rather than spin).
  uint64_t sleeps() const { return sleeps_.load(std::memory_order_relaxed); }
  // Workers asleep now (or about to be).
  int sleeping() const { return sleepers_.load(std::memory_order_seq_cst); }

 private:
  void worker();
  // Claims and runs tasks of the job published as generation `gen` until none is left.
  void work(uint32_t gen);

  // The job word: generation (32 bits) | task count (16) | next task to claim (16). Claiming with
  // CAS on the whole word means a late worker can never take a task of a newer job for an older
  // one, and the caller need not wait for workers that never joined the job.
  alignas(64) std::atomic<uint64_t> job_{0};
  // The job's function and context: written by the caller before job_ is published, read by a
  // worker only after it has claimed a task (so they cannot change under it).
  std::atomic<TaskFn> fn_{nullptr};
  std::atomic<void*> ctx_{nullptr};
  alignas(64) std::atomic<int> done_{0};       // tasks of the current job finished
  alignas(64) std::atomic<uint32_t> epoch_{0};  // the futex word: the generation, and stop
  std::atomic<int> sleepers_{0};
  std::atomic<uint64_t> sleeps_{0};
  std::atomic<bool> busy_{false};
  int spin_us_ = SPIN_US;
  ExternalFn external_ = nullptr;
  void* external_user_ = nullptr;
  int external_threads_ = 1;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> workers_;
};

}  // namespace nnasm
