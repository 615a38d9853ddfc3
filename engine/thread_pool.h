// A small fork-join thread pool for the executor's parallel steps: `run` hands a job of n tasks to
// threads − 1 workers and the calling thread, and returns when every task is done. Built for
// back-to-back jobs of a few microseconds each, where what a job costs is the cache lines that
// cross between cores: a job is published with one store to a line the workers only read; task t
// belongs to thread t (a job of more tasks than threads gives each thread a run of them, which the
// others take over from its end once theirs are done), and a worker claims its tasks in a line of
// its own (no contended compare-and-swap) and reports them done in another, which the caller reads.
// So a job costs a line transfer each way, the least a fork-join can. A worker that is asleep,
// descheduled or late has its tasks taken over by the caller. The fast path allocates nothing and
// makes no system call; a worker spins a bounded time (SPIN_US) after each job before it sleeps on
// a futex, so an idle pool burns no CPU and the next job after a pause runs on the caller while the
// workers wake (tens of µs).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "jit/false_sharing.h"

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
  // 0 ≤ n_tasks ≤ MAX_TASKS; fn must not call run on this pool. Up to threads() tasks: task t
  // runs on thread t unless that thread is asleep or late (the caller then runs it). More tasks
  // balance: thread w owns the run of tasks [w·n/T, (w+1)·n/T) (T = threads()), runs them from
  // the front, and then takes what is left of the others' runs from their backs, so that a thread
  // that is slower or starts late leaves its last tasks to the others and each thread still runs
  // the same tasks from job to job when none is. No allocation, no system call unless a worker
  // sleeps (then one futex wake). Thread-safe: a caller that finds the pool busy with another
  // caller's job runs its own tasks itself, in order.
  void run(int n_tasks, TaskFn fn, void* ctx);

  int threads() const { return external_ ? external_threads_ : static_cast<int>(workers_.size()) + 1; }
  // How many times a worker has gone to sleep since the pool started (for tests: an idle pool's
  // workers sleep rather than spin).
  uint64_t sleeps() const { return sleeps_.load(std::memory_order_relaxed); }
  // Workers asleep now (or about to be).
  int sleeping() const { return sleepers_.load(std::memory_order_seq_cst); }

 private:
  static constexpr size_t LINE = FALSE_SHARING_BYTES;
  // A job generation on a line of its own. Per worker, two: the last job whose tasks it claimed
  // (or the caller took over), and the last job whose tasks it finished. Separate lines: the
  // caller reads `done` every job; `claimed` it reads only when it considers taking the tasks
  // over, so the worker's claim stays a local write.
  struct alignas(LINE) GenLine {
    std::atomic<uint32_t> gen{0};
  };
  // A thread's run of tasks in a job of more tasks than threads: generation (32 bits) | front
  // (16) | back (16), the tasks [front, back) not yet taken. Its owner takes from the front, the
  // others from the back, each with a compare-and-swap that fails for another job's word.
  struct alignas(LINE) RangeLine {
    std::atomic<uint64_t> word{0};
  };
  // How long the caller waits, after its own tasks, for an awake worker's tasks to be done before
  // it looks at the worker's claim, and runs the tasks itself if they are unclaimed (a worker sees
  // a job within a line transfer, well under a microsecond; one that takes longer has been
  // descheduled).
  static constexpr int TAKE_OVER_US = 2;

  void worker(int w);
  // Runs thread w's task of a job of up to threads() tasks, published last: task w, if there is one.
  void run_tasks(int w, int n_tasks);
  // Claims worker w's tasks of job gen for the calling thread; false if another thread has.
  bool claim(int w, uint32_t gen);
  // A job of more tasks than threads, as thread w: its own run, then the rest of the others'.
  void run_balanced(int w, uint32_t gen);
  // Takes a task of thread r's run of job gen, from the front or the back; false when none is
  // left (or the word is another job's).
  bool take(int r, uint32_t gen, bool front, int* task);

  // The job, written by the caller only, read by the workers: generation (32 bits) | task count
  // (16 bits) in one word, so that a worker sees a job's count with its generation; the function
  // and context, read by a worker only after it has claimed tasks of the job (the caller waits
  // for those, so they cannot change under it); the futex word (the generation); stop.
  alignas(LINE) std::atomic<uint64_t> job_{0};
  std::atomic<TaskFn> fn_{nullptr};
  std::atomic<void*> ctx_{nullptr};
  std::atomic<uint32_t> epoch_{0};
  std::atomic<bool> stop_{false};
  alignas(LINE) std::atomic<int> sleepers_{0};  // written by workers only when they sleep
  std::atomic<uint64_t> sleeps_{0};
  // Set at construction and only read after it: a worker reads these at every job (where its
  // lines are, the thread count), so no field that changes may share their lines. Next to busy_,
  // which the caller writes twice a job, each job cost the worker one more line transfer before
  // its task started (BM_threads_pool_empty_job/2 measures an empty job: docs/benchmarks.md).
  alignas(LINE) std::unique_ptr<GenLine[]> claimed_;
  std::unique_ptr<GenLine[]> done_;
  std::unique_ptr<RangeLine[]> ranges_;
  int spin_us_ = SPIN_US;
  ExternalFn external_ = nullptr;
  void* external_user_ = nullptr;
  int external_threads_ = 1;
  std::vector<std::thread> workers_;
  alignas(LINE) std::atomic<bool> busy_{false};  // the caller's
  // Whether worker w claimed its tasks of the last job it had any in (else the caller takes
  // them over without waiting: it is likely asleep or descheduled). The caller's, under busy_.
  std::vector<char> awake_;
};

}  // namespace nnasm
