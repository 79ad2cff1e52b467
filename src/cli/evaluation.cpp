#include "evaluation.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

#include "core/baselines.hpp"
#include "core/likelihood.hpp"
#include "core/metrics.hpp"
#include "core/objective.hpp"
#include "core/predict.hpp"
#include "io/aligned_layer.hpp"
#include "io/csv.hpp"
#include "model_setup.hpp"

namespace vbagg::cli {

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  std::ostringstream s;
  s.precision(10);
  s << v;
  return s.str();
}

std::string json_list(const std::vector<double>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + json_number(v[i]);
  return s + "]";
}

namespace {

std::vector<Index> split_bags(const Dataset& d, const LoadedModel& m, const std::string& split) {
  std::vector<Index> bags;
  if (split == "train") bags = bags_of(d, m.file.train_units);
  if (split == "holdout") bags = bags_of(d, m.file.holdout_units);
  if (split == "all")
    for (Index a = 0; a < d.num_bags(); ++a) bags.push_back(a);
  // A unit without a response has nothing to score against (it is in no split of the model but
  // 'all'; from another dataset's units it may be in any).
  bags = d.observed_among(bags);
  if (bags.empty()) throw DataError("no " + split + " units of the model are in the data; nothing to evaluate");
  return bags;
}

// Coverage of the observed counts by central predictive intervals at r.levels, and their
// randomised PIT, from the same joint predictive draws.
void count_calibration(const Predictor& predictor, const Dataset& d, const std::vector<Index>& bags, const Vector& y,
                       int samples, int threads, Metrics& r) {
  r.count_coverage.assign(r.levels.size(), 0.0);
  std::mt19937_64 pit_rng(12345);
  std::uniform_real_distribution<double> unif(0, 1);
  const std::vector<Index> scored(bags.begin(), bags.begin() + r.units);
  const Index L = static_cast<Index>(r.levels.size());
  Matrix lo(r.units, L), hi(r.units, L);
  r.unit_pit.assign(static_cast<size_t>(r.units), NAN);
  predictor.unit_draws(d, scored, samples, threads, [&](size_t place, const Vector& draws) {
    const Index k = static_cast<Index>(place);
    for (Index l = 0; l < L; ++l) {
      lo(k, l) = empirical_quantile(draws, 0.5 - r.levels[static_cast<size_t>(l)] / 2);
      hi(k, l) = empirical_quantile(draws, 0.5 + r.levels[static_cast<size_t>(l)] / 2);
      if (y[k] >= lo(k, l) && y[k] <= hi(k, l))
        r.count_coverage[static_cast<size_t>(l)] += 1.0 / static_cast<double>(r.units);
    }
    r.unit_pit[place] = randomized_pit(draws, y[k], unif(pit_rng));
  });
  r.count_pit = unit_histogram(r.unit_pit, kPitBins);
  // The widest level's interval (95 %) for the table of units.
  r.lower95.assign(lo.col(L - 1).data(), lo.col(L - 1).data() + r.units);
  r.upper95.assign(hi.col(L - 1).data(), hi.col(L - 1).data() + r.units);
  // The same intervals against pseudo-observations drawn jointly, as a calibrated model's counts.
  const Matrix pseudo = predictor.joint_unit_draws(d, scored, kCoverageDraws, threads);
  if (pseudo.size() == 0) return;
  r.count_draw_coverage.resize(pseudo.rows(), L);
  for (Index s = 0; s < pseudo.rows(); ++s)
    r.count_draw_coverage.row(s) = interval_coverage(pseudo.row(s).transpose(), lo, hi).transpose();
}

// The truth raster's values at the bags' pixels, in bag order (NaN where it has none), read
// strip by strip in grid order.
Vector truth_of_layer(const std::string& truth_path, const io::BuiltData& built, const std::vector<Index>& pixels) {
  io::AlignedLayer truth(truth_path, "near", built.grid, built.grid_path);
  std::vector<std::pair<std::int64_t, Index>> cells;  // (grid cell, position)
  for (size_t j = 0; j < pixels.size(); ++j)
    cells.emplace_back(built.cell[static_cast<size_t>(pixels[j])], static_cast<Index>(j));
  std::sort(cells.begin(), cells.end());
  Vector t(static_cast<Index>(pixels.size()));
  std::vector<double> strip;
  const int width = built.grid.width, strip_rows = 256;
  for (size_t j = 0; j < cells.size();) {
    const int row0 = static_cast<int>(cells[j].first / width);
    const int rows = std::min(strip_rows, built.grid.height - row0);
    truth.read(1, 0, row0, width, rows, strip);
    for (; j < cells.size() && cells[j].first < static_cast<std::int64_t>(row0 + rows) * width; ++j)
      t[cells[j].second] = strip[static_cast<size_t>(cells[j].first - static_cast<std::int64_t>(row0) * width)];
  }
  return t;
}

// truth_of_layer; of a space-time build, each pixel's from its period's raster (the path's
// {period}, {year} and {month} filled in).
Vector truth_at(const std::string& truth_path, const io::BuiltData& built, const std::vector<Index>& pixels) {
  if (built.time.empty()) return truth_of_layer(truth_path, built, pixels);
  if (!io::has_period_tokens(truth_path))
    throw ConfigError("--truth " + truth_path +
                      ": a space-time model's truth is a raster per period; give a path with {period}, {year} or "
                      "{month}, e.g. truth_intensity_{period}.tif");
  const Dataset& d = built.dataset;
  std::vector<std::vector<Index>> by_period(built.time.size());
  std::vector<std::vector<Index>> positions(built.time.size());
  for (size_t j = 0; j < pixels.size(); ++j) {
    const auto bag = std::upper_bound(d.offsets.begin(), d.offsets.end(), pixels[j]) - d.offsets.begin() - 1;
    const auto p = static_cast<size_t>(built.units[static_cast<size_t>(d.global_bag_of(bag))].period);
    by_period[p].push_back(pixels[j]);
    positions[p].push_back(static_cast<Index>(j));
  }
  Vector t(static_cast<Index>(pixels.size()));
  for (size_t p = 0; p < by_period.size(); ++p) {
    if (by_period[p].empty()) continue;
    const Vector part = truth_of_layer(io::expand_period(truth_path, built.time[p], "--truth"), built, by_period[p]);
    for (size_t k = 0; k < positions[p].size(); ++k) t[positions[p][k]] = part[static_cast<Index>(k)];
  }
  return t;
}

// Pixel MSE and correlation against the truth, the baseline's (its unit's rate at every pixel),
// and, with a posterior, the coverage of the truth by central intervals.
// `task`: whose predictions the truth is compared with; the baseline (a rate of the bags' own
// source) is compared only when that is the bags' task.
void pixel_metrics(const LoadedModel& m, const io::BuiltData& built, const std::vector<Index>& bags,
                   const Vector& baseline_rate, const std::string& truth_path, int task, int threads, Metrics& r) {
  const Dataset& d = built.dataset;
  std::vector<Index> pixels;
  std::vector<double> base;
  for (size_t k = 0; k < bags.size(); ++k)
    for (Index i = d.bag_begin(bags[k]); i < d.bag_begin(bags[k]) + d.bag_size(bags[k]); ++i) {
      pixels.push_back(i);
      base.push_back(baseline_rate[static_cast<Index>(k)]);
    }
  const Vector t = truth_at(truth_path, built, pixels);
  const Predictor& predictor = *m.predictor;
  PredictOptions po;
  if (predictor.has_posterior()) po.quantiles = central_interval_quantiles(r.levels);
  po.threads = threads;
  const Prediction p = predict_dataset_pixels(m, built, pixels, po, task);
  std::vector<Index> ok;
  for (Index i = 0; i < t.size(); ++i)
    if (std::isfinite(t[i])) ok.push_back(i);
  auto pick = [&](auto&& v) {
    Vector s(static_cast<Index>(ok.size()));
    for (size_t j = 0; j < ok.size(); ++j) s[static_cast<Index>(j)] = v[ok[j]];
    return s;
  };
  const Vector tt = pick(t), pm = pick(p.mean), bb = pick(base);
  r.has_truth = true;
  r.pixel_mse = mean_squared_error(pm, tt);
  r.pixel_correlation = correlation(pm, tt);
  const bool own_task = m.file.kind == ModelKind::constant || m.file.model.spec.source(0).task == task;
  r.baseline_pixel_mse = own_task ? mean_squared_error(bb, tt) : NAN;
  r.baseline_pixel_correlation = own_task ? correlation(bb, tt) : NAN;
  // Calibration needs a posterior: point estimates (nystrom, constant) have none.
  if (!predictor.has_posterior()) return;
  Matrix lo(static_cast<Index>(ok.size()), static_cast<Index>(r.levels.size())), hi = lo;
  for (size_t j = 0; j < ok.size(); ++j)
    for (size_t l = 0; l < r.levels.size(); ++l) {
      lo(static_cast<Index>(j), static_cast<Index>(l)) = p.quantiles(ok[j], static_cast<Index>(2 * l));
      hi(static_cast<Index>(j), static_cast<Index>(l)) = p.quantiles(ok[j], static_cast<Index>(2 * l + 1));
    }
  const Vector cov = interval_coverage(tt, lo, hi);
  r.pixel_coverage.assign(cov.data(), cov.data() + cov.size());
  Matrix X(d.num_inputs(), static_cast<Index>(ok.size()));
  for (size_t j = 0; j < ok.size(); ++j) X.col(static_cast<Index>(j)) = d.inputs.col(pixels[ok[j]]);
  r.pixel_draw_coverage = predictor.draw_coverage(X, lo, hi, kCoverageDraws, threads, task);
}

}  // namespace

