// The regression subset of the ONNX backend node tests: every test listed in
// tests/onnx/passing_node_tests.txt (those that passed when the list was written; `make
// onnx-conformance` runs all of them) must still pass, through tests/onnx/node_case.h. Skipped
// with the reason when Debian's libonnx-testdata is not installed.
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/onnx/node_case.h"

namespace nnasm {
namespace {

std::vector<std::string> listed_tests() {
  std::vector<std::string> v;
  std::ifstream f("tests/onnx/passing_node_tests.txt");
  for (std::string line; std::getline(f, line);)
    if (!line.empty() && line[0] != '#') v.push_back(line);
  return v;
}

TEST(OnnxNodeTests, TheListedOnesPass) {
  if (::access(ONNX_NODE_TEST_DIR, R_OK) != 0)
    GTEST_SKIP() << ONNX_NODE_TEST_DIR << " is missing: install libonnx-testdata (make deps does)";
  const std::vector<std::string> tests = listed_tests();
  ASSERT_GT(tests.size(), 100u) << "tests/onnx/passing_node_tests.txt lists too few tests (run from the repository root)";
  for (const std::string& t : tests) {
    const NodeCaseResult r = run_node_case(std::string(ONNX_NODE_TEST_DIR) + "/" + t);
    EXPECT_EQ(r.outcome, NodeCaseResult::PASSED) << t << ": " << outcome_name(r.outcome) << ": " << r.reason;
  }
}

}  // namespace
}  // namespace nnasm
