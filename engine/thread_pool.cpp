// The pool's job word, the workers' spin-then-sleep loop and the futex calls.
#include "engine/thread_pool.h"

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
constexpr int next_of(uint64_t job) { return static_cast<int>(job & 0xffff); }

}  // namespace

ThreadPool::ThreadPool(int threads, ExternalFn external, void* user)
    : external_(external), external_user_(user), external_threads_(threads > 1 ? threads : 1) {}

ThreadPool::ThreadPool(int threads, int spin_us) : spin_us_(spin_us > 0 ? spin_us : 0) {
  const int n = threads > 1 ? threads - 1 : 0;
  workers_.reserve(n);
  for (int i = 0; i < n; ++i) workers_.emplace_back([this] { worker(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_seq_cst);
  epoch_.fetch_add(1, std::memory_order_seq_cst);
  futex_wake_all(&epoch_);
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::work(uint32_t gen) {
  uint64_t j = job_.load(std::memory_order_acquire);
  for (;;) {
    if (gen_of(j) != gen || next_of(j) >= count_of(j)) return;
    if (!job_.compare_exchange_weak(j, j + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    // A claimed task keeps the job from completing, so fn_ and ctx_ are this job's.
    fn_.load(std::memory_order_relaxed)(ctx_.load(std::memory_order_relaxed), next_of(j));
    done_.fetch_add(1, std::memory_order_release);
    j = job_.load(std::memory_order_acquire);
  }
}

void ThreadPool::worker() {
  uint32_t seen = 0;  // the last generation this worker took part in
  for (;;) {
    // Spin for a new job; check the clock (vDSO, no system call) only every 64 pauses.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us_);
    uint32_t gen = gen_of(job_.load(std::memory_order_acquire));
    for (int i = 1; gen == seen && !stop_.load(std::memory_order_relaxed); ++i) {
      cpu_pause();
      if (i % 64 == 0 && std::chrono::steady_clock::now() > deadline) break;
      gen = gen_of(job_.load(std::memory_order_acquire));
    }
    if (stop_.load(std::memory_order_acquire)) return;
    if (gen == seen) {
      // Sleep. The caller publishes (epoch_, then job_) and then reads sleepers_; this thread
      // counts itself in sleepers_ and then reads epoch_ (all seq_cst), so either the caller sees
      // a sleeper and wakes it, or this thread sees the new epoch and does not sleep.
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
    seen = gen;
    work(gen);
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
  done_.store(0, std::memory_order_relaxed);
  const uint32_t gen = gen_of(job_.load(std::memory_order_relaxed)) + 1;
  epoch_.store(gen, std::memory_order_seq_cst);
  job_.store(uint64_t(gen) << 32 | uint64_t(n_tasks) << 16, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) futex_wake_all(&epoch_);
  work(gen);
  // The last tasks may still run on workers; they are short, so spin, yielding only if a worker
  // seems descheduled (more threads than cores).
  for (int i = 1; done_.load(std::memory_order_acquire) < n_tasks; ++i) {
    cpu_pause();
    if (i % 4096 == 0) std::this_thread::yield();
  }
  busy_.store(false, std::memory_order_release);
}

}  // namespace nnasm