namespace {

// The metrics of the listed bags (all of one source), the baseline fitted to that source's
// training bags.
Metrics evaluate_bags(const LoadedModel& m, const io::BuiltData& built, const std::vector<Index>& bags,
                      const std::vector<Index>& train, const std::string& split, const std::string& truth_path,
                      int truth_task, int samples, int threads) {
  const Dataset& d = built.dataset;
  Metrics r;
  r.kind = to_string(m.file.kind);
  r.split = split;
  r.units = static_cast<Index>(bags.size());
  r.levels = calibration_levels();
  Vector y(r.units), P(r.units);
  const Vector bag_weight = d.bag_weights();
  for (Index k = 0; k < r.units; ++k) {
    y[k] = d.response[bags[static_cast<size_t>(k)]];
    P[k] = bag_weight[bags[static_cast<size_t>(k)]];
    r.pixels += d.bag_size(bags[static_cast<size_t>(k)]);
  }
  const Predictor& predictor = *m.predictor;
  const Vector yhat = predictor.unit_totals(d, bags, threads);
  r.observed.assign(y.data(), y.data() + y.size());
  r.predicted.assign(yhat.data(), yhat.data() + yhat.size());
  for (Index a : bags) r.unit_ids.push_back(d.bag_ids[static_cast<size_t>(a)]);
  r.fold.assign(bags.size(), -1);
  r.bag_nll_mean = predictor.bag_nll_mean(d, bags, yhat, threads);
  r.bag_nll_sum = r.bag_nll_mean * static_cast<double>(r.units);
  r.predictive_nll_mean = predictor.predictive_nll_mean(d, bags, yhat, threads);
  r.bag_log_mse = bag_log_mse(y, yhat);

  // The constant baseline fitted to the training units: they predict themselves; others get the
  // training rate.
  const ConstantRates baseline = fit_constant_rates(d, train);
  Vector rate(r.units);
  for (Index k = 0; k < r.units; ++k)
    rate[k] = baseline.of(d.bag_ids[static_cast<size_t>(bags[static_cast<size_t>(k)])]);
  const Vector exposure = d.exposures();
  Vector base(r.units);
  for (Index k = 0; k < r.units; ++k) base[k] = rate[k] * exposure[bags[static_cast<size_t>(k)]];
  if (predictor.counts(d.source_of(bags.front()))) {
    r.baseline_bag_nll_mean = bag_poisson_nll(y, base.cwiseMax(1e-300)).mean;
  } else if (d.trials_of(bags.front()) > 0) {  // a survey: the rate is a prevalence
    Vector trials(r.units);
    for (Index k = 0; k < r.units; ++k) trials[k] = d.trials_of(bags[static_cast<size_t>(k)]);
    r.baseline_bag_nll_mean = bag_binomial_nll(y, trials, rate).mean;
  }
  r.baseline_bag_log_mse = bag_log_mse(y, base);

  count_calibration(predictor, d, bags, y, samples, threads, r);
  if (!truth_path.empty()) pixel_metrics(m, built, bags, rate, truth_path, truth_task, threads, r);
  return r;
}

// The listed bags of source s, in order.
std::vector<Index> of_source(const Dataset& d, const std::vector<Index>& bags, int s) {
  std::vector<Index> out;
  for (Index a : bags)
    if (d.source_of(a) == s) out.push_back(a);
  return out;
}

}  // namespace

