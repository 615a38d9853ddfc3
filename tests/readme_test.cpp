// The README's op reference is the opcode table, expanded: this test rebuilds the table from
// isa/opcodes.def (each row's semantics comment from the file, its schema as compiled, with the
// activation table expanded) and checks README.md carries it verbatim. On failure it prints the
// table to paste.
#include <fstream>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "isa/opcode.h"

namespace {

std::string read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string ops_table_from_def(const std::string& def) {
  std::string t = "| id | mnemonic | inputs | immediates | computes |\n|---|---|---|---|---|\n";
  const std::regex row(
      R"re(^OPCODE\(\s*(\d+),\s*\w+,\s*"(\w+)",\s*(-?\d+),\s*(-?\d+),\s*(.*),\s*[A-Z_]+,\s*[^,]*\)\s*//\s*(.*)$)re");
  std::istringstream in(def);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    const std::string n_in = m[3] == "-1" ? "1+" : m[3].str();
    // The schema as the compiler sees it: its macros expand the activation table.
    std::string imm(nnasm::op_schema(nnasm::opcode_from_id(static_cast<uint32_t>(std::stoul(m[1].str())))));
    // Immediates are separated by spaces; a list default keeps its commas ([0,0]).
    int depth = 0;
    for (size_t p = 0; p < imm.size(); ++p) {
      depth += imm[p] == '[' ? 1 : imm[p] == ']' ? -1 : 0;
      if (imm[p] == ',' && depth == 0) imm[p] = ' ';
    }
    for (size_t p; (p = imm.find('|')) != std::string::npos;) imm.replace(p, 1, "/");
    t += fmt::format("| {} | `{}` | {} | {} | {} |\n", m[1].str(), m[2].str(), n_in, imm.empty() ? "" : "`" + imm + "`",
                     m[6].str());
  }
  return t;
}

TEST(Readme, OpReferenceMatchesTheOpcodeTable) {
  const std::string table = ops_table_from_def(read("isa/opcodes.def"));
  ASSERT_GT(std::count(table.begin(), table.end(), '\n'), 30);
  EXPECT_NE(read("README.md").find(table), std::string::npos) << "README.md's op table should be:\n" << table;
}

TEST(Readme, ShowsTheTwoCommands) {
  const std::string r = read("README.md");
  EXPECT_NE(r.find("make run"), std::string::npos);
  EXPECT_NE(r.find("make test"), std::string::npos);
  EXPECT_NE(read(".ci/run").find("make test"), std::string::npos);
}

}  // namespace
