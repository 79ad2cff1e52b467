// vbagg-train: build the dataset, split units, fit (training.hpp), write model.yaml, run.resolved.yaml,
// history.csv.
#include "train.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "app.hpp"
#include "io/atomic_file.hpp"
#include "io/build_report.hpp"
#include "model_data.hpp"
#include "params.hpp"
#include "processes.hpp"
#include "training.hpp"

namespace vbagg::cli {

namespace fs = std::filesystem;

std::string run_train(const TrainArgs& args) {
  if (args.config_path.empty()) throw ConfigError("--config is required (a run.yaml; see docs/configuration.md)");
  const auto t0 = std::chrono::steady_clock::now();
  Config config = Config::load(args.config_path, args.sets);
  if (!args.out.empty()) config.set("output.dir", fs::absolute(args.out).string());
  const Settings settings = settings_of(config);
  const std::string& out_dir = settings.output_dir;
  const io::DataConfig data_config = config.data_config();
  refuse_overwriting_inputs(out_dir, {"model.yaml", "run.resolved.yaml", "history.csv"}, data_config);
  io::ensure_writable_dir(out_dir);
  const int threads = thread_count(settings, args.threads);
  model_spec(settings);  // a bad model setting fails before the dataset is built

  spdlog::info("building the dataset from {}", args.config_path);
  io::BuiltData built = build_data(config, out_dir, processes());
  for (const auto& line : io::report_lines(built)) spdlog::info("{}", line);
  for (const auto& line : built.warnings) spdlog::warn("{}", line);
  if (!built.dropped.empty() && leading_process()) {
    io::write_text_atomic(out_dir + "/dropped_units.csv", io::issues_csv(built.dropped));
    spdlog::info("every dropped unit and its problem: {}/dropped_units.csv", out_dir);
  }
  // Units by their index in built.units: in an MPI job each process holds a share of them. A unit
  // without a response (source -1 here) is in neither the training units nor the holdout.
  std::vector<int> sources;
  for (const auto& u : built.units) sources.push_back(u.observed() ? u.source : -1);
  if (std::none_of(built.units.begin(), built.units.end(), [](const io::UnitSummary& u) { return u.observed(); }))
    throw DataError("no unit has a response (data.on_missing_response: predict keeps them all); nothing to fit");
  const Split split =
      hold_out_periods(split_units(sources, settings.train.holdout_fraction, settings.train.holdout_seed), built,
                       settings.train.holdout_periods);
  TrainRun run = train_on_split(config, std::move(built), split, threads, args.progress);
  // Data paths relative to the run folder where they share its tree: the folder moves with them.
  run.file.config = config.resolved_node(out_dir);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Every process of an MPI job holds the same model; the leading one writes it.
  if (!leading_process()) return out_dir;
  io::write_model_file(out_dir + "/model.yaml", run.file);
  fault_point("output");
  io::write_text_atomic(out_dir + "/run.resolved.yaml", config.resolved_yaml(out_dir));
  fault_point("output");
  io::write_text_atomic(out_dir + "/history.csv", run.history);
  spdlog::info("wrote {}/model.yaml, run.resolved.yaml and history.csv ({:.1f} s)", out_dir, seconds);
  return out_dir;
}

int train_main(int argc, char** argv) {
  CLI::App app(
      "Fits a VBAgg model to case counts per administrative unit, with covariate and population rasters, "
      "and writes model.yaml, run.resolved.yaml and history.csv to the output folder. Every setting is "
      "described in docs/configuration.md.",
      "vbagg-train");
  TrainArgs args;
  bool quiet = false, verbose = false, markdown = false;
  app.add_option("--config", args.config_path, "Run configuration (YAML), e.g. run.yaml");
  app.add_option("--set", args.sets, "Override a setting: --set KEY=VALUE, e.g. --set model.link=square (repeatable)");
  app.add_option("--out", args.out, "Output folder (overrides output.dir)");
  app.add_option("--threads", args.threads, "Threads (overrides train.threads; default: every core)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--markdown-config", markdown, "Print the configuration reference (docs/configuration.md) and exit");
  add_common_flags(app, quiet, verbose);
  return run_app(app, argc, argv, [&] {
    if (markdown) {
      std::fputs(configuration_markdown().c_str(), stdout);
      return;
    }
    setup_logging("vbagg-train", quiet, verbose);
    args.progress = !quiet;
    run_train(args);
  });
}

}  // namespace vbagg::cli