// The index of the truth's task (empty: the first), or a ConfigError naming the model's tasks.
int truth_task_index(const LoadedModel& m, const std::string& task) {
  if (task.empty()) return 0;
  const ModelSpec& spec = m.file.model.spec;
  if (const Index d = spec.find_task(task); d >= 0) return static_cast<int>(d);
  std::string names;
  for (const auto& t : spec.tasks) names += (names.empty() ? "" : ", ") + t;
  throw ConfigError("--truth-task " + task + ": the model's tasks are " +
                    (names.empty() ? "unnamed (one task)" : names));
}

Metrics evaluate(const LoadedModel& m, const io::BuiltData& built, const std::string& split, const Truth& truth,
                 int samples, int threads) {
  const std::string& truth_path = truth.path;
  const int truth_task = truth_task_index(m, truth.task);
  const Dataset& d = built.dataset;
  const std::vector<Index> bags = split_bags(d, m, split), train = bags_of(d, m.file.train_units);
  const Index sources = m.file.kind == ModelKind::constant ? 1 : m.file.model.spec.num_sources();
  Metrics r;
  if (sources == 1) {
    r = evaluate_bags(m, built, bags, train, split, truth_path, truth_task, samples, threads);
  } else {
    // Each source on its own units; the truth is compared at the first source's pixels only, so
    // no pixel counts twice.
    for (Index s = 0; s < sources; ++s) {
      const std::vector<Index> own = of_source(d, bags, static_cast<int>(s));
      const std::string name = m.file.model.spec.source(s).name;
      if (own.empty()) {
        // A split (or a cross-validation fold) without units of this source: nothing to report.
        if (s == 0) {
          r.kind = to_string(m.file.kind);
          r.split = split;
          r.source = name;
          r.levels = calibration_levels();
          r.count_coverage.assign(r.levels.size(), NAN);  // shown as nan / null
        }
        continue;
      }
      Metrics one = evaluate_bags(m, built, own, of_source(d, train, static_cast<int>(s)), split,
                                  s == 0 ? truth_path : std::string(), truth_task, samples, threads);
      one.source = name;
      if (s == 0)
        r = std::move(one);
      else
        r.more_sources.push_back(std::move(one));
    }
  }
  ObjectiveOptions oo;
  oo.threads = threads;
  if (!train.empty() && m.file.kind == ModelKind::vbagg)
    r.elbo_train = elbo(m.file.model, d, train, 1.0, nullptr, oo).elbo;
  return r;
}

