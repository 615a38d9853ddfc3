// The pool's job word, the workers' spin-then-sleep loop and the futex calls.
#include "engine/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <climits>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace nnasm {

namespace {

inline void cpu_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

constexpr uint32_t gen_of(uint64_t job) { return static_cast<uint32_t>(job >> 32); }
constexpr int count_of(uint64_t job) { return static_cast<int>((job >> 16) & 0xffff); }
// Generations wrap around: a is at or after b.
constexpr bool not_before(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) >= 0; }

}  // namespace

ThreadPool::ThreadPool(int threads, ExternalFn external, void* user)
    : external_(external), external_user_(user), external_threads_(threads > 1 ? threads : 1) {}

ThreadPool::ThreadPool(int threads, int spin_us) : spin_us_(spin_us > 0 ? spin_us : 0) {
  const int n = threads > 1 ? threads - 1 : 0;
  awake_.assign(n + 1, 1);
  claimed_.reset(new GenLine[n + 1]);
  done_.reset(new GenLine[n + 1]);
  ranges_.reset(new RangeLine[n + 1]);
  workers_.reserve(n);
  for (int i = 0; i < n; ++i) workers_.emplace_back([this, i] { worker(i + 1); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_seq_cst);
  epoch_.fetch_add(1, std::memory_order_seq_cst);
  futex_wake_all(&epoch_);
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::run_tasks(int w, int n_tasks) {
  const TaskFn fn = fn_.load(std::memory_order_relaxed);
  void* const ctx = ctx_.load(std::memory_order_relaxed);
  if (w < n_tasks) fn(ctx, w);
}

bool ThreadPool::claim(int w, uint32_t gen) {
  std::atomic<uint32_t>& c = claimed_[w].gen;
  uint32_t seen = c.load(std::memory_order_acquire);
  while (!not_before(seen, gen))
    if (c.compare_exchange_weak(seen, gen, std::memory_order_acq_rel, std::memory_order_acquire)) return true;
  return false;
}

bool ThreadPool::take(int r, uint32_t gen, bool front, int* task) {
  std::atomic<uint64_t>& word = ranges_[r].word;
  uint64_t v = word.load(std::memory_order_acquire);
  for (;;) {
    const uint32_t f = (v >> 16) & 0xffff, b = v & 0xffff;
    if (gen_of(v) != gen || f >= b) return false;
    const uint64_t next = front ? v + (uint64_t(1) << 16) : v - 1;
    if (word.compare_exchange_weak(v, next, std::memory_order_acq_rel, std::memory_order_acquire)) {
      *task = static_cast<int>(front ? f : b - 1);
      return true;
    }
  }
}

void ThreadPool::run_balanced(int w, uint32_t gen) {
  const TaskFn fn = fn_.load(std::memory_order_relaxed);
  void* const ctx = ctx_.load(std::memory_order_relaxed);
  const int threads = this->threads();
  int t;
  while (take(w, gen, true, &t)) fn(ctx, t);
  for (int d = 1; d < threads; ++d)
    while (take((w + d) % threads, gen, false, &t)) fn(ctx, t);
}

void ThreadPool::worker(int w) {
  uint32_t seen = 0;  // the last generation this worker looked at
  for (;;) {
    // Spin for a new job; check the clock (vDSO, no system call) only every 64 pauses.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us_);
    uint64_t job = job_.load(std::memory_order_acquire);
    for (int i = 1; gen_of(job) == seen && !stop_.load(std::memory_order_relaxed); ++i) {
      cpu_pause();
      if (i % 64 == 0 && std::chrono::steady_clock::now() > deadline) break;
      job = job_.load(std::memory_order_acquire);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    if (gen_of(job) == seen) {
      // Sleep. The caller publishes (epoch_, then job_) and, when it finds a worker's tasks
      // unclaimed, reads sleepers_ with a seq_cst read-modify-write; this thread counts itself in
      // sleepers_ and then reads epoch_ (all seq_cst), so either the caller sees a sleeper and
      // wakes it, or this thread sees the new epoch and does not sleep.
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      if (epoch_.load(std::memory_order_seq_cst) == seen && !stop_.load(std::memory_order_seq_cst)) {
        sleeps_.fetch_add(1, std::memory_order_relaxed);
        // futex_wait may return spuriously (signals, EINTR): keep sleeping until the epoch moves
        // (a new job, or the destructor, which bumps it before waking).
        while (epoch_.load(std::memory_order_seq_cst) == seen) futex_wait(&epoch_, seen);
      }
      sleepers_.fetch_sub(1, std::memory_order_seq_cst);
      continue;
    }
    seen = gen_of(job);
    // The count came with the generation. A late worker may see a job the caller has finished
    // (having taken this worker's tasks over): the claim then fails.
    const int n_tasks = count_of(job);
    const bool balanced = n_tasks > threads();  // every thread joins a balanced job
    if ((!balanced && w >= n_tasks) || !claim(w, seen)) continue;
    if (balanced) run_balanced(w, seen);
    else run_tasks(w, n_tasks);
    done_[w].gen.store(seen, std::memory_order_release);
  }
}

void ThreadPool::run(int n_tasks, TaskFn fn, void* ctx) {
  if (n_tasks <= 0) return;
  if (external_) {
    external_(external_user_, n_tasks, fn, ctx);
    return;
  }
  if (workers_.empty() || n_tasks == 1 || busy_.exchange(true, std::memory_order_acquire)) {
    for (int t = 0; t < n_tasks; ++t) fn(ctx, t);
    return;
  }
  fn_.store(fn, std::memory_order_relaxed);
  ctx_.store(ctx, std::memory_order_relaxed);
  const uint32_t gen = gen_of(job_.load(std::memory_order_relaxed)) + 1;
  const int threads = this->threads();
  const bool balanced = n_tasks > threads;
  if (balanced)
    for (int w = 0; w < threads; ++w) {
      const uint64_t front = uint64_t(n_tasks) * w / threads, back = uint64_t(n_tasks) * (w + 1) / threads;
      ranges_[w].word.store(uint64_t(gen) << 32 | front << 16 | back, std::memory_order_relaxed);
    }
  epoch_.store(gen, std::memory_order_relaxed);
  job_.store(uint64_t(gen) << 32 | uint64_t(n_tasks) << 16, std::memory_order_release);
  // Wake sleepers now, so that they are up for the jobs after this one. The read may miss a
  // worker going to sleep this instant; the caller then takes its tasks over, and the
  // read-modify-write at the end wakes it.
  const bool woke = sleepers_.load(std::memory_order_relaxed) > 0;
  if (woke) futex_wake_all(&epoch_);
  bool took_over = false;
  if (balanced) run_balanced(0, gen);
  else run_tasks(0, n_tasks);
  const int used = std::min(n_tasks, threads);
  for (int w = 1; w < used; ++w) {
    std::atomic<uint32_t>& done = done_[w].gen;
    if (done.load(std::memory_order_acquire) == gen) continue;
    // Give an awake worker a moment to finish (it sees the job within a line transfer) before
    // looking at its claim, whose line it then writes again only after a transfer; one that was
    // asleep or missed its last tasks, none. In a balanced job every task is taken by now.
    if (!balanced && awake_[w] && !woke) {
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::microseconds(TAKE_OVER_US);
      for (int i = 1; done.load(std::memory_order_acquire) != gen; ++i) {
        cpu_pause();
        if (i % 8 == 0 && std::chrono::steady_clock::now() > give_up) break;
      }
      if (done.load(std::memory_order_acquire) == gen) continue;
    }
    // The worker has not joined the job: this claim makes its own fail. Its task is the
    // caller's; in a balanced job the others have taken all of its run already.
    if (claim(w, gen)) {
      awake_[w] = 0;
      took_over = true;
      if (!balanced) run_tasks(w, n_tasks);
      continue;
    }
    awake_[w] = 1;
    // Claimed: the tasks are short, so spin, yielding only if the worker seems descheduled
    // (more threads than cores).
    for (int i = 1; done.load(std::memory_order_acquire) != gen; ++i) {
      cpu_pause();
      if (i % 4096 == 0) std::this_thread::yield();
    }
  }
  if (took_over) {
    // A worker that missed the job may have gone to sleep unseen by the read above. This
    // read-modify-write is ordered with the sleepers' own (see worker()), so it sees them.
    if (sleepers_.fetch_add(0, std::memory_order_seq_cst) > 0) futex_wake_all(&epoch_);
  }
  busy_.store(false, std::memory_order_release);
}

}  // namespace nnasm
