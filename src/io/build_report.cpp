#include "build_report.hpp"

#include <algorithm>
#include <cstdio>
#include <set>

namespace vbagg::io {

std::vector<std::string> implausible_units(const BuiltData& b, bool points) {
  constexpr double kFewPixels = 4, kRateRatio = 10;
  const bool surveys = std::any_of(b.units.begin(), b.units.end(), [](const UnitSummary& u) { return u.trials > 0; });
  const char* per = surveys ? "tested" : "people";
  // People, or the number tested of a survey.
  auto exposure = [&](const UnitSummary& u) { return u.trials > 0 ? u.trials : u.population; };
  std::vector<double> rates;
  for (const UnitSummary& u : b.units)
    if (exposure(u) > 0 && u.observed()) rates.push_back(u.response / exposure(u));
  std::vector<double> sorted = rates;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted.empty() ? 0 : sorted[sorted.size() / 2];
  std::vector<std::string> small, high;
  double smallest = 1e300, worst = 0;
  std::string smallest_id, worst_text;
  for (const UnitSummary& u : b.units) {
    const std::string& id = u.id;
    const double pixels = u.area, P = exposure(u);
    char text[160];
    if (pixels < kFewPixels && !points) {
      small.push_back(id);
      if (pixels < smallest) {
        smallest = pixels;
        smallest_id = id;
      }
    }
    const double rate = P > 0 && u.observed() ? u.response / P : 0;
    if (median > 0 && rate > kRateRatio * median) {
      high.push_back(id);
      if (rate / median > worst) {
        worst = rate / median;
        std::snprintf(text, sizeof text, "'%s', %.0f x: %.6g observed for %.6g %s", id.c_str(), worst, u.response, P,
                      per);
        worst_text = text;
      }
    }
  }
  std::vector<std::string> w;
  if (!small.empty()) {
    char text[96];
    std::snprintf(text, sizeof text, "smallest '%s', %.2g pixels", smallest_id.c_str(), smallest);
    w.push_back(std::to_string(small.size()) + " units cover fewer than 4 pixels of the grid (" + text +
                "): " + listed_ids(small) +
                ". Their population is a share of pixels they barely touch; consider a finer population raster as "
                "data.grid, data.grid_refine, or data.pixel_assignment (docs/input-pipeline.md)");
  }
  if (!high.empty())
    w.push_back(std::to_string(high.size()) + " units observe a rate over 10 times the median unit's (worst " +
                worst_text + "): " + listed_ids(high) +
                ". Check their counts and population; a small urban unit's population is often diluted by coarse "
                "pixels (docs/input-pipeline.md)");
  return w;
}

std::vector<std::string> report_lines(const BuiltData& b) {
  std::vector<std::string> lines = b.notes;
  Index dropped_pixels = 0;
  std::vector<UnitIssue> lost;
  for (const auto& u : b.units) {
    if (!u.dropped_pixels) continue;
    dropped_pixels += u.dropped_pixels;
    lost.push_back({u.id, "pixels dropped for missing data, a covariate or the population (" +
                              std::to_string(u.dropped_pixels) + " of " + std::to_string(u.pixels + u.dropped_pixels) +
                              ")"});
  }
  for (const auto& line : grouped_issue_lines(lost)) lines.push_back(line.substr(2));
  for (const auto& line : grouped_issue_lines(b.dropped)) lines.push_back("dropped " + line.substr(2));
  std::set<std::string> dropped_ids;
  for (const auto& d : b.dropped) dropped_ids.insert(d.id);
  const size_t dropped_units = dropped_ids.size();
  std::vector<std::string> unobserved;
  for (const auto& u : b.units)
    if (!u.observed()) unobserved.push_back(u.id);
  if (!unobserved.empty())
    lines.push_back(std::to_string(unobserved.size()) +
                    (unobserved.size() == 1 ? " unit without a response is" : " units without a response are") +
                    " predicted, not fitted (data.on_missing_response: predict): " + listed_ids(unobserved));
  lines.push_back(std::to_string(b.units.size()) + " units, " + std::to_string(total_pixels(b)) + " pixels, " +
                  std::to_string(b.covariates.size()) + " covariates" +
                  (b.num_coordinates ? " + " + std::to_string(b.num_coordinates) + " coordinates" : "") + "; " +
                  std::to_string(dropped_pixels) + " pixels dropped for missing data, " +
                  std::to_string(dropped_units) + " units dropped");
  return lines;
}

}  // namespace vbagg::io
