// The metrics of MODEL.md section 8 for a fitted model on a split of its units, next to the
// constant baseline, and their table and JSON forms.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/metrics.hpp"
#include "model_data.hpp"

namespace vbagg::cli {

// Bins of the PIT histogram: ten, so a calibrated model puts about 10 % of the units in each.
constexpr int kPitBins = 10;
// Joint posterior draws behind the bands of a calibrated model's coverage (pixels and counts).
constexpr int kCoverageDraws = 200;

struct Metrics {
  std::string kind;  // model kind
  std::string split;
  std::string source;  // the data source's name in a joint fit of several (empty: one source)
  Index units = 0, pixels = 0;
  double bag_nll_sum = NAN, bag_nll_mean = NAN, bag_log_mse = NAN;
  // The mean NLL under the predictive distributions (the field's uncertainty integrated), where
  // bag_nll_mean scores the expected totals as the papers do.
  double predictive_nll_mean = NAN;
  double baseline_bag_nll_mean = NAN, baseline_bag_log_mse = NAN;  // constant baseline
  std::vector<double> levels;                                      // interval levels
  std::vector<double> count_coverage;  // observed counts inside the predictive interval, per level
  std::vector<double> count_pit;       // randomised PIT histogram of the observed counts (kPitBins bins)
  // The same coverage of joint pseudo-observations in place of the counts (a row per draw, a
  // column per level; empty where the predictor gives none): how far a calibrated model's strays.
  Matrix count_draw_coverage;
  double elbo_train = NAN;
  // With a truth raster:
  bool has_truth = false;
  double pixel_mse = NAN, pixel_correlation = NAN, baseline_pixel_mse = NAN, baseline_pixel_correlation = NAN;
  std::vector<double> pixel_coverage;  // true intensity inside the central interval, per level
  // The same coverage of joint posterior draws in place of the truth (draw_coverage: a row per
  // draw, a column per level): how far a calibrated model's coverage of these pixels strays.
  Matrix pixel_draw_coverage;
  // For plots: per unit observed and predicted totals, and the pixel sample used for maps.
  std::vector<double> observed, predicted;
  // Per unit, in the order of observed: its id, the central 95 % predictive interval of its
  // observation, its randomised PIT, and (cross-validation) the fold that held it out, -1 for none.
  std::vector<std::string> unit_ids;
  std::vector<double> lower95, upper95, unit_pit;
  std::vector<int> fold;
  // A joint fit: the metrics above are the first source's (with the pixel metrics), these the
  // others' units, each source next to a constant baseline of its own.
  std::vector<Metrics> more_sources;
};

// A raster of the true values of one task's intensity (path empty: none; task empty: the first).
struct Truth {
  std::string path, task;
};

// The split's units of every source (Metrics::more_sources for the second and later). The truth
// is compared at the first source's pixels, with the predictions of its task.
Metrics evaluate(const LoadedModel& m, const io::BuiltData& built, const std::string& split, const Truth& truth,
                 int samples, int threads);

std::string metrics_table(const Metrics& r);
std::string metrics_json(const Metrics& r);
// A row per evaluated unit, of every source (vbagg-eval --units-csv): unit, source, fold, observed,
// predicted, lower_95, upper_95, pit.
std::string units_csv(const Metrics& r);

// The line under a table of coverage (`what`: pixel or count, `of`: pixels or units): its
// calibration error beside a calibrated model's (coverage_band), and the band's JSON entries
// (", \"calibrated_coverage_low\": [...], ..."; empty without draws).
std::string calibration_error_line(const std::string& what, const std::string& of, const std::vector<double>& coverage,
                                   const std::vector<double>& levels, const CoverageBand& band);
std::string coverage_band_json(const CoverageBand& band);

// The PIT histogram's bin fractions as text (" 0.10 0.08 ..."), for the tables.
std::string pit_text(const std::vector<double>& pit);

// A JSON number (null when not finite) and a JSON list of them.
std::string json_number(double v);
std::string json_list(const std::vector<double>& v);

}  // namespace vbagg::cli
