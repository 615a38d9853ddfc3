// The default thread count (engine/usable_cpus.h): the cgroup quota parsers on made-up cgroup
// trees (v2 cpu.max, v1 cpu.cfs_quota_us, ancestors' limits, junk), and the affinity mask as a
// thread pinned to one CPU sees it, through usable_cpus(), a Context and `nnasm info`.
#include "engine/usable_cpus.h"

#include <pthread.h>
#include <sched.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "engine/context.h"
#include "tests/cli_fixture.h"

namespace nnasm {
namespace {

TEST(UsableCpus, CpuMaxParses) {
  EXPECT_EQ(parse_cpu_max("150000 100000\n"), 1.5);
  EXPECT_EQ(parse_cpu_max("50000 100000"), 0.5);
  EXPECT_EQ(parse_cpu_max("400000 100000"), 4.0);
  for (const char* none : {"max 100000\n", "", "\n", "100000", "abc def", "-5 100000", "100000 0", "100000 -1",
                           "1.5 100000", "99999999999999999999 100000", "100000 100000 7"})
    EXPECT_EQ(parse_cpu_max(none), 0) << "'" << none << "'";
}

class CgroupTree : public TempDirTest {
 protected:
  void TearDown() override {
    std::filesystem::remove_all(dir_ + "/fs");
    TempDirTest::TearDown();
  }
  // Writes `text` to fs/`file` (a path under the fake cgroup root), making its folders.
  void file(const std::string& rel, const std::string& text) {
    const std::filesystem::path p = root() + "/" + rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  std::string root() const { return dir_ + "/fs"; }
};

TEST_F(CgroupTree, V2TakesTheTightestLimitFromTheCgroupUp) {
  file("a/b/cpu.max", "max 100000\n");
  file("a/cpu.max", "250000 100000\n");
  EXPECT_EQ(cgroup_cpu_quota("0::/a/b\n", root()), 2.5);  // the parent's limit applies
  file("a/b/cpu.max", "150000 100000\n");
  EXPECT_EQ(cgroup_cpu_quota("0::/a/b\n", root()), 1.5);
  EXPECT_EQ(cgroup_cpu_quota("0::/\n", root()), 0);      // the root has no cpu.max
  EXPECT_EQ(cgroup_cpu_quota("0::/x/y\n", root()), 0);   // a cgroup that is not there
}

TEST_F(CgroupTree, V1ReadsTheCpuControllersQuota) {
  file("cpu/k8s/pod/cpu.cfs_quota_us", "200000\n");
  file("cpu/k8s/pod/cpu.cfs_period_us", "100000\n");
  file("cpu/k8s/cpu.cfs_quota_us", "-1\n");
  file("cpu/k8s/cpu.cfs_period_us", "100000\n");
  file("cpu/cpu.cfs_quota_us", "-1\n");
  file("cpu/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(cgroup_cpu_quota("12:memory:/k8s/pod\n3:cpu,cpuacct:/k8s/pod\n0::/\n", root()), 2.0);
  EXPECT_EQ(cgroup_cpu_quota("3:cpuacct:/k8s/pod\n", root()), 0);  // not the cpu controller
  EXPECT_EQ(cgroup_cpu_quota("3:cpu:/k8s\n", root()), 0);          // -1: no limit
}

TEST_F(CgroupTree, JunkIsNoLimit) {
  file("a/cpu.max", "100000 100000\n");
  for (const char* text : {"", "junk", "::", "0::a\n", "0:cpu\n", "\n\n\n", "0::/a/../../..\n"})
    EXPECT_EQ(cgroup_cpu_quota(text, root()), 0) << "'" << text << "'";
}

// Runs f on a thread allowed only the first CPU of this thread's mask.
template <typename F>
void on_one_cpu(F f) {
  cpu_set_t mine;
  ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
  int first = 0;
  while (!CPU_ISSET(first, &mine)) ++first;
  std::thread t([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof one, &one), 0);
    f();
  });
  t.join();
}

TEST(UsableCpus, AThreadPinnedToOneCpuGetsOneThread) {
  const UsableCpus all = usable_cpus();
  EXPECT_GE(all.threads, 1);
  EXPECT_GE(all.online, 1);
  if (all.cores > 0) {
    EXPECT_LE(all.cores, all.allowed);
  }
  on_one_cpu([] {
    const UsableCpus u = usable_cpus();
    EXPECT_EQ(u.allowed, 1);
    EXPECT_LE(u.cores, 1);
    EXPECT_EQ(u.threads, 1);
    const char* env = std::getenv("NNASM_THREADS");
    if (!env || !*env) {
      EXPECT_EQ(Context().threads(), 1);
    }
  });
}

class UsableCpusTool : public CliTest {};

// `nnasm info` as a process started with a one-CPU mask (the mask is inherited) reports it.
TEST_F(UsableCpusTool, InfoShowsTheCpusTheProcessMayUse) {
  on_one_cpu([&] {
    const ToolResult r = tool({"info"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find(" of the 1 CPU this process may use"), std::string::npos) << r.out;
    const char* env = std::getenv("NNASM_THREADS");
    if (!env || !*env) {
      EXPECT_NE(r.out.find("\nthreads:  1 (one per core: "), std::string::npos) << r.out;
    }
  });
}

}  // namespace
}  // namespace nnasm
