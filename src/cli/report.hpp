// The self-contained HTML report of vbagg-eval: metrics, a calibration plot, observed vs
// predicted totals, and quick-look maps of the posterior mean and sd.
#pragma once

#include <string>

#include "evaluation.hpp"

namespace vbagg::cli {

void write_report(const std::string& path, const LoadedModel& m, const io::BuiltData& built, const Metrics& r,
                  int threads);

}  // namespace vbagg::cli
