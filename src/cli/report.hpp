// The self-contained HTML report of vbagg-eval: metrics, a calibration plot, observed vs
// predicted totals, and quick-look maps of the posterior mean and sd.
#pragma once

#include <string>

#include "evaluation.hpp"

namespace vbagg::cli {

// `table` is the metrics text to show (metrics_table, or the cross-validation table).
// A space-time model's report also draws the seasonal curve of `unit` (an id without its period;
// empty: the unit with the most cases).
void write_report(const std::string& path, const LoadedModel& m, const io::BuiltData& built, const Metrics& r,
                  const std::string& table, int threads, const std::string& unit = "");

}  // namespace vbagg::cli
