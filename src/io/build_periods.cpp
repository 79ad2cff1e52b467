#include "build_periods.hpp"

#include <algorithm>

#include "build_report.hpp"
#include "coordinates.hpp"
#include "core/kernel.hpp"
#include "gather_source.hpp"
#include "unit_issues.hpp"

namespace vbagg::io {

namespace {

// Period i's gathered units after the periods before it: their places among all units, their
// notes (each said once) and dropped units; returns the period's bags.
Dataset append_period(BuiltData& out, BuiltData part, size_t i) {
  for (auto& u : part.units) u.period = static_cast<int>(i);
  for (Index& g : part.dataset.global_bag) g += static_cast<Index>(out.units.size());
  out.units.insert(out.units.end(), part.units.begin(), part.units.end());
  out.cell.insert(out.cell.end(), part.cell.begin(), part.cell.end());
  out.dropped.insert(out.dropped.end(), part.dropped.begin(), part.dropped.end());
  for (const auto& n : part.notes)
    if (std::find(out.notes.begin(), out.notes.end(), n) == out.notes.end()) out.notes.push_back(n);
  return std::move(part.dataset);
}

// The settings a space-time build needs on top of one period's.
void check_time_config(const DataConfig& config) {
  if (!config.more_sources.empty())
    throw ConfigError("data.time and data.sources cannot be combined: a space-time fit has one source of units");
  const UnitsSpec& u = config.units;
  if (u.response_table.empty() && !has_period_tokens(u.response_field))
    throw ConfigError("data.time lists " + std::to_string(config.time.size()) +
                      " periods, so each unit needs a response per period: give data.units.response_field as a "
                      "pattern with {period}, {year} or {month} (a field per period, e.g. cases_{year}{month}), or "
                      "data.units.response_table (one row per unit and period)");
  if (!u.response_table.empty() && has_period_tokens(u.response_field))
    throw ConfigError("data.units.response_field '" + u.response_field +
                      "' is a pattern, but data.units.response_table holds one row per unit and period: name the "
                      "table's response column instead");
}

// Appends the time rows to every pixel: its period's time inputs (kernel.hpp).
void add_time_inputs(const TimeAxis& time, const std::vector<Index>& period_pixels, BuiltData& out) {
  Dataset& d = out.dataset;
  const Index D = d.num_inputs(), N = d.num_pixels();
  Matrix X(D + kTimeInputs, N);
  X.topRows(D) = d.inputs;
  Vector t(kTimeInputs);
  Index pos = 0;
  for (size_t i = 0; i < period_pixels.size(); ++i) {
    time_inputs(time.time(i), t);
    X.bottomRows(kTimeInputs).middleCols(pos, period_pixels[i]).colwise() = t;
    pos += period_pixels[i];
  }
  d.inputs = std::move(X);
  d.input_names.insert(d.input_names.end(), {"time_years", "season_cos", "season_sin"});
}

}  // namespace

BuiltData build_periods(const DataConfig& config, const std::string& base_dir, const Collective& processes) {
  check_time_config(config);
  BuiltData out = empty_build(config, base_dir);
  std::vector<Dataset> parts;
  std::vector<Index> period_pixels;
  Covariates first;
  for (size_t i = 0; i < config.time.size(); ++i) {
    BuiltData part;
    part.grid = out.grid;
    part.grid_path = out.grid_path;
    // Each period is shared out afresh, by the units' geometries alone (own_units): a unit's
    // periods land on one process, as a unit effect shared by its periods needs.
    std::vector<Index> load;
    Covariates covs = gather_source(period_config(config, i), base_dir, processes, load, part);
    if (i == 0)
      first = std::move(covs);
    else if (covs.names != first.names)
      throw DataError("period " + config.time[i].label + " has the covariates " + listed_ids(covs.names) +
                      " but period " + config.time[0].label + " " + listed_ids(first.names) +
                      ": every period needs the same covariates");
    period_pixels.push_back(part.dataset.num_pixels());
    parts.push_back(append_period(out, std::move(part), i));
  }
  // Rates are compared over every unit and period at once: one warning, not one per period.
  out.warnings = implausible_units(out, config.units.point_buffer >= 0);
  out.dataset = join_sources(parts);
  out.dataset.source.clear();
  out.num_coordinates = config.coordinates ? CoordinateMapper(out.grid).count() : 0;
  drop_constant_covariates(first, processes, out);
  add_time_inputs(config.time, period_pixels, out);
  out.time = config.time;
  if (out.dataset.num_bags() > 0 || processes.size() == 1) out.dataset.validate();
  return out;
}

BuiltData build_periods_in_batches(const DataConfig& config, const std::string& base_dir, Index batch_pixels,
                                   const std::function<void(BuiltData&)>& consume, const Collective& processes) {
  check_time_config(config);
  BuiltData out = empty_build(config, base_dir);
  Vector t(kTimeInputs);
  for (size_t i = 0; i < config.time.size(); ++i) {
    time_inputs(config.time.time(i), t);
    const Index before = static_cast<Index>(out.units.size());
    BuiltData part = build_dataset_in_batches(
        period_config(config, i), base_dir, batch_pixels,
        [&](BuiltData& b) {
          Dataset& d = b.dataset;
          for (Index& g : d.global_bag) g += before;
          b.first_unit += before;
          for (auto& u : b.units) u.period = static_cast<int>(i);
          Matrix X(d.num_inputs() + kTimeInputs, d.num_pixels());
          X.topRows(d.num_inputs()) = d.inputs;
          X.bottomRows(kTimeInputs).colwise() = t;
          d.inputs = std::move(X);
          b.time = config.time;
          consume(b);
        },
        processes);
    if (i == 0) {
      out.covariates = part.covariates;
      out.num_coordinates = part.num_coordinates;
    }
    append_period(out, std::move(part), i);
  }
  out.warnings = implausible_units(out, config.units.point_buffer >= 0);
  out.time = config.time;
  return out;
}

}  // namespace vbagg::io
