// The long layout of space-time responses: a table (CSV or any OGR table) with one row per unit and
// period, joined to the units by id.
#pragma once

#include <map>
#include <string>

#include "data_config.hpp"
#include "gdal_handles.hpp"

namespace vbagg::io {

// The rows of one period (spec.period) of spec.response_table, by unit id.
class PeriodRows {
 public:
  // Throws ConfigError for a missing field, DataError for a row whose period cannot be read or for
  // two rows of one unit and period.
  explicit PeriodRows(const UnitsSpec& spec);

  // The unit's row, or null when the table has none for this period.
  OGRFeature* row(const std::string& id) const;
  int response_index() const { return response_; }
  int trials_index() const { return trials_; }  // -1 without trials

 private:
  DatasetPtr table_;
  std::map<std::string, OGRFeatureUniquePtr> rows_;
  int response_ = -1, trials_ = -1;
};

}  // namespace vbagg::io
