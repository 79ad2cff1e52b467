#include "cross_validation.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "app.hpp"
#include "core/folds.hpp"
#include "training.hpp"

namespace vbagg::cli {

namespace {

// Centre of each unit: the coverage-weighted mean of its pixel centres, in the grid's CRS.
Matrix unit_centroids(const io::BuiltData& built) {
  const Dataset& d = built.dataset;
  Matrix c = Matrix::Zero(2, d.num_bags());
  for (Index a = 0; a < d.num_bags(); ++a) {
    double total = 0;
    for (Index i = d.bag_begin(a); i < d.bag_begin(a) + d.bag_size(a); ++i) {
      const std::int64_t cell = built.cell[static_cast<size_t>(i)];
      const double w = d.coverage[i];
      c(0, a) += w * built.grid.centre_x(static_cast<int>(cell % built.grid.width));
      c(1, a) += w * built.grid.centre_y(static_cast<int>(cell / built.grid.width));
      total += w;
    }
    c.col(a) /= total;
  }
  return c;
}

struct Summary {
  double mean = NAN, sd = NAN;
};

// Mean and sample sd over folds of one metric (NaN entries, e.g. a fold without truth, are skipped).
Summary summarise(const std::vector<Metrics>& folds, double Metrics::*field) {
  std::vector<double> v;
  for (const Metrics& f : folds)
    if (std::isfinite(f.*field)) v.push_back(f.*field);
  Summary s;
  if (v.empty()) return s;
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  double ss = 0;
  for (double x : v) ss += (x - s.mean) * (x - s.mean);
  s.sd = v.size() > 1 ? std::sqrt(ss / static_cast<double>(v.size() - 1)) : 0.0;
  return s;
}

// Entry-wise average of per-fold lists weighted by `weight` of each fold.
std::vector<double> pool(const std::vector<Metrics>& folds, std::vector<double> Metrics::*list,
                         const std::vector<double>& weight) {
  std::vector<double> out;
  double total = 0;
  for (size_t k = 0; k < folds.size(); ++k) {
    const std::vector<double>& v = folds[k].*list;
    if (v.empty()) continue;
    if (out.empty()) out.assign(v.size(), 0.0);
    for (size_t l = 0; l < v.size(); ++l) out[l] += weight[k] * v[l];
    total += weight[k];
  }
  for (double& x : out) x /= total;
  return out;
}

// The folds' draw coverage (a row per draw) pooled as their coverage is: draw s of every fold
// together, weighted. Empty when a fold has none.
Matrix pool_draws(const std::vector<Metrics>& folds, Matrix Metrics::*draws, const std::vector<double>& weight) {
  Matrix out;
  double total = 0;
  for (size_t k = 0; k < folds.size(); ++k) {
    const Matrix& c = folds[k].*draws;
    if (c.size() == 0) return {};
    if (out.size() == 0) out = Matrix::Zero(c.rows(), c.cols());
    out += weight[k] * c;
    total += weight[k];
  }
  return total > 0 ? Matrix(out / total) : out;
}

// Pooled over the folds that hold units of the source (a joint fit's fold may hold none of one).
Metrics pooled_metrics(std::vector<Metrics> folds) {
  folds.erase(std::remove_if(folds.begin(), folds.end(), [](const Metrics& f) { return f.units == 0; }), folds.end());
  if (folds.empty()) return Metrics{};
  Metrics p;
  p.source = folds.front().source;
  p.kind = folds.front().kind;
  p.split = "cv";
  p.levels = folds.front().levels;
  p.has_truth = folds.front().has_truth;
  std::vector<double> units, pixels;
  for (const Metrics& f : folds) {
    p.units += f.units;
    p.pixels += f.pixels;
    units.push_back(static_cast<double>(f.units));
    pixels.push_back(static_cast<double>(f.pixels));
    p.observed.insert(p.observed.end(), f.observed.begin(), f.observed.end());
    p.predicted.insert(p.predicted.end(), f.predicted.begin(), f.predicted.end());
    p.unit_ids.insert(p.unit_ids.end(), f.unit_ids.begin(), f.unit_ids.end());
    p.lower95.insert(p.lower95.end(), f.lower95.begin(), f.lower95.end());
    p.upper95.insert(p.upper95.end(), f.upper95.begin(), f.upper95.end());
    p.unit_pit.insert(p.unit_pit.end(), f.unit_pit.begin(), f.unit_pit.end());
    p.fold.insert(p.fold.end(), f.fold.begin(), f.fold.end());
  }
  p.count_coverage = pool(folds, &Metrics::count_coverage, units);
  p.count_pit = pool(folds, &Metrics::count_pit, units);
  p.pixel_coverage = pool(folds, &Metrics::pixel_coverage, pixels);
  // Draw s of every fold pooled as one map: what a calibrated model's pooled coverage would be.
  p.pixel_draw_coverage = pool_draws(folds, &Metrics::pixel_draw_coverage, pixels);
  p.count_draw_coverage = pool_draws(folds, &Metrics::count_draw_coverage, units);
  // Scalars: the mean over folds (cross_validation_table adds their sd).
  for (double Metrics::*field :
       {&Metrics::bag_nll_mean, &Metrics::predictive_nll_mean, &Metrics::bag_log_mse, &Metrics::baseline_bag_nll_mean,
        &Metrics::baseline_bag_log_mse, &Metrics::pixel_mse, &Metrics::pixel_correlation, &Metrics::baseline_pixel_mse,
        &Metrics::baseline_pixel_correlation, &Metrics::elbo_train})
    p.*field = summarise(folds, field).mean;
  p.bag_nll_sum = 0;
  for (const Metrics& f : folds) p.bag_nll_sum += f.bag_nll_sum;
  return p;
}

// Each later source of a joint fit, pooled over the folds on its own.
std::vector<Metrics> pooled_sources(const std::vector<Metrics>& folds) {
  std::vector<std::string> names;
  for (const Metrics& f : folds)
    for (const Metrics& m : f.more_sources)
      if (std::find(names.begin(), names.end(), m.source) == names.end()) names.push_back(m.source);
  std::vector<Metrics> out;
  for (const std::string& name : names) {
    std::vector<Metrics> own;
    for (const Metrics& f : folds)
      for (const Metrics& m : f.more_sources)
        if (m.source == name) own.push_back(m);
    out.push_back(pooled_metrics(own));
  }
  return out;
}

// The pooled coverage of the counts (and of the truth) per interval level, and the PIT.
void coverage_lines(std::ostringstream& s, const Metrics& p) {
  char line[200];
  const CoverageBand band = coverage_band(p.pixel_draw_coverage, p.levels),
                     count_band = coverage_band(p.count_draw_coverage, p.levels);
  s << "interval level          counts covered (pooled)" << (count_band.low.empty() ? "" : "   calibrated (90 %)")
    << (p.pixel_coverage.empty() ? "" : "    pixels covered (pooled)   calibrated (90 %)") << "\n";
  for (size_t l = 0; l < p.levels.size(); ++l) {
    std::snprintf(line, sizeof line, "  %4.0f %%               %6.3f (error %+.3f)", 100 * p.levels[l],
                  p.count_coverage[l], p.count_coverage[l] - p.levels[l]);
    s << line;
    if (!count_band.low.empty()) {
      std::snprintf(line, sizeof line, "   %.3f-%.3f", count_band.low[l], count_band.high[l]);
      s << line;
    }
    if (!p.pixel_coverage.empty()) {
      std::snprintf(line, sizeof line, "      %6.3f (error %+.3f)", p.pixel_coverage[l],
                    p.pixel_coverage[l] - p.levels[l]);
      s << line;
      if (!band.low.empty()) {
        std::snprintf(line, sizeof line, "   %.3f-%.3f", band.low[l], band.high[l]);
        s << line;
      }
    }
    s << "\n";
  }
  if (!count_band.low.empty())
    s << calibration_error_line("count", "units", p.count_coverage, p.levels, count_band) << "\n";
  if (!p.pixel_coverage.empty() && !band.low.empty())
    s << calibration_error_line("pixel", "pixels", p.pixel_coverage, p.levels, band) << "\n";
  s << "PIT of counts (pooled, 10 bins, 0.1 each when calibrated):" << pit_text(p.count_pit) << "\n";
}

struct Row {
  const char* name;
  const char* key;
  double Metrics::*field;
};

const std::vector<Row>& rows() {
  static const std::vector<Row> r{
      {"bag NLL (mean)", "bag_nll_mean", &Metrics::bag_nll_mean},
      {"predictive NLL (mean)", "predictive_nll_mean", &Metrics::predictive_nll_mean},
      {"bag log-MSE", "bag_log_mse", &Metrics::bag_log_mse},
      {"constant bag NLL", "baseline_bag_nll_mean", &Metrics::baseline_bag_nll_mean},
      {"constant bag log-MSE", "baseline_bag_log_mse", &Metrics::baseline_bag_log_mse},
      {"pixel MSE", "pixel_mse", &Metrics::pixel_mse},
      {"pixel correlation", "pixel_correlation", &Metrics::pixel_correlation},
      {"constant pixel MSE", "baseline_pixel_mse", &Metrics::baseline_pixel_mse},
      {"ELBO (training units)", "elbo_train", &Metrics::elbo_train},
  };
  return r;
}

}  // namespace

std::vector<Index> time_folds(const io::BuiltData& built, Index folds) {
  const Index P = static_cast<Index>(built.time.size());
  if (P == 0) throw ConfigError("cross-validation over time needs data.time: the data have one period");
  if (folds > P)
    throw ConfigError(std::to_string(folds) + " folds over time need as many periods; data.time has " +
                      std::to_string(P));
  std::vector<Index> fold;
  for (const io::UnitSummary& u : built.units) fold.push_back(static_cast<Index>(u.period) * folds / P);
  return fold;
}

CrossValidation cross_validate(const LoadedModel& m, Index folds, unsigned long long seed, const Truth& truth,
                               int samples, int threads, bool progress, const std::string& report_dir,
                               FoldBlocks blocks, Index blocks_source) {
  const io::BuiltData raw = build_data(m.config, report_dir);
  // Units without a response are never held out (nothing scores them): they neither place the
  // blocks nor join a fold, and every fold's fit predicts them alike.
  const std::vector<Index> fold =
      blocks == FoldBlocks::time
          ? time_folds(raw, folds)
          : spatial_folds(unit_centroids(raw), folds, seed,
                          raw.dataset.observed_among(raw.dataset.bags_of_source(static_cast<int>(blocks_source))));
  Config config = m.config;
  config.set("train.patience", "0");
  CrossValidation cv;
  cv.seed = seed;
  cv.blocks = blocks;
  // Each fold logs its training, so the folds' progress is drawn on a terminal only.
  Progress bar("cross-validation", folds, progress && stderr_is_terminal());
  for (Index k = 0; k < folds; ++k) {
    Split split;
    for (Index a = 0; a < raw.dataset.num_bags(); ++a)
      if (raw.dataset.observed(a)) (fold[static_cast<size_t>(a)] == k ? split.holdout : split.train).push_back(a);
    spdlog::info("fold {} of {}: {} training units, {} held out", k + 1, folds, split.train.size(),
                 split.holdout.size());
    // The fold is held out of the fit entirely: the fit sees no holdout units.
    TrainRun run = train_on_split(config, raw, Split{split.train, {}}, threads, false);
    for (Index a : split.holdout) run.file.holdout_units.push_back(raw.dataset.bag_ids[static_cast<size_t>(a)]);
    const LoadedModel fitted = loaded_model(std::move(run.file), m.config, true);
    Metrics held_out = evaluate(fitted, model_inputs(fitted, raw), "holdout", truth, samples, threads);
    held_out.fold.assign(held_out.unit_ids.size(), static_cast<int>(k));
    for (Metrics& more : held_out.more_sources) more.fold.assign(more.unit_ids.size(), static_cast<int>(k));
    cv.folds.push_back(std::move(held_out));
    bar.update(k + 1);
  }
  bar.finish();
  cv.pooled = pooled_metrics(cv.folds);
  cv.pooled.more_sources = pooled_sources(cv.folds);
  return cv;
}

std::string cross_validation_table(const CrossValidation& cv) {
  std::ostringstream s;
  const Metrics& p = cv.pooled;
  char line[200];
  if (cv.blocks == FoldBlocks::time)
    std::snprintf(line, sizeof line,
                  "%zu-fold cross-validation over blocks of consecutive periods (%lld units, %lld pixels)\n",
                  cv.folds.size(), static_cast<long long>(p.units), static_cast<long long>(p.pixels));
  else
    std::snprintf(line, sizeof line,
                  "%zu-fold spatially blocked cross-validation (%lld units, %lld pixels; seed %llu)\n", cv.folds.size(),
                  static_cast<long long>(p.units), static_cast<long long>(p.pixels), cv.seed);
  s << line;
  std::snprintf(line, sizeof line, "%-22s %12s %12s   %s\n", "", "mean", "sd", "per fold");
  s << line;
  for (const Row& r : rows()) {
    const Summary sm = summarise(cv.folds, r.field);
    if (!std::isfinite(sm.mean)) continue;
    std::snprintf(line, sizeof line, "%-22s %12.6g %12.4g  ", r.name, sm.mean, sm.sd);
    s << line;
    for (const Metrics& f : cv.folds) {
      std::snprintf(line, sizeof line, " %.4g", f.*r.field);
      s << line;
    }
    s << "\n";
  }
  coverage_lines(s, p);
  for (const Metrics& more : p.more_sources) {
    std::snprintf(line, sizeof line,
                  "\nsource '%s' (%lld units held out): bag NLL %.6g (constant %.6g), bag log-MSE %.4g (constant "
                  "%.4g), means over folds\n",
                  more.source.c_str(), static_cast<long long>(more.units), more.bag_nll_mean,
                  more.baseline_bag_nll_mean, more.bag_log_mse, more.baseline_bag_log_mse);
    s << line;
    coverage_lines(s, more);
  }
  return s.str();
}

std::string cross_validation_json(const CrossValidation& cv) {
  std::ostringstream s;
  const Metrics& p = cv.pooled;
  s << "{\n  \"model\": \"" << p.kind << "\",\n  \"split\": \"cv\",\n  \"blocks\": \""
    << (cv.blocks == FoldBlocks::time ? "time" : "space") << "\",\n  \"folds\": " << cv.folds.size()
    << ",\n  \"seed\": " << cv.seed << ",\n  \"units\": " << p.units << ",\n  \"pixels\": " << p.pixels << ",\n";
  for (const Row& r : rows()) {
    const Summary sm = summarise(cv.folds, r.field);
    std::vector<double> per_fold;
    for (const Metrics& f : cv.folds) per_fold.push_back(f.*r.field);
    s << "  \"" << r.key << "\": {\"mean\": " << json_number(sm.mean) << ", \"sd\": " << json_number(sm.sd)
      << ", \"folds\": " << json_list(per_fold) << "},\n";
  }
  std::vector<double> count_err, pixel_err;
  for (size_t l = 0; l < p.levels.size(); ++l) {
    count_err.push_back(std::abs(p.count_coverage[l] - p.levels[l]));
    if (!p.pixel_coverage.empty()) pixel_err.push_back(std::abs(p.pixel_coverage[l] - p.levels[l]));
  }
  s << "  \"interval_levels\": " << json_list(p.levels) << ",\n  \"count_coverage\": " << json_list(p.count_coverage)
    << ",\n  \"count_coverage_error\": " << json_list(count_err)
    << ",\n  \"count_pit_histogram\": " << json_list(p.count_pit)
    << ",\n  \"count_calibrated\": {\"levels\": " << json_list(p.levels)
    << coverage_band_json(coverage_band(p.count_draw_coverage, p.levels)) << "}";
  if (!p.pixel_coverage.empty())
    s << ",\n  \"pixel_coverage\": " << json_list(p.pixel_coverage)
      << ",\n  \"pixel_coverage_error\": " << json_list(pixel_err)
      << ",\n  \"pixel_calibrated\": {\"levels\": " << json_list(p.levels)
      << coverage_band_json(coverage_band(p.pixel_draw_coverage, p.levels)) << "}";
  s << ",\n  \"fold_units\": [";
  for (size_t k = 0; k < cv.folds.size(); ++k) s << (k ? ", " : "") << cv.folds[k].units;
  s << "]";
  if (!p.more_sources.empty()) {
    // Each later source pooled on its own (means over the folds that hold its units).
    s << ",\n  \"more_sources\": [";
    for (size_t k = 0; k < p.more_sources.size(); ++k) {
      const Metrics& m = p.more_sources[k];
      s << (k ? "," : "") << "\n    {\"source\": \"" << m.source << "\", \"units\": " << m.units
        << ", \"bag_nll_mean\": " << json_number(m.bag_nll_mean)
        << ", \"predictive_nll_mean\": " << json_number(m.predictive_nll_mean)
        << ", \"bag_log_mse\": " << json_number(m.bag_log_mse)
        << ", \"baseline_bag_nll_mean\": " << json_number(m.baseline_bag_nll_mean)
        << ", \"count_coverage\": " << json_list(m.count_coverage)
        << ", \"count_pit_histogram\": " << json_list(m.count_pit) << "}";
    }
    s << "\n  ]";
  }
  s << "\n}\n";
  return s.str();
}

}  // namespace vbagg::cli
