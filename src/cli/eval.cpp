// vbagg-eval: metrics of a fitted model on its training, holdout or all units.
#include "eval.hpp"

#include <spdlog/spdlog.h>

#include <cstdio>

#include "app.hpp"
#include "cross_validation.hpp"
#include "evaluation.hpp"
#include "io/atomic_file.hpp"
#include "io/gdal_handles.hpp"
#include "model_setup.hpp"
#include "report.hpp"

namespace vbagg::cli {

int eval_main(int argc, char** argv) {
  CLI::App app(
      "Evaluates a fitted model on its training, holdout or all units: bag NLL (sum and mean), bag log-MSE, "
      "coverage of the observed counts by predictive intervals and the ELBO, next to the constant baseline; "
      "with --truth also pixel-level MSE, correlation and calibration. Prints a table; writes JSON and an "
      "HTML report on request.",
      "vbagg-eval");
  std::string model_path, config_path, split = "holdout", truth, json, report;
  std::vector<std::string> sets;
  int threads = 0, folds = 0;
  long long cv_seed = -1;
  bool quiet = false, verbose = false;
  app.add_option("--model", model_path, "Fitted model (model.yaml written by vbagg-train)")->required();
  app.add_option("--config", config_path, "Run configuration to evaluate on other data (default: the model's own)");
  app.add_option("--set", sets, "Override a setting: --set KEY=VALUE (repeatable)");
  CLI::Option* split_opt = app.add_option("--split", split, "Units to evaluate")
                               ->check(CLI::IsMember({"train", "holdout", "all"}))
                               ->capture_default_str();
  app.add_option("--cv", folds,
                 "Spatially blocked K-fold cross-validation instead of one split: units grouped into K blocks by "
                 "k-means on their centroids, the model's configuration refitted K times (each without one block, "
                 "early stopping off), and every metric reported as mean and sd over the folds, with coverage and "
                 "PIT pooled over every unit")
      ->check(CLI::Range(2, 1000))
      ->excludes(split_opt);
  app.add_option("--cv-seed", cv_seed, "Seed of the k-means blocks of --cv (default: train.holdout.seed)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--truth", truth,
                 "Raster of the true intensity (e.g. truth_intensity.tif of vbagg-simulate) for pixel metrics");
  app.add_option("--json", json, "Write the metrics as JSON to this file");
  app.add_option("--report", report, "Write a self-contained HTML report (plots and quick-look maps) to this file");
  app.add_option("--threads", threads, "Threads (default: train.threads, 0 = every core)")->check(CLI::PositiveNumber);
  add_common_flags(app, quiet, verbose);
  return run_app(app, argc, argv, [&] {
    setup_logging("vbagg-eval", quiet, verbose);
    io::ensure_gdal_registered();
    const LoadedModel m = load_model(model_path, config_path, sets);
    const Settings settings = settings_of(m.config);
    const int nthreads = thread_count(settings, threads);
    // Cross-validation builds its own data; the model's inputs serve the report's maps.
    const io::BuiltData built = folds == 0 || !report.empty() ? model_dataset(m) : io::BuiltData();
    const int samples = settings.predict.samples;
    Metrics r;
    std::string table, json_text;
    if (folds > 0) {
      const unsigned long long seed =
          cv_seed >= 0 ? static_cast<unsigned long long>(cv_seed) : settings.train.holdout_seed;
      const CrossValidation cv = cross_validate(m, folds, seed, truth, samples, nthreads, !quiet);
      r = cv.pooled;
      table = cross_validation_table(cv);
      json_text = cross_validation_json(cv);
    } else {
      r = evaluate(m, built, split, truth, samples, nthreads);
      table = metrics_table(r);
      json_text = metrics_json(r);
    }
    std::fputs(table.c_str(), stdout);
    if (!json.empty()) {
      io::write_text_atomic(json, json_text);
      spdlog::info("wrote {}", json);
    }
    if (!report.empty()) {
      // With --cv the metrics and plots are the folds'; the maps are those of the model given.
      write_report(report, m, built, r, table, nthreads);
      spdlog::info("wrote {}", report);
    }
  });
}

}  // namespace vbagg::cli
