#include "unit_issues.hpp"

#include <map>

namespace vbagg::io {

namespace {

std::string reason_of(const std::string& problem) { return problem.substr(0, problem.find(" (")); }

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string e = "\"";
  for (char c : s) e += c == '"' ? std::string("\"\"") : std::string(1, c);
  return e + "\"";
}

}  // namespace

std::vector<std::string> grouped_issue_lines(const std::vector<UnitIssue>& issues, size_t shown) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const UnitIssue*>> groups;
  for (const UnitIssue& i : issues) {
    auto& g = groups[reason_of(i.problem)];
    if (g.empty()) order.push_back(reason_of(i.problem));
    g.push_back(&i);
  }
  std::vector<std::string> lines;
  for (const std::string& reason : order) {
    const auto& g = groups[reason];
    if (g.size() == 1) {
      lines.push_back("  unit '" + g[0]->id + "': " + g[0]->problem);
      continue;
    }
    std::string ids;
    for (size_t k = 0; k < g.size() && k < shown; ++k) ids += (k ? ", '" : "'") + g[k]->id + "'";
    if (g.size() > shown) ids += " and " + std::to_string(g.size() - shown) + " more";
    lines.push_back("  " + std::to_string(g.size()) + " units: " + reason + ": " + ids);
  }
  return lines;
}

std::string issues_csv(const std::vector<UnitIssue>& issues) {
  std::string s = "unit,problem\n";
  for (const UnitIssue& i : issues) s += csv_field(i.id) + "," + csv_field(i.problem) + "\n";
  return s;
}

}  // namespace vbagg::io
