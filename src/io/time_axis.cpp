#include "time_axis.hpp"

#include <cctype>
#include <filesystem>
#include <set>

#include "core/types.hpp"

namespace vbagg::io {

namespace {

bool digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

std::string two_digits(int m) { return (m < 10 ? "0" : "") + std::to_string(m); }

const char* kTokens[] = {"{period}", "{year}", "{month}"};

}  // namespace

Period parse_period(const std::string& text, const std::string& where) {
  const std::string t = trim(text);
  const auto bad = [&] {
    return ConfigError(where + ": '" + t +
                       "' is not a period (give a month as YYYY-MM, e.g. 2019-03, or a year as YYYY)");
  };
  Period p;
  if (t.size() == 4 && digits(t)) {
    p.year = std::stoi(t);
  } else if (t.size() == 7 && t[4] == '-' && digits(t.substr(0, 4)) && digits(t.substr(5, 2))) {
    p.year = std::stoi(t.substr(0, 4));
    p.month = std::stoi(t.substr(5, 2));
    if (p.month < 1 || p.month > 12) throw bad();
  } else {
    throw bad();
  }
  p.label = p.month ? std::to_string(p.year) + "-" + two_digits(p.month) : std::to_string(p.year);
  return p;
}

TimeAxis::TimeAxis(std::vector<Period> periods, const std::string& where) : periods_(std::move(periods)) {
  for (size_t i = 1; i < periods_.size(); ++i) {
    const Period &a = periods_[i - 1], &b = periods_[i];
    if ((a.month == 0) != (b.month == 0))
      throw ConfigError(where + ": '" + a.label + "' and '" + b.label + "' mix months and years; use one or the other");
    if (a.year * 12 + a.month >= b.year * 12 + b.month)
      throw ConfigError(where + ": the periods must increase, but '" + b.label + "' follows '" + a.label + "'");
  }
}

double TimeAxis::time_of(const Period& p, int origin_year) {
  const double middle = p.month ? (p.month - 0.5) / 12.0 : 0.5;
  return static_cast<double>(p.year - origin_year) + middle;
}

long TimeAxis::index_of(const std::string& label) const {
  for (size_t i = 0; i < periods_.size(); ++i)
    if (periods_[i].label == label) return static_cast<long>(i);
  return -1;
}

std::vector<std::string> TimeAxis::labels() const {
  std::vector<std::string> out;
  for (const auto& p : periods_) out.push_back(p.label);
  return out;
}

TimeAxis parse_time_axis(const std::string& text, const std::string& where) {
  const std::string t = trim(text);
  if (t.empty()) return {};
  std::vector<Period> periods;
  if (const auto dots = t.find(".."); dots != std::string::npos) {
    const Period from = parse_period(t.substr(0, dots), where), to = parse_period(t.substr(dots + 2), where);
    if ((from.month == 0) != (to.month == 0))
      throw ConfigError(where + ": '" + from.label + "' and '" + to.label + "' mix months and years");
    if (from.year * 12 + from.month > to.year * 12 + to.month)
      throw ConfigError(where + ": the range '" + t + "' ends before it starts");
    if (from.month == 0) {
      for (int y = from.year; y <= to.year; ++y) periods.push_back(parse_period(std::to_string(y), where));
    } else {
      for (int k = from.year * 12 + from.month - 1; k <= to.year * 12 + to.month - 1; ++k)
        periods.push_back(parse_period(std::to_string(k / 12) + "-" + two_digits(k % 12 + 1), where));
    }
  } else {
    size_t start = 0;
    while (start <= t.size()) {
      const auto comma = t.find(',', start);
      periods.push_back(parse_period(t.substr(start, comma - start), where));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return TimeAxis(std::move(periods), where);
}

std::string period_label(const std::string& raw) {
  const std::string t = trim(raw);
  if (t.size() == 4 && digits(t)) return t;
  std::string year, month;
  if (t.size() == 6 && digits(t)) {
    year = t.substr(0, 4);
    month = t.substr(4);
  } else if (t.size() >= 6 && t[4] == '-' && digits(t.substr(0, 4))) {
    year = t.substr(0, 4);
    const auto dash = t.find('-', 5);
    month = t.substr(5, dash == std::string::npos ? std::string::npos : dash - 5);
    // A date: its day must be a number too.
    if (dash != std::string::npos && !digits(t.substr(dash + 1))) return "";
  } else {
    return "";
  }
  if (!digits(month) || month.size() > 2) return "";
  const int m = std::stoi(month);
  if (m < 1 || m > 12) return "";
  return year + "-" + (m < 10 ? "0" : "") + std::to_string(m);
}

bool has_period_tokens(const std::string& pattern) {
  for (const char* token : kTokens)
    if (pattern.find(token) != std::string::npos) return true;
  return false;
}

std::string expand_period(const std::string& pattern, const Period& p, const std::string& where) {
  if (p.month == 0 && pattern.find("{month}") != std::string::npos)
    throw ConfigError(where + ": '" + pattern + "' uses {month} but the periods are years");
  const std::string values[] = {p.label, std::to_string(p.year), two_digits(p.month)};
  std::string out = pattern;
  for (size_t k = 0; k < 3; ++k)
    for (size_t at = out.find(kTokens[k]); at != std::string::npos; at = out.find(kTokens[k], at))
      out.replace(at, std::string(kTokens[k]).size(), values[k]);
  return out;
}

std::string pattern_stem(const std::string& pattern) {
  std::string stem = std::filesystem::path(pattern).stem().string();
  for (const char* token : kTokens)
    for (size_t at = stem.find(token); at != std::string::npos; at = stem.find(token))
      stem.erase(at, std::string(token).size());
  const auto keep = [](char c) { return c != '_' && c != '-' && c != '.' && c != ' '; };
  while (!stem.empty() && !keep(stem.back())) stem.pop_back();
  while (!stem.empty() && !keep(stem.front())) stem.erase(stem.begin());
  return stem;
}

}  // namespace vbagg::io
