// The periods of a space-time fit (data.time): months "2019-03" or years "2019", their times as
// model inputs, and the {period}, {year} and {month} patterns that name each period's files and fields.
#pragma once

#include <string>
#include <vector>

namespace vbagg::io {

struct Period {
  std::string label;  // "2019-03" or "2019"
  int year = 0;
  int month = 0;  // 1..12, or 0 for a year
};

// "2019-03" or "2019"; throws ConfigError naming `where` for anything else.
Period parse_period(const std::string& text, const std::string& where);

class TimeAxis {
 public:
  TimeAxis() = default;
  // Increasing periods, all months or all years; throws ConfigError naming `where` otherwise.
  TimeAxis(std::vector<Period> periods, const std::string& where);

  bool empty() const { return periods_.empty(); }
  size_t size() const { return periods_.size(); }
  const std::vector<Period>& periods() const { return periods_; }
  const Period& operator[](size_t i) const { return periods_[i]; }
  bool monthly() const { return !periods_.empty() && periods_.front().month > 0; }
  // The calendar year whose 1 January is time 0 (the first period's year).
  int origin_year() const { return periods_.empty() ? 0 : periods_.front().year; }
  // The period's middle in years since 1 January of `origin_year`.
  static double time_of(const Period& p, int origin_year);
  double time(size_t i) const { return time_of(periods_[i], origin_year()); }
  // The period's index, or -1.
  long index_of(const std::string& label) const;
  std::vector<std::string> labels() const;

 private:
  std::vector<Period> periods_;
};

// data.time's text: "2019-01..2020-12" (every month or year from one to the other), one period, or
// a comma-separated list of periods. Empty text gives an empty axis.
TimeAxis parse_time_axis(const std::string& text, const std::string& where = "data.time");

// A period as tables write it: YYYY-MM, YYYYMM, YYYY-M, YYYY-MM-DD (its month) or YYYY. Returns
// the label ("2019-03", "2019"), or empty when the text is none of these.
std::string period_label(const std::string& text);

// Whether `pattern` names a period: it holds {period}, {year} or {month}.
bool has_period_tokens(const std::string& pattern);
// The pattern with {period}, {year} (4 digits) and {month} (2 digits) replaced by p's; throws
// ConfigError naming `where` for {month} with a yearly period.
std::string expand_period(const std::string& pattern, const Period& p, const std::string& where);
// A stable name from a pattern: the file stem with the tokens and the separators next to them
// removed ("rain_{period}.tif" -> "rain").
std::string pattern_stem(const std::string& pattern);

}  // namespace vbagg::io
