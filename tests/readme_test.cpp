// The README's op reference is the opcode table, expanded: this test rebuilds the table from
// isa/opcodes.def (including each row's semantics comment, and schemas written with the file's
// macros expanded) and checks README.md carries it verbatim. On failure it prints the table to paste.
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace {

std::string read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A row's schema as the compiler sees it: string literals and the #define'd schema macros of
// the file (NNASM_ACT_IMMS, ...) concatenated.
std::string expand_schema(const std::string& expr, const std::map<std::string, std::string>& macros) {
  std::string out;
  const std::regex token(R"re("([^"]*)"|(\w+))re");
  for (auto it = std::sregex_iterator(expr.begin(), expr.end(), token); it != std::sregex_iterator(); ++it) {
    const std::smatch& t = *it;
    if (t[1].matched) out += t[1].str();
    else if (macros.count(t[2].str())) out += macros.at(t[2].str());
  }
  return out;
}

std::string ops_table_from_def(const std::string& def) {
  std::string t = "| id | mnemonic | inputs | immediates | computes |\n|---|---|---|---|---|\n";
  const std::regex define(R"re(^#define\s+(\w+)\s+"([^"]*)"\s*$)re");
  const std::regex row(
      R"re(^OPCODE\(\s*(\d+),\s*\w+,\s*"(\w+)",\s*(-?\d+),\s*(-?\d+),\s*(.*),\s*[A-Z_]+,\s*[^,]*\)\s*//\s*(.*)$)re");
  std::map<std::string, std::string> macros;
  std::istringstream in(def);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, define)) macros[m[1].str()] = m[2].str();
    if (!std::regex_match(line, m, row)) continue;
    const std::string n_in = m[3] == "-1" ? "1+" : m[3].str();
    std::string imm = expand_schema(m[5].str(), macros);
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