std::string metrics_table(const Metrics& r) {
  std::ostringstream s;
  s.precision(6);
  s << (r.source.empty() ? "" : "source '" + r.source + "', ") << "split: " << r.split << " (" << r.units << " units, "
    << r.pixels << " pixels)\n";
  char head[160];
  std::snprintf(head, sizeof head, "%-22s %12s    %12s\n", "", r.kind.c_str(), "constant");
  s << head;
  auto row = [&](const char* name, double a, double b) {
    char line[160];
    std::snprintf(line, sizeof line, "%-22s %12.6g    %12.6g\n", name, a, b);
    s << line;
  };
  row("bag NLL (mean)", r.bag_nll_mean, r.baseline_bag_nll_mean);
  row("bag NLL (sum)", r.bag_nll_sum, r.baseline_bag_nll_mean * static_cast<double>(r.units));
  row("bag log-MSE", r.bag_log_mse, r.baseline_bag_log_mse);
  // The constant has no uncertainty to integrate: its predictive NLL is its bag NLL.
  row("predictive NLL (mean)", r.predictive_nll_mean, r.baseline_bag_nll_mean);
  if (r.has_truth) {
    row("pixel MSE", r.pixel_mse, r.baseline_pixel_mse);
    row("pixel correlation", r.pixel_correlation, r.baseline_pixel_correlation);
  }
  char line[160];
  // The ELBO is the joint fit's: shown once, with the first source.
  if (r.source.empty() || std::isfinite(r.elbo_train)) {
    std::snprintf(line, sizeof line, "%-22s %12.8g\n", "ELBO (training units)", r.elbo_train);
    s << line;
  }
  const bool calibrated = !r.pixel_coverage.empty();
  const CoverageBand band = coverage_band(r.pixel_draw_coverage, r.levels),
                     count_band = coverage_band(r.count_draw_coverage, r.levels);
  s << "interval level          counts covered" << (count_band.low.empty() ? "" : "   calibrated (90 %)")
    << (calibrated ? "    pixels covered (truth)   calibrated (90 %)" : "") << "\n";
  for (size_t l = 0; l < r.levels.size(); ++l) {
    std::snprintf(line, sizeof line, "  %4.0f %%               %6.3f", 100 * r.levels[l], r.count_coverage[l]);
    s << line;
    if (!count_band.low.empty()) {
      std::snprintf(line, sizeof line, "       %.3f-%.3f", count_band.low[l], count_band.high[l]);
      s << line;
    }
    if (calibrated) {
      std::snprintf(line, sizeof line, "            %6.3f (error %+.3f)", r.pixel_coverage[l],
                    r.pixel_coverage[l] - r.levels[l]);
      s << line;
      if (!band.low.empty()) {
        std::snprintf(line, sizeof line, "   %.3f-%.3f", band.low[l], band.high[l]);
        s << line;
      }
    }
    s << "\n";
  }
  if (!count_band.low.empty())
    s << calibration_error_line("count", "units", r.count_coverage, r.levels, count_band) << "\n";
  if (calibrated && !band.low.empty())
    s << calibration_error_line("pixel", "pixels", r.pixel_coverage, r.levels, band) << "\n";
  if (!r.count_pit.empty()) s << "PIT of counts (10 bins, 0.1 each when calibrated):" << pit_text(r.count_pit) << "\n";
  for (const Metrics& more : r.more_sources) s << "\n" << metrics_table(more);
  return s.str();
}

