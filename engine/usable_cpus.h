// How many threads the engine's parallel steps use by default (Context; `nnasm info` shows it):
// one per physical core that this process may run on, capped by its cgroup's CPU quota.
//
// Why not std::thread::hardware_concurrency(): it counts every online hardware thread, whatever
// the affinity mask (taskset, a game engine that keeps cores for its own threads, a container's
// cpuset) or the CPU quota (docker --cpus, Kubernetes limits) lets the process use. A pool sized
// by it spins more threads than the process has CPUs: under `taskset -c 0` on a 2-core machine,
// `nnasm bench samples/listing/mlp_b1_infer.nnasm` ran far slower with 2 threads than with 1, on
// average and at p99, and so did the training step (mlp_b64_train.nnasm --train; the figures are
// in docs/benchmarks.md). Hardware threads of one core (SMT) share
// its FMA units and its L2, which the GEMMs and GEMVs saturate, so a second thread per core adds
// a hand-off and no speed; PyTorch and ONNX Runtime default to physical cores for the same reason.
#pragma once
#include <string>
#include <string_view>

namespace nnasm {

struct UsableCpus {
  int threads = 1;   // the default thread count: cores, else allowed CPUs, capped by quota; ≥ 1
  int online = 0;    // hardware threads online
  int allowed = 0;   // hardware threads in the calling thread's affinity mask (0: unknown)
  int cores = 0;     // physical cores among them (0: topology unknown)
  double quota = 0;  // the cgroup CPU quota, in CPUs (0: none)
};

// The calling thread's affinity mask (read on each call, one system call), the cores of the CPUs
// in it (from /sys/devices/system/cpu, read once per process) and the cgroup CPU quota (read once
// per process: cgroup v2 cpu.max or v1 cpu.cfs_quota_us, the tightest from the process's cgroup up
// to the root). Never fails: what cannot be read stays unknown. Thread-safe.
UsableCpus usable_cpus();

// The parts, for tests.
// A cgroup v2 cpu.max line ("max 100000", "150000 100000") as CPUs; 0 for no limit or anything
// that does not parse.
double parse_cpu_max(std::string_view text);
// The tightest CPU quota, in CPUs, over the cgroups that `proc_self_cgroup` (the text of
// /proc/self/cgroup) names and their ancestors, in the cgroup file system mounted at `root`
// (/sys/fs/cgroup: cpu.max at v2 paths, cpu/cpu.cfs_quota_us at v1 paths); 0: none.
double cgroup_cpu_quota(std::string_view proc_self_cgroup, const std::string& root);

}  // namespace nnasm
