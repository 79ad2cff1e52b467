#include "unit_issues.hpp"

#include <map>

#include "csv.hpp"

namespace vbagg::io {

namespace {

std::string reason_of(const std::string& problem) { return problem.substr(0, problem.find(" (")); }

}  // namespace

std::string listed_ids(const std::vector<std::string>& ids, size_t shown) {
  std::string s;
  for (size_t k = 0; k < ids.size() && k < shown; ++k) s += (k ? ", '" : "'") + ids[k] + "'";
  if (ids.size() > shown) s += " and " + std::to_string(ids.size() - shown) + " more";
  return s;
}

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
    std::vector<std::string> ids;
    for (const UnitIssue* i : g) ids.push_back(i->id);
    lines.push_back("  " + std::to_string(g.size()) + " units: " + reason + ": " + listed_ids(ids, shown));
  }
  return lines;
}

std::string issues_csv(const std::vector<UnitIssue>& issues) {
  std::string s = "unit,problem\n";
  for (const UnitIssue& i : issues) s += csv_field(i.id) + "," + csv_field(i.problem) + "\n";
  return s;
}

}  // namespace vbagg::io