std::string calibration_error_line(const std::string& what, const std::string& of, const std::vector<double>& coverage,
                                   const std::vector<double>& levels, const CoverageBand& band) {
  double err = 0;
  for (size_t l = 0; l < levels.size(); ++l) err += std::abs(coverage[l] - levels[l]);
  err /= static_cast<double>(levels.size());
  char line[200];
  std::snprintf(line, sizeof line,
                "%s calibration error %.3f; a calibrated model's on these %s: %.3f on average, under %.3f in 90 %% "
                "of its draws",
                what.c_str(), err, of.c_str(), band.error_mean, band.error_p90);
  return line;
}

std::string pit_text(const std::vector<double>& pit) {
  std::string s;
  char cell[16];
  for (double f : pit) {
    std::snprintf(cell, sizeof cell, " %.2f", f);
    s += cell;
  }
  return s;
}

std::string coverage_band_json(const CoverageBand& band) {
  if (band.low.empty()) return "";
  return ", \"calibrated_coverage_low\": " + json_list(band.low) +
         ", \"calibrated_coverage_high\": " + json_list(band.high) +
         ", \"calibrated_error_mean\": " + json_number(band.error_mean) +
         ", \"calibrated_error_p90\": " + json_number(band.error_p90);
}

namespace {

// The entries of one source's metrics (or the only source's), without the enclosing braces.
std::string json_entries(const Metrics& r) {
  std::ostringstream s;
  std::vector<double> count_err, pixel_err;
  for (size_t l = 0; l < r.levels.size(); ++l) {
    count_err.push_back(std::abs(r.count_coverage[l] - r.levels[l]));
    if (!r.pixel_coverage.empty()) pixel_err.push_back(std::abs(r.pixel_coverage[l] - r.levels[l]));
  }
  if (!r.source.empty()) s << "  \"source\": \"" << r.source << "\",\n";
  s << "  \"model\": \"" << r.kind << "\",\n  \"split\": \"" << r.split << "\",\n  \"units\": " << r.units
    << ",\n  \"pixels\": " << r.pixels << ",\n"
    << "  \"bag_nll_sum\": " << json_number(r.bag_nll_sum) << ",\n  \"bag_nll_mean\": " << json_number(r.bag_nll_mean)
    << ",\n  \"predictive_nll_mean\": " << json_number(r.predictive_nll_mean) << ",\n"
    << "  \"bag_log_mse\": " << json_number(r.bag_log_mse) << ",\n  \"elbo_train\": " << json_number(r.elbo_train)
    << ",\n"
    << "  \"interval_levels\": " << json_list(r.levels) << ",\n  \"count_coverage\": " << json_list(r.count_coverage)
    << ",\n"
    << "  \"count_coverage_error\": " << json_list(count_err) << ",\n"
    << "  \"count_pit_histogram\": " << json_list(r.count_pit) << ",\n"
    << "  \"count_calibrated\": {\"levels\": " << json_list(r.levels)
    << coverage_band_json(coverage_band(r.count_draw_coverage, r.levels)) << "},\n"
    << "  \"baseline_constant\": {\"bag_nll_mean\": " << json_number(r.baseline_bag_nll_mean)
    << ", \"bag_log_mse\": " << json_number(r.baseline_bag_log_mse);
  if (r.has_truth)
    s << ", \"pixel_mse\": " << json_number(r.baseline_pixel_mse)
      << ", \"pixel_correlation\": " << json_number(r.baseline_pixel_correlation);
  s << "}";
  if (r.has_truth)
    s << ",\n  \"pixel\": {\"mse\": " << json_number(r.pixel_mse)
      << ", \"correlation\": " << json_number(r.pixel_correlation)
      << ", \"coverage\": " << (r.pixel_coverage.empty() ? "null" : json_list(r.pixel_coverage))
      << ", \"coverage_error\": " << (pixel_err.empty() ? "null" : json_list(pixel_err))
      << coverage_band_json(coverage_band(r.pixel_draw_coverage, r.levels)) << "}";
  return s.str();
}

}  // namespace

