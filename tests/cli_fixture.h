// The `nnasm` tool as a subprocess, for the tests of its commands: arguments in; stdout, stderr
// and the exit status out. The tool is $NNASM_TOOL (make test sets it), else build/nnasm relative
// to the repo root, where tests run.
#pragma once
#include <fcntl.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "serialize/npy.h"
#include "tests/temp_dir_test.h"

namespace nnasm {

inline const char* tool_path() {
  const char* t = std::getenv("NNASM_TOOL");
  return t && *t ? t : "build/nnasm";
}

struct ToolResult {
  int code = -1;  // exit status, or 128 + signal number if the tool was killed
  std::string out, err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Whether `err` starts with `prefix`, a column number, and ": error: " (a compiler-style message).
inline bool has_location(const std::string& err, const std::string& prefix) {
  if (err.compare(0, prefix.size(), prefix) != 0) return false;
  size_t i = prefix.size();
  const size_t digits = i;
  while (i < err.size() && std::isdigit(static_cast<unsigned char>(err[i]))) ++i;
  return i > digits && err.compare(i, 9, ": error: ") == 0;
}

class CliTest : public TempDirTest {
 protected:
  void SetUp() override {
    ASSERT_EQ(::access(tool_path(), X_OK), 0) << tool_path() << " is missing: build it first (make build/nnasm)";
    TempDirTest::SetUp();
  }

  std::string put_npy(const std::string& name, const TensorType& t, const void* data) const {
    Status s = npy_write(path(name), t, data);
    EXPECT_TRUE(s.is_ok()) << s.message();
    return path(name);
  }

  // Runs the tool with `args`; stdout and stderr go to files, so no pipe can fill and block.
  ToolResult tool(const std::vector<std::string>& args) const {
    ToolResult r;
    const std::string out = path(".stdout"), err = path(".stderr");
    const pid_t pid = ::fork();
    if (pid == 0) {
      const int fo = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      const int fe = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fo < 0 || fe < 0 || ::dup2(fo, 1) < 0 || ::dup2(fe, 2) < 0) ::_exit(126);
      std::vector<char*> argv;
      argv.push_back(const_cast<char*>(tool_path()));
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    EXPECT_GT(pid, 0) << "fork failed";
    int st = 0;
    if (pid > 0 && ::waitpid(pid, &st, 0) == pid)
      r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    r.out = slurp(out);
    r.err = slurp(err);
    ::unlink(out.c_str());
    ::unlink(err.c_str());
    return r;
  }

};

}  // namespace nnasm
