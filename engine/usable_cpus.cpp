// The default thread count: the affinity mask, the cores' topology in sysfs, the cgroup quota.
#include "engine/usable_cpus.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <set>
#include <utility>
#include <vector>

namespace nnasm {

namespace {

// A small file's text (sysfs, procfs and cgroup files), at most 4 KiB of it; empty if unreadable.
std::string read_small(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "re");
  if (!f) return {};
  char buf[4096];
  const size_t n = std::fread(buf, 1, sizeof buf, f);
  std::fclose(f);
  return std::string(buf, n);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

// The whole of `s` (trimmed) as an integer.
bool parse_int(std::string_view s, int64_t* v) {
  s = trim(s);
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return !s.empty() && ec == std::errc() && end == s.data() + s.size();
}

double tighter(double a, double b) { return a <= 0 ? b : b <= 0 ? a : std::min(a, b); }

// cgroup v1: cpu.cfs_quota_us (-1: none) over cpu.cfs_period_us.
double v1_quota(const std::string& dir) {
  int64_t quota = 0, period = 0;
  if (!parse_int(read_small(dir + "/cpu.cfs_quota_us"), &quota) ||
      !parse_int(read_small(dir + "/cpu.cfs_period_us"), &period) || quota <= 0 || period <= 0)
    return 0;
  return static_cast<double>(quota) / static_cast<double>(period);
}

double v2_quota(const std::string& dir) { return parse_cpu_max(read_small(dir + "/cpu.max")); }

// The tightest quota from cgroup `path` up to the root of the hierarchy mounted at `mount`.
double along_path(const std::string& mount, std::string_view path, double (*quota_at)(const std::string&)) {
  double q = 0;
  std::string p(path);
  for (;;) {
    if (p == "/") p.clear();
    q = tighter(q, quota_at(mount + p));
    if (p.empty()) return q;
    p.erase(p.rfind('/'));
  }
}

// Whether the comma-separated controller list names `c`.
bool lists(std::string_view controllers, std::string_view c) {
  while (!controllers.empty()) {
    const size_t comma = controllers.find(',');
    if (controllers.substr(0, comma) == c) return true;
    if (comma == std::string_view::npos) return false;
    controllers.remove_prefix(comma + 1);
  }
  return false;
}

// Physical core of CPU `cpu` as (package, core); {-1, -1} if the topology is not readable.
std::pair<int64_t, int64_t> core_of(int cpu) {
  const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
  int64_t package = -1, core = -1;
  if (!parse_int(read_small(dir + "physical_package_id"), &package) || !parse_int(read_small(dir + "core_id"), &core))
    return {-1, -1};
  return {package, core};
}

// What does not change while the process runs: each CPU's core (the index is the CPU number, up to
// CPU_SETSIZE) and the cgroup quota.
struct Machine {
  std::vector<std::pair<int64_t, int64_t>> core;
  double quota = 0;
};

const Machine& machine() {
  static const Machine m = [] {
    Machine r;
    const long online = sysconf(_SC_NPROCESSORS_CONF);
    const int n = static_cast<int>(std::clamp<long>(online, 0, CPU_SETSIZE));
    for (int cpu = 0; cpu < n; ++cpu) r.core.push_back(core_of(cpu));
    r.quota = cgroup_cpu_quota(read_small("/proc/self/cgroup"), "/sys/fs/cgroup");
    return r;
  }();
  return m;
}

}  // namespace

double parse_cpu_max(std::string_view text) {
  text = trim(text);
  const size_t space = text.find(' ');
  if (space == std::string_view::npos) return 0;
  int64_t quota = 0, period = 0;
  if (!parse_int(text.substr(0, space), &quota) || !parse_int(text.substr(space + 1), &period) || quota <= 0 ||
      period <= 0)
    return 0;  // "max PERIOD" (no limit) lands here too
  return static_cast<double>(quota) / static_cast<double>(period);
}

double cgroup_cpu_quota(std::string_view text, const std::string& root) {
  double q = 0;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    const std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    // "ID:CONTROLLERS:PATH"; v2's line is "0::PATH".
    const size_t a = line.find(':'), b = a == std::string_view::npos ? a : line.find(':', a + 1);
    if (b == std::string_view::npos) continue;
    const std::string_view id = line.substr(0, a), controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (path.empty() || path.front() != '/' || path.find("/..") != std::string_view::npos) continue;
    if (id == "0" && controllers.empty()) {
      q = tighter(q, along_path(root, path, v2_quota));
    } else if (lists(controllers, "cpu")) {
      // v1 mounts the controller at root/cpu (often a link to root/cpu,cpuacct).
      q = tighter(q, along_path(root + "/cpu", path, v1_quota));
    }
  }
  return q;
}

UsableCpus usable_cpus() {
  const Machine& m = machine();
  UsableCpus u;
  u.online = static_cast<int>(std::max(0L, sysconf(_SC_NPROCESSORS_ONLN)));
  u.quota = m.quota;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    u.allowed = CPU_COUNT(&set);
    std::set<std::pair<int64_t, int64_t>> cores;
    bool known = u.allowed > 0;
    for (int cpu = 0; cpu < CPU_SETSIZE && known; ++cpu) {
      if (!CPU_ISSET(cpu, &set)) continue;
      known = cpu < static_cast<int>(m.core.size()) && m.core[cpu].first >= 0;
      if (known) cores.insert(m.core[cpu]);
    }
    if (known) u.cores = static_cast<int>(cores.size());
  }
  u.threads = u.cores > 0 ? u.cores : u.allowed > 0 ? u.allowed : std::max(u.online, 1);
  if (u.quota > 0) u.threads = std::min(u.threads, std::max(1, static_cast<int>(std::ceil(u.quota))));
  return u;
}

}  // namespace nnasm