namespace {

void append_unit_rows(std::ostringstream& s, const Metrics& r) {
  for (size_t k = 0; k < r.unit_ids.size(); ++k) {
    s << io::csv_field(r.unit_ids[k]) << ',' << io::csv_field(r.source) << ',';
    if (r.fold[k] >= 0) s << r.fold[k] + 1;
    s << ',' << r.observed[k] << ',' << r.predicted[k] << ',' << r.lower95[k] << ',' << r.upper95[k] << ','
      << r.unit_pit[k] << '\n';
  }
}

}  // namespace

std::string units_csv(const Metrics& r) {
  std::ostringstream s;
  s.precision(10);
  s << "unit,source,fold,observed,predicted,lower_95,upper_95,pit\n";
  append_unit_rows(s, r);
  for (const Metrics& more : r.more_sources) append_unit_rows(s, more);
  return s.str();
}

std::string metrics_json(const Metrics& r) {
  std::string s = "{\n" + json_entries(r);
  if (!r.more_sources.empty()) {
    // Indented one level: a source's entries inside the list.
    s += ",\n  \"more_sources\": [";
    for (size_t k = 0; k < r.more_sources.size(); ++k) {
      std::string body = json_entries(r.more_sources[k]), indented;
      for (char c : body) indented += c == '\n' ? std::string("\n  ") : std::string(1, c);
      s += std::string(k ? "," : "") + "\n    {\n  " + indented + "\n    }";
    }
    s += "\n  ]";
  }
  return s + "\n}\n";
}

}  // namespace vbagg::cli
