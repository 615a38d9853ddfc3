// Keeps the README and docs/ honest. The op reference is the opcode table, expanded: the test
// rebuilds the table from isa/opcodes.def (each row's semantics comment from the file, its schema
// as compiled, with the activation table expanded) and checks docs/ops.md carries it verbatim; on
// failure it prints the table to paste. README.md stays short (at most README_MAX_BYTES), its map
// of docs/ names files that exist and every file there, and relative links in README.md and docs/
// resolve. tests/readme_build.sh (run by `make test`) compiles README's program with README's
// command line.
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
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

// The relative targets of the Markdown links in `text` ("docs/ops.md" of "[ops](docs/ops.md#x)"),
// without their #fragment; web addresses and in-page anchors are left out.
std::vector<std::string> relative_links(const std::string& text) {
  std::vector<std::string> out;
  const std::regex link(R"re(\]\(([^)\s#]+)(#[^)\s]*)?\))re");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), link); it != std::sregex_iterator(); ++it) {
    const std::string target = (*it)[1].str();
    if (target.find("://") == std::string::npos && target.rfind("mailto:", 0) != 0) out.push_back(target);
  }
  return out;
}

constexpr size_t README_MAX_BYTES = 15000;

TEST(Readme, OpReferenceMatchesTheOpcodeTable) {
  const std::string table = ops_table_from_def(read("isa/opcodes.def"));
  ASSERT_GT(std::count(table.begin(), table.end(), '\n'), 30);
  EXPECT_NE(read("docs/ops.md").find(table), std::string::npos) << "docs/ops.md's op table should be:\n" << table;
}

TEST(Readme, StaysShort) {
  const std::string r = read("README.md");
  ASSERT_FALSE(r.empty());
  EXPECT_LE(r.size(), README_MAX_BYTES) << "README.md is for a newcomer; move the detail to a file in docs/";
}

// The README's "Documentation" map names docs/*.md files that exist, and every one of them.
TEST(Readme, MapOfDocsMatchesTheFolder) {
  const std::string r = read("README.md");
  const size_t map = r.find("\n## Documentation\n");
  ASSERT_NE(map, std::string::npos) << "README.md has no '## Documentation' section";
  std::set<std::string> named;
  for (const std::string& l : relative_links(r.substr(map)))
    if (l.rfind("docs/", 0) == 0) named.insert(l);
  EXPECT_GE(named.size(), 10u);
  for (const std::string& n : named) EXPECT_TRUE(std::filesystem::is_regular_file(n)) << "README.md names " << n;
  for (const auto& e : std::filesystem::directory_iterator("docs")) {
    if (e.path().extension() != ".md") continue;
    const std::string p = "docs/" + e.path().filename().string();
    EXPECT_TRUE(named.count(p)) << p << " is missing from README.md's map of docs/";
  }
}

// Every relative link of README.md and docs/*.md points at a file or folder of the tree.
TEST(Readme, RelativeLinksResolve) {
  std::vector<std::filesystem::path> pages = {"README.md"};
  for (const auto& e : std::filesystem::directory_iterator("docs"))
    if (e.path().extension() == ".md") pages.push_back(e.path());
  for (const auto& page : pages)
    for (const std::string& l : relative_links(read(page.string())))
      EXPECT_TRUE(std::filesystem::exists(page.parent_path() / l)) << page.string() << " links to " << l;
}

TEST(Readme, ShowsTheTwoCommands) {
  const std::string r = read("README.md");
  EXPECT_NE(r.find("make run"), std::string::npos);
  EXPECT_NE(r.find("make test"), std::string::npos);
  EXPECT_NE(read(".ci/run").find("make test"), std::string::npos);
}

}  // namespace
