// tests/bench/targets.awk (make bench-targets) on made-up benchmark output: the _median rows
// only, units, a label with a comma in it, a row with a fixed iteration count, an error row, the
// worst ratio over the libraries, and the count of targets met. And tests/bench/paired.sh on two
// made-up builds.
#include <cstdlib>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "tests/temp_dir_test.h"

namespace {

const char* const kHeader = "name,iterations,real_time,cpu_time,time_unit,bytes_per_second,items_per_second,label,"
                            "error_occurred,error_message";

class BenchTargetsTest : public TempDirTest {
 protected:
  // The script's output over the files, in order; "" if awk failed.
  std::string run(const std::string& files) {
    const std::string out = path("out.txt");
    const std::string cmd = "awk -f tests/bench/targets.awk " + files + " > " + out + " 2>&1";
    if (std::system(cmd.c_str()) != 0) return "";
    return get("out.txt");
  }
  // The output line that starts with `what`.
  static std::string line(const std::string& text, const std::string& what) {
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);)
      if (l.compare(0, what.size(), what) == 0) return l;
    return "";
  }
  // The line for `what` shows `figure` and ends with `met` (yes, no, or - where nothing is checked).
  static void expect_row(const std::string& text, const std::string& what, const std::string& figure,
                         const std::string& met) {
    const std::string l = line(text, what);
    EXPECT_NE(l.find(figure), std::string::npos) << what << ": " << l << "\n" << text;
    EXPECT_TRUE(l.size() > met.size() && l.compare(l.size() - met.size() - 1, met.size() + 1, " " + met) == 0)
        << what << ": " << l;
  }
};

TEST_F(BenchTargetsTest, ChecksEachTargetItHasAFigureFor) {
  const std::string threads = put("threads.csv", std::string("2026-11-26T20:00:00+00:00\nRunning nnasm_bench\n") + kHeader +
                                                     "\n"
                                                     "\"BM_threads_mlp_forward_b1/1_mean\",5,9.9,9.9,us,,,,,\n"
                                                     "\"BM_threads_mlp_forward_b1/1_median\",5,7.9,7.9,us,,,,,\n"
                                                     "\"BM_threads_mlp_forward_b1/2_median\",5,5.6,5.6,us,,,,,\n"
                                                     "\"BM_threads_mlp_train_b64/2_median\",5,0.34,0.34,ms,,,,,\n"
                                                     "\"BM_threads_gemv_1x784x256/1_median\",0,0,0,us,,,,true,"
                                                     "\"prepare failed\"\n");
  const std::string gemm = put("gemm.csv", std::string(kHeader) +
                                               ",\"lib_GFLOPS\",\"nnasm_GFLOPS\",\"time_ratio\"\n"
                                               "\"BM_gemm_square_vs_libxsmm/32_median\",5,1,1,ms,,,\"k\",,,180,167,1.08\n"
                                               "\"BM_gemm_square_vs_onednn/32_median\",5,1,1,ms,,,\"k\",,,90,160,0.6\n"
                                               "\"BM_gemm_square_vs_onednn/64_median\",5,1,1,ms,,,\"k\",,,160,170,0.95\n");
  const std::string gemm2 =
      put("gemm2.csv", std::string(kHeader) +
                           ",\"lib_GFLOPS\",\"nnasm_GFLOPS\",\"time_ratio\"\n"
                           "\"BM_threads_sgemm_vs_onednn/256/iterations:12_median\",5,1,1,ms,,,\"a vs b\",,,240,245,0.99\n");
  const std::string dispatch = put("dispatch.csv", std::string(kHeader) +
                                                       ",\"ns_per_instruction\"\n"
                                                       "\"BM_dispatch_1000_tiny/shape:0/mode:0_median\",5,4,4,us,,,"
                                                       "\"chain stream 1000 instructions, streamed\",,,4e-09\n"
                                                       "\"BM_dispatch_1000_tiny/shape:1/mode:0_median\",5,2.5,2.5,us,,,"
                                                       "\"indep stream 1000 instructions, streamed\",,,2.5e-09\n"
                                                       "\"BM_dispatch_1000_tiny/shape:2/mode:0_median\",5,3.5,3.5,us,,,"
                                                       "\"mixed stream 1000 instructions, streamed\",,,3.5e-09\n");
  const std::string out = run(threads + " " + gemm + " " + gemm2 + " " + dispatch);
  ASSERT_FALSE(out.empty());

  // Each row: its line, the figure on it, and the verdict. The median, not the mean; µs and ms
  // alike; an error row says so, and a row not run is not counted; for SGEMM, the worst ratio,
  // against the faster library; for dispatch, ns per instruction, the label's comma
  // notwithstanding, and the chain without a target.
  const struct {
    const char *what, *figure, *met;
  } rows[] = {
      {"MLP 784-256-128-10, batch 1, 1 thread", "7.90 us", "yes"},
      {"MLP 784-256-128-10, batch 1, 2 threads", "5.60 us", "no"},
      {"MLP training step, batch 64, 2 threads", "340.00 us", "yes"},
      {"GEMV 1x784 . 784x256, 1 thread", "error: prepare failed", "-"},
      {"MLP 784-256-128-10, batch 64, 1 thread", "not run", "-"},
      {"SGEMM 32^3, 1 thread", "1.080 (libxsmm)", "no"},
      {"SGEMM 64^3, 1 thread", "0.950 (onednn)", "yes"},
      {"SGEMM 256^3, 2 threads", "0.990 (onednn)", "yes"},
      {"SGEMM 128^3, 2 threads", "no library", "-"},
      {"dispatch, 1,000 one-float instructions: independent", "2.50 ns", "yes"},
      {"dispatch, 1,000 one-float instructions: five kernels", "3.50 ns", "no"},
      {"dispatch, 1,000 one-float instructions: a chain", "4.00 ns", "-"},
  };
  for (const auto& r : rows) expect_row(out, r.what, r.figure, r.met);

  // Met: b1/1, train/2, 64^3, 256^3 on 2 threads, independent dispatch. Missed: b1/2, 32^3,
  // five kernels.
  EXPECT_NE(out.find("5 of the 8 targets measured are met in this run."), std::string::npos) << out;
}

