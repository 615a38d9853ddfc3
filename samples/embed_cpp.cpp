// embed_cpp.cpp — what samples/game_loop.c does, through the C++ API: one program prepared once
// (the shared model), one Executor::instantiate per agent (its own inputs, outputs and arena),
// agents spread over std::threads, every frame. With no arguments it runs 3 seconds of frames
// and prints frames/s and the per-agent inference time.
//
//   build/samples/embed_cpp [--threads N] [--seconds S] [--agents N]
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "engine/executor.h"
#include "serialize/listing.h"
#include "serialize/model_file.h"

using namespace nnasm;

namespace {

// The policy of game_loop.c; a game would ship a trained .nnm and call model_load instead.
const char kPolicy[] =
    "input  %obs : f32[1,32]\n"
    "param  @w1 : f32[32,64]  init=he_normal\n"
    "param  @b1 : f32[64]     init=zeros\n"
    "param  @w2 : f32[64,64]  init=he_normal\n"
    "param  @b2 : f32[64]     init=zeros\n"
    "param  @w3 : f32[64,8]   init=xavier_uniform\n"
    "param  @b3 : f32[8]      init=zeros\n"
    "output %action\n"
    "\n"
    "forward:\n"
    "  LINEAR  %obs, @w1, @b1 -> %h1  act=relu\n"
    "  LINEAR  %h1, @w2, @b2 -> %h2  act=relu\n"
    "  LINEAR  %h2, @w3, @b3 -> %z\n"
    "  SOFTMAX %z -> %action  axis=-1\n";

using Clock = std::chrono::steady_clock;

// C++17 has no std::barrier: every one of `n` threads waits until all have arrived.
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mu_);
    const long gen = generation_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != gen; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  const int n_;
  int arrived_ = 0;
  long generation_ = 0;
};

struct Agent {
  std::unique_ptr<Executor> instance;
  float* obs = nullptr;           // the instance's own input buffer (zero copy)
  const float* action = nullptr;  // and output buffer
  int choice = 0;
};

}  // namespace

int main(int argc, char** argv) {
  int threads = std::max(1u, std::thread::hardware_concurrency()), agents = 1000;
  double seconds = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--seconds")) seconds = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--agents")) agents = std::atoi(argv[i + 1]);
  }
  if (threads < 1 || agents < 1 || !(seconds > 0)) {
    fmt::print(stderr, "usage: {} [--threads N] [--seconds S] [--agents N]\n", argv[0]);
    return 1;
  }
  threads = std::min(threads, agents);

  // The shared model: parsed and prepared once; each run stays on its caller's thread.
  Context ctx;
  ctx.set_threads(1);
  Program program(ctx);
  if (Status s = program_parse(kPolicy, "policy", &program); !s) return fmt::print(stderr, "{}\n", s.message()), 1;
  auto model = Executor::prepare(program);
  if (!model) return fmt::print(stderr, "{}\n", model.status().message()), 1;
  const Program& run = model.value()->program();
  const TensorId obs_id = run.find("obs"), action_id = run.find("action");

  std::vector<Agent> all(agents);
  for (Agent& a : all) {
    auto in = model.value()->instantiate();
    if (!in) return fmt::print(stderr, "{}\n", in.status().message()), 1;
    a.instance = std::move(in.value());
    a.obs = static_cast<float*>(a.instance->data(obs_id));
    a.action = static_cast<const float*>(a.instance->data(action_id));
  }

  int frame = 0;
  bool stop = false;
  std::vector<double> busy(threads, 0);
  Barrier start(threads + 1), done(threads + 1);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      const int first = int(int64_t(agents) * t / threads), last = int(int64_t(agents) * (t + 1) / threads);
      for (;;) {
        start.arrive_and_wait();
        if (stop) return;
        for (int k = first; k < last; ++k)
          for (int i = 0; i < 32; ++i) all[k].obs[i] = std::sin(0.01f * frame + 0.37f * k + 0.5f * i);
        const Clock::time_point t0 = Clock::now();
        for (int k = first; k < last; ++k) {
          all[k].instance->run();
          all[k].choice = int(std::max_element(all[k].action, all[k].action + 8) - all[k].action);
        }
        busy[t] += std::chrono::duration<double>(Clock::now() - t0).count();
        done.arrive_and_wait();
      }
    });
  const Clock::time_point begin = Clock::now();
  while (std::chrono::duration<double>(Clock::now() - begin).count() < seconds) {
    start.arrive_and_wait();
    done.arrive_and_wait();
    ++frame;
  }
  stop = true;
  start.arrive_and_wait();
  for (std::thread& w : workers) w.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - begin).count();
  double total = 0;
  for (double b : busy) total += b;
  fmt::print("embed_cpp: {} agents, {} thread{}: {:.0f} frames/s; per-agent inference {:.2f} us (zero-copy input, run, "
             "argmax; mean over {} runs); agent 0 chose action {}\n",
             agents, threads, threads == 1 ? "" : "s", frame / elapsed, 1e6 * total / (double(frame) * agents),
             double(frame) * agents, all[0].choice);
  return 0;
}
