// A googletest fixture with a fresh temporary directory per test, removed afterwards; for tests
// that write files (npy, the command-line tool).
#pragma once
#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/nnasm_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (dir_.empty()) return;
    for (const std::string& e : entries()) ::unlink(path(e).c_str());
    ::rmdir(dir_.c_str());
  }

  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  // Writes `bytes` to `name` in the directory; returns its path.
  std::string put(const std::string& name, const std::string& bytes) const {
    std::ofstream(path(name), std::ios::binary) << bytes;
    return path(name);
  }
  std::string get(const std::string& name) const {
    std::ifstream f(path(name), std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  std::vector<std::string> entries() const {
    std::vector<std::string> v;
    if (DIR* d = opendir(dir_.c_str())) {
      while (dirent* e = readdir(d))
        if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) v.push_back(e->d_name);
      closedir(d);
    }
    return v;
  }

  std::string dir_;
};