// tests/bench/paired.sh with two made-up builds that print fixed latency lines and log each run:
// A and B alternate which runs first (A, B, then B, A), the bench arguments reach both, ms read as
// 1000 µs, and the summary gives the median of B − A over the pairs and in how many B was faster.
TEST_F(BenchTargetsTest, PairedComparesTwoBuildsInAlternatingOrder) {
  auto fake = [&](const std::string& name, const std::string& p50s, const std::string& min) {
    const std::string log = path("runs.log");
    // Run n of both (the log's line count) is pair (n + 1) / 2: its figure is that item of p50s.
    const std::string script = "#!/bin/sh\necho \"" + name + " $*\" >> " + log +
                               "\nn=$(wc -l < " + log + ")\n" + "set -- " + p50s +
                               "\nshift $(( (n - 1) / 2 ))\n"
                               "echo \"latency:    p50 $1  p99 9.00 us  mean 5.00 us  min " + min +
                               "  (10 runs in 1.00 s)\"\n";
    const std::string file = put(name, script);
    EXPECT_EQ(std::system(("chmod +x " + file).c_str()), 0);
    return file;
  };
  // Pair i's p50: A 5.00 µs each; B 4.80, 4.90, 5.20 µs and 0.0053 ms (5.30 µs): B − A is −0.2,
  // −0.1, +0.2 and +0.3, median +0.05, B faster in 2 (0.0053 read as µs would give −0.15, 3).
  const std::string a = fake("a", "'5.00 us' '5.00 us' '5.00 us' '5.00 us'", "4.00 us");
  const std::string b = fake("b", "'4.80 us' '4.90 us' '5.20 us' '0.0053 ms'", "4.10 us");
  const std::string out = path("out.txt");
  const std::string cmd = "tests/bench/paired.sh " + a + " " + b + " 4 listing.nnasm --threads 2 > " + out;
  ASSERT_EQ(std::system((cmd + " 2>/dev/null").c_str()), 0);
  const std::string text = get("out.txt");
  for (const char* want : {"p50: A 5.00 us (median), B - A +0.050 us (median of pairs), B faster in 2 of 4",
                           "min: A 4.00 us (median), B - A +0.100 us (median of pairs), B faster in 0 of 4"})
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  EXPECT_EQ(get("runs.log"), "a bench listing.nnasm --threads 2\nb bench listing.nnasm --threads 2\n"
                              "b bench listing.nnasm --threads 2\na bench listing.nnasm --threads 2\n"
                              "a bench listing.nnasm --threads 2\nb bench listing.nnasm --threads 2\n"
                              "b bench listing.nnasm --threads 2\na bench listing.nnasm --threads 2\n");
  // Too few arguments: the usage, exit status 2.
  EXPECT_EQ(WEXITSTATUS(std::system(("tests/bench/paired.sh " + a + " > " + out + " 2>&1").c_str())), 2);
  EXPECT_NE(get("out.txt").find("Usage: tests/bench/paired.sh A B PAIRS"), std::string::npos) << get("out.txt");
}

}  // namespace
