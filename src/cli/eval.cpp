// vbagg-eval: metrics of a fitted model on its training, holdout or all units.
#include "eval.hpp"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>

#include "app.hpp"
#include "cross_validation.hpp"
#include "io/atomic_file.hpp"
#include "io/gdal_handles.hpp"
#include "model_setup.hpp"
#include "processes.hpp"
#include "report.hpp"

namespace vbagg::cli {

namespace {

// The source named by --cv-blocks (0 when it is not given).
Index cv_blocks_source(const LoadedModel& m, const EvalArgs& args) {
  if (args.cv_blocks.empty()) return 0;
  if (args.cv_by != "space") throw ConfigError("--cv-blocks places spatial blocks; it cannot go with --cv-by time");
  const ModelSpec& spec = m.file.model.spec;
  if (spec.num_sources() == 1)
    throw ConfigError("--cv-blocks " + args.cv_blocks + ": the model has one source, which places the blocks");
  std::string names;
  for (Index s = 0; s < spec.num_sources(); ++s) {
    const std::string name = spec.source(s).name;
    if (args.cv_blocks == name) return s;
    names += (s > 0 ? ", '" : "'") + name + "'";
  }
  throw ConfigError("--cv-blocks " + args.cv_blocks + ": the model has no such source (its sources: " + names + ")");
}

}  // namespace

EvalResult run_eval(const EvalArgs& args) {
  if (args.split != "train" && args.split != "holdout" && args.split != "all")
    throw ConfigError("--split " + args.split + ": expected train, holdout or all");
  io::ensure_gdal_registered();
  const LoadedModel m = load_model(args.model_path, args.config_path, args.sets);
  const Settings settings = settings_of(m.config);
  const int threads = thread_count(settings, args.threads);
  // Cross-validation builds its own data; the model's inputs serve the report's maps.
  // A list of unusable units goes beside the requested outputs.
  const std::string first_output = !args.json.empty() ? args.json : !args.report.empty() ? args.report : args.units_csv;
  const std::string report_dir =
      first_output.empty() ? "" : std::filesystem::absolute(first_output).parent_path().string();
  const io::BuiltData built = args.folds == 0 || !args.report.empty() ? model_dataset(m, report_dir) : io::BuiltData();
  const int samples = settings.predict.samples;
  EvalResult r;
  if (args.folds > 0) {
    const unsigned long long seed =
        args.cv_seed >= 0 ? static_cast<unsigned long long>(args.cv_seed) : settings.train.holdout_seed;
    if (args.cv_by != "space" && args.cv_by != "time")
      throw ConfigError("--cv-by " + args.cv_by + ": expected space or time");
    const CrossValidation cv =
        cross_validate(m, args.folds, seed, {args.truth, args.truth_task}, samples, threads, args.progress, report_dir,
                       args.cv_by == "time" ? FoldBlocks::time : FoldBlocks::space, cv_blocks_source(m, args));
    r.metrics = cv.pooled;
    r.table = cross_validation_table(cv);
    r.json = cross_validation_json(cv);
  } else {
    r.metrics = evaluate(m, built, args.split, {args.truth, args.truth_task}, samples, threads);
    r.table = metrics_table(r.metrics);
    r.json = metrics_json(r.metrics);
  }
  if (!args.json.empty()) {
    io::write_text_atomic(args.json, r.json);
    spdlog::info("wrote {}", args.json);
  }
  if (!args.units_csv.empty()) {
    io::write_text_atomic(args.units_csv, units_csv(r.metrics));
    spdlog::info("wrote {}", args.units_csv);
  }
  if (!args.report.empty()) {
    // With --cv the metrics and plots are the folds'; the maps are those of the model given.
    write_report(args.report, m, built, r.metrics, r.table, threads, args.unit);
    spdlog::info("wrote {}", args.report);
  }
  return r;
}

int eval_main(int argc, char** argv) {
  CLI::App app(
      "Evaluates a fitted model on its training, holdout or all units: bag NLL (sum and mean), the predictive "
      "NLL (each count's or survey's density with the field's uncertainty integrated), bag log-MSE, "
      "coverage of the observed counts by predictive intervals (beside the range a calibrated model's would "
      "fall in, from 200 joint pseudo-observations of the same units) and the ELBO, next to the constant "
      "baseline; with --truth also pixel-level MSE, correlation and calibration. Prints a table; writes JSON "
      "and an HTML report on request.",
      "vbagg-eval");
  EvalArgs args;
  bool quiet = false, verbose = false;
  app.add_option("--model", args.model_path, "Fitted model (model.yaml written by vbagg-train)")->required();
  app.add_option("--config", args.config_path,
                 "Run configuration to evaluate on other data (default: the model's own)");
  app.add_option("--set", args.sets, "Override a setting: --set KEY=VALUE (repeatable)");
  CLI::Option* split_opt = app.add_option("--split", args.split, "Units to evaluate")
                               ->check(CLI::IsMember({"train", "holdout", "all"}))
                               ->capture_default_str();
  CLI::Option* cv_opt =
      app.add_option(
             "--cv", args.folds,
             "Spatially blocked K-fold cross-validation instead of one split: units grouped into K blocks by "
             "k-means on their centroids (with several sources, on those of one source: see --cv-blocks), the "
             "model's configuration refitted K times (each without one block, early stopping off), and every metric "
             "reported as mean and sd over the folds, with coverage and PIT pooled over every unit")
          ->check(CLI::Range(2, 1000))
          ->excludes(split_opt);
  app.add_option("--cv-seed", args.cv_seed, "Seed of the k-means blocks of --cv (default: train.holdout.seed)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--cv-blocks", args.cv_blocks,
                 "With several sources, the source whose units place the blocks of --cv (default: the first): "
                 "its units are held out as in a cross-validation of its fit alone, so the two compare unit by "
                 "unit, and every other unit joins the nearest block")
      ->needs(cv_opt);
  app.add_option("--cv-by", args.cv_by,
                 "How --cv blocks the units: space (k-means on centroids; a space-time unit's periods stay in one "
                 "fold) or time (a space-time model's periods in K blocks of consecutive periods, each held out "
                 "whole)")
      ->check(CLI::IsMember({"space", "time"}))
      ->capture_default_str();
  app.add_option("--unit", args.unit,
                 "A space-time model's report draws this unit's seasonal curve: observed counts and predicted totals "
                 "with their intervals over the periods (default: the unit with the most cases)");
  app.add_option("--truth", args.truth,
                 "Raster of the true intensity (e.g. truth_intensity.tif of vbagg-simulate) for pixel metrics: MSE, "
                 "correlation, and coverage at 50-95 % beside the range a calibrated model's would fall in (200 joint "
                 "posterior draws in place of the truth); for a space-time model a path with {period}, {year} or "
                 "{month} (truth_intensity_{period}.tif)");
  app.add_option("--truth-task", args.truth_task,
                 "The task whose intensity --truth holds, for a model of several tasks (e.g. prevalence with "
                 "truth_prevalence.tif; default: the first task). Compared at the first source's pixels");
  app.add_option("--json", args.json, "Write the metrics as JSON to this file");
  app.add_option("--units-csv", args.units_csv,
                 "Write a row per evaluated unit to this CSV file: unit, source (with several sources), fold (with "
                 "--cv: the fold that held it out), observed, predicted (the mean of its predictive distribution), "
                 "lower_95 and upper_95 (its central 95 % predictive interval, from the draws that give the "
                 "coverage) and pit (its randomised PIT): which units the model misses, and how far");
  app.add_option("--report", args.report,
                 "Write a self-contained HTML report (plots and quick-look maps) to this file");
  app.add_option("--threads", args.threads, "Threads (default: train.threads, 0 = every core)")
      ->check(CLI::PositiveNumber);
  add_common_flags(app, quiet, verbose);
  return run_app(app, argc, argv, [&] {
    setup_logging("vbagg-eval", quiet, verbose);
    require_one_process("vbagg-eval");
    args.progress = !quiet;
    const EvalResult r = run_eval(args);
    std::fputs(r.table.c_str(), stdout);
  });
}

}  // namespace vbagg::cli
