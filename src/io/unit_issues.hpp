// Problems that many units share, said in a few lines: one line per reason with its count, the
// first few ids and "and N more", so a layer of 1,000 point features gives one line, not 1,000.
// The full list (every unit and its problem) goes to a CSV file that the message names.
#pragma once

#include <string>
#include <vector>

#include "core/types.hpp"

namespace vbagg::io {

// One problem of one unit. The problem's text up to " (" is its reason, the group it is counted in;
// what follows is this unit's detail ("negative response (-3)").
struct UnitIssue {
  std::string id;
  std::string problem;
};

// "'a', 'b', 'c', 'd', 'e' and <n - shown> more": the first ids of a list.
std::string listed_ids(const std::vector<std::string>& ids, size_t shown = 5);

// "  <n> units: <reason>: 'a', 'b', 'c', 'd', 'e' and <n - shown> more" per reason, in order of
// first appearance; a reason of one unit keeps its detail: "  unit 'a': negative response (-3)".
std::vector<std::string> grouped_issue_lines(const std::vector<UnitIssue>& issues, size_t shown = 5);

// "unit,problem" and one quoted row per issue.
std::string issues_csv(const std::vector<UnitIssue>& issues);

// Units that cannot be used under data.on_bad_unit: stop. what() is the grouped message; the
// issues are kept for the full list.
class UnusableUnits : public DataError {
 public:
  UnusableUnits(const std::string& message, std::vector<UnitIssue> issues)
      : DataError(message), issues_(std::move(issues)) {}
  const std::vector<UnitIssue>& issues() const { return issues_; }

 private:
  std::vector<UnitIssue> issues_;
};

}  // namespace vbagg::io
