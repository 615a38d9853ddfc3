// The ONNX backend node tests, every one (`make onnx-conformance`): imports and runs each test of
// libonnx-testdata's data/node/ (tests/onnx/node_case.h says how) and writes a Markdown table —
// passed / failed / unsupported per test with the first reason, the totals, and per op type —
// to OUT (default build/onnx-conformance.md), and the names of the tests that passed to
// OUT.passed.txt (the .md replaced); prints the totals.
//
//   onnx_conformance [NODE_DIR [OUT.md]]
//
// Each test runs in a child process, so that a crash or a hang (over 60 s) is that test's
// failure rather than the end of the run. Exit status 0 when no test failed, 1 otherwise (an
// unsupported test is not a failure), 2 when NODE_DIR cannot be read.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/version.h"
#include "jit/cpu.h"
#include "serialize/atomic_file.h"
#include "serialize/onnx/onnx_import.h"
#include "tests/onnx/node_case.h"

using namespace nnasm;

namespace {

constexpr int TIMEOUT_SECONDS = 60;

// One test in a child process; its result comes back over a pipe as "outcome\nreason\nops...".
NodeCaseResult run_isolated(const std::string& dir) {
  int fd[2];
  NodeCaseResult r;
  if (::pipe(fd) != 0) {
    r.reason = "pipe failed";
    return r;
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fd[0]);
    ::alarm(TIMEOUT_SECONDS);
    const NodeCaseResult c = run_node_case(dir);
    std::string text = fmt::format("{}\n{}\n{}", static_cast<int>(c.outcome), c.reason, fmt::join(c.op_types, " "));
    for (size_t done = 0; done < text.size();) {
      const ssize_t n = ::write(fd[1], text.data() + done, text.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    ::_exit(0);
  }
  ::close(fd[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR);)
    if (n > 0) text.append(buf, static_cast<size_t>(n));
  ::close(fd[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    r.reason = WIFSIGNALED(st) ? fmt::format("the test process died of signal {} ({})", WTERMSIG(st), strsignal(WTERMSIG(st)))
                               : "the test process failed";
    return r;
  }
  const size_t a = text.find('\n'), b = a == std::string::npos ? a : text.find('\n', a + 1);
  if (b == std::string::npos) {
    r.reason = "no result from the test process";
    return r;
  }
  r.outcome = static_cast<NodeCaseResult::Outcome>(std::stoi(text.substr(0, a)));
  r.reason = text.substr(a + 1, b - a - 1);
  for (size_t p = b + 1; p < text.size();) {
    const size_t q = std::min(text.find(' ', p), text.size());
    r.op_types.push_back(text.substr(p, q - p));
    p = q + 1;
  }
  return r;
}

std::string cell(std::string s) {
  std::replace(s.begin(), s.end(), '|', '/');
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

struct Tally {
  int passed = 0, failed = 0, unsupported = 0;
  void add(NodeCaseResult::Outcome o) { ++(o == NodeCaseResult::PASSED ? passed : o == NodeCaseResult::FAILED ? failed : unsupported); }
  int total() const { return passed + failed + unsupported; }
};

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : ONNX_NODE_TEST_DIR;
  const std::string out = argc > 2 ? argv[2] : "build/onnx-conformance.md";
  std::vector<std::string> tests;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory()) tests.push_back(it->path().filename().string());
  if (ec || tests.empty()) {
    fmt::print(stderr, "onnx_conformance: error: no node tests in {} (install libonnx-testdata)\n", dir);
    return 2;
  }
  std::sort(tests.begin(), tests.end());

  const std::vector<std::string> claimed = onnx_supported_ops();
  Tally total;
  std::map<std::string, Tally> per_op;
  std::string rows, passed;
  for (const std::string& t : tests) {
    const NodeCaseResult r = run_isolated(dir + "/" + t);
    total.add(r.outcome);
    if (r.outcome == NodeCaseResult::PASSED) passed += t + "\n";
    for (const std::string& op : r.op_types) per_op[op].add(r.outcome);
    rows += fmt::format("| {} | {} | {} | {} |\n", t, outcome_name(r.outcome), cell(fmt::format("{}", fmt::join(r.op_types, " "))),
                        cell(r.reason));
    if (r.outcome == NodeCaseResult::FAILED) fmt::print("FAILED {}: {}\n", t, r.reason);
  }

  const std::string summary = fmt::format("{} tests: {} passed ({:.1f}%), {} failed, {} unsupported", total.total(),
                                          total.passed, 100.0 * total.passed / total.total(), total.failed,
                                          total.unsupported);
  std::string md = fmt::format(
      "# ONNX backend node tests\n\n"
      "nnasm {} at ISA level {} on the node tests of {} (`make onnx-conformance`, tests/onnx/conformance.cpp).\n"
      "A test counts under every op type its model uses. Claimed: an op type the importer maps.\n\n"
      "**{}**\n\n"
      "## Per op type\n\n| op type | claimed | tests | passed | failed | unsupported |\n|---|---|---|---|---|---|\n",
      NNASM_VERSION_STRING, (jit_config_from_env().enabled ? isa_name(jit_config_from_env().isa()) : "ref (JIT off)"), dir, summary);
  for (const auto& [op, t] : per_op)
    md += fmt::format("| {} | {} | {} | {} | {} | {} |\n", op,
                      std::binary_search(claimed.begin(), claimed.end(), op) ? "yes" : "", t.total(), t.passed, t.failed,
                      t.unsupported);
  md += "\n## Tests\n\n| test | result | op types | first reason |\n|---|---|---|---|\n" + rows;
  // The passed tests, as tests/onnx/passing_node_tests.txt lists them for the regression test.
  const std::string list = out.substr(0, out.rfind(".md")) + ".passed.txt";
  Status s = write_file_atomic(out, md);
  if (s) s = write_file_atomic(list, passed);
  if (!s) fmt::print(stderr, "onnx_conformance: {}\n", s.message());
  fmt::print("{}\nwrote {} and {}\n", summary, out, list);
  return total.failed == 0 && s ? 0 : 1;
}
