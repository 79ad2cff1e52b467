#include "response_table.hpp"

#include <cctype>

#include "core/types.hpp"
#include "units.hpp"

namespace vbagg::io {

namespace {

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

}  // namespace

std::string period_label(const std::string& raw) {
  const auto b = raw.find_first_not_of(" \t"), e = raw.find_last_not_of(" \t");
  if (b == std::string::npos) return "";
  const std::string t = raw.substr(b, e - b + 1);
  if (t.size() == 4 && all_digits(t)) return t;
  std::string year, month;
  if (t.size() == 6 && all_digits(t)) {
    year = t.substr(0, 4);
    month = t.substr(4);
  } else if (t.size() >= 6 && t[4] == '-' && all_digits(t.substr(0, 4))) {
    year = t.substr(0, 4);
    const auto dash = t.find('-', 5);
    month = t.substr(5, dash == std::string::npos ? std::string::npos : dash - 5);
    // A date: its day must be a number too.
    if (dash != std::string::npos && !all_digits(t.substr(dash + 1))) return "";
  } else {
    return "";
  }
  if (!all_digits(month) || month.size() > 2) return "";
  const int m = std::stoi(month);
  if (m < 1 || m > 12) return "";
  return year + "-" + (m < 10 ? "0" : "") + std::to_string(m);
}

PeriodRows::PeriodRows(const UnitsSpec& spec) : table_(open_vector(spec.response_table)) {
  OGRLayer* layer = table_->GetLayerCount() == 1 ? table_->GetLayer(0) : nullptr;
  if (!layer)
    throw ConfigError("data.units.response_table: '" + spec.response_table + "' has " +
                      std::to_string(table_->GetLayerCount()) + " layers; it must have one");
  OGRFeatureDefn* defn = layer->GetLayerDefn();
  const std::string& path = spec.response_table;
  const int id = units_field(defn, spec.id_field, "data.units.id_field", path);
  const int period = units_field(defn, spec.period_field, "data.units.period_field", path);
  response_ = units_field(defn, spec.response_field, "data.units.response_field", path);
  if (!spec.trials_field.empty()) trials_ = units_field(defn, spec.trials_field, "data.units.trials_field", path);
  layer->ResetReading();
  long line = 1;  // the header
  for (auto& f : *layer) {
    ++line;
    const std::string raw = f->IsFieldSetAndNotNull(period) ? f->GetFieldAsString(period) : "";
    const std::string label = period_label(raw);
    if (label.empty())
      throw DataError("response table '" + path + "', row " + std::to_string(line) + ": the period '" + raw +
                      "' is not a month (YYYY-MM, YYYYMM, YYYY-MM-DD) or a year (YYYY)");
    if (label != spec.period) continue;
    const std::string unit = f->IsFieldSetAndNotNull(id) ? f->GetFieldAsString(id) : "";
    if (!rows_.emplace(unit, OGRFeatureUniquePtr(f->Clone())).second)
      throw DataError("response table '" + path + "': unit '" + unit + "' has two rows for period " + spec.period +
                      " (the second is row " + std::to_string(line) + "); give one row per unit and period");
  }
}

OGRFeature* PeriodRows::row(const std::string& id) const {
  const auto it = rows_.find(id);
  return it == rows_.end() ? nullptr : it->second.get();
}

}  // namespace vbagg::io
