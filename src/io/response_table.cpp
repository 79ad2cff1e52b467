#include "response_table.hpp"

#include "core/types.hpp"
#include "units.hpp"

namespace vbagg::io {

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
