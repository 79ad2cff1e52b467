// The documentation: the generated configuration reference matches the code, and every relative
// link of the README and docs/ reaches a file, and a heading where it names one.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "../io/fixtures.hpp"
#include "run.hpp"

namespace vbagg {
namespace {

namespace fs = std::filesystem;
using test::bin;
using test::run;

TEST(Docs, ConfigurationReferenceIsCurrent) {
  const auto r = run(bin("vbagg-train") + " --markdown-config");
  ASSERT_EQ(r.code, 0);
  EXPECT_EQ(test::read_text(std::string(VBAGG_SOURCE_DIR) + "/docs/configuration.md"), r.output)
      << "regenerate with: build/apps/vbagg-train --markdown-config > docs/configuration.md";
}

// A markdown file's lines outside fenced code blocks, where a '#' starts a shell comment and
// brackets are code.
std::vector<std::string> prose_lines(const fs::path& file) {
  std::istringstream in(test::read_text(file.string()));
  std::vector<std::string> lines;
  bool fenced = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("```", 0) == 0) {
      fenced = !fenced;
      continue;
    }
    if (!fenced) lines.push_back(line);
  }
  return lines;
}

// Bytes outside ASCII dropped: GitHub keeps a heading's letters such as 'é' and drops symbols
// such as '×' or '→', and both sides of the comparison lose them alike.
std::string ascii_only(const std::string& s) {
  std::string out;
  for (const char c : s)
    if (static_cast<unsigned char>(c) < 0x80) out += c;
  return out;
}

// GitHub's anchor of a heading: lower case, punctuation dropped, each space a hyphen.
std::string anchor_of(const std::string& heading) {
  std::string out;
  for (const char c : ascii_only(heading)) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '_') out += static_cast<char>(std::tolower(u));
    if (c == ' ') out += '-';
  }
  return out;
}

// Every anchor a file's headings make; a repeated heading's later ones end in -1, -2, ...
std::set<std::string> anchors_of(const fs::path& file) {
  std::set<std::string> anchors;
  std::map<std::string, int> seen;
  static const std::regex heading(R"(^#{1,6} +(.*?) *$)");
  for (const auto& line : prose_lines(file)) {
    std::smatch m;
    if (!std::regex_match(line, m, heading)) continue;
    const std::string a = anchor_of(m[1].str());
    const int n = seen[a]++;
    anchors.insert(n == 0 ? a : a + "-" + std::to_string(n));
  }
  return anchors;
}

TEST(Docs, EveryRelativeLinkReachesItsFileAndHeading) {
  const fs::path root(VBAGG_SOURCE_DIR);
  std::vector<fs::path> files = {root / "README.md"};
  for (const auto& e : fs::directory_iterator(root / "docs"))
    if (e.path().extension() == ".md") files.push_back(e.path());
  static const std::regex link(R"(\]\(([^)\s#]*)(#[^)\s]*)?\))");
  std::map<fs::path, std::set<std::string>> anchors;  // each linked file's, read once
  int links = 0, anchored = 0;
  for (const auto& file : files) {
    for (const auto& line : prose_lines(file)) {
      for (std::sregex_iterator it(line.begin(), line.end(), link), end; it != end; ++it) {
        const std::string target = (*it)[1].str(), anchor = (*it)[2].str();
        if (target.find("://") != std::string::npos || target.rfind("mailto:", 0) == 0) continue;
        ++links;
        const fs::path to = target.empty() ? file : (file.parent_path() / target).lexically_normal();
        const std::string where = file.filename().string() + ": (" + target + anchor + ")";
        if (!fs::exists(to)) {
          ADD_FAILURE() << where << ": no file " << to;
          continue;
        }
        if (anchor.size() <= 1 || to.extension() != ".md") continue;
        ++anchored;
        if (!anchors.count(to)) anchors[to] = anchors_of(to);
        EXPECT_EQ(anchors[to].count(ascii_only(anchor.substr(1))), 1u) << where << ": no such heading";
      }
    }
  }
  // The scan itself: the docs link to each other's sections by the hundred.
  EXPECT_GT(links, 200);
  EXPECT_GT(anchored, 150);
}

}  // namespace
}  // namespace vbagg
