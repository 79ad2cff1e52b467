// vbagg-train: build the dataset, split units, fit, write model.yaml, run.resolved.yaml, history.csv.
#include "train.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "app.hpp"
#include "config.hpp"
#include "core/baselines.hpp"
#include "core/objective.hpp"
#include "core/predict.hpp"
#include "io/atomic_file.hpp"
#include "io/model_file.hpp"
#include "model_setup.hpp"
#include "params.hpp"

namespace vbagg::cli {

namespace {

namespace fs = std::filesystem;

std::vector<std::string> ids_of(const Dataset& d, const std::vector<Index>& bags) {
  std::vector<std::string> ids;
  for (Index a : bags) ids.push_back(d.bag_ids[static_cast<size_t>(a)]);
  return ids;
}

}  // namespace

int train_main(int argc, char** argv) {
  CLI::App app(
      "Fits a VBAgg model to case counts per administrative unit, with covariate and population rasters, "
      "and writes model.yaml, run.resolved.yaml and history.csv to the output folder. Every setting is "
      "described in docs/configuration.md.",
      "vbagg-train");
  std::string config_path, out;
  std::vector<std::string> sets;
  int threads = 0;
  bool quiet = false, verbose = false, markdown = false;
  app.add_option("--config", config_path, "Run configuration (YAML), e.g. run.yaml");
  app.add_option("--set", sets, "Override a setting: --set KEY=VALUE, e.g. --set model.link=square (repeatable)");
  app.add_option("--out", out, "Output folder (overrides output.dir)");
  app.add_option("--threads", threads, "Threads (overrides train.threads; default: every core)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--markdown-config", markdown, "Print the configuration reference (docs/configuration.md) and exit");
  add_verbosity_flags(app, quiet, verbose);
  return run_app(app, argc, argv, [&] {
    if (markdown) {
      std::fputs(configuration_markdown().c_str(), stdout);
      return;
    }
    if (config_path.empty()) throw ConfigError("--config is required (a run.yaml; see docs/configuration.md)");
    setup_logging("vbagg-train", quiet, verbose);
    const auto t0 = std::chrono::steady_clock::now();
    Config config = Config::load(config_path, sets);
    if (!out.empty()) config.set("output.dir", fs::absolute(out).string());
    const std::string out_dir = config.path("output.dir");
    const io::DataConfig data_config = config.data_config();
    refuse_overwriting_inputs(out_dir, {"model.yaml", "run.resolved.yaml", "history.csv"}, data_config);
    io::ensure_writable_dir(out_dir);
    const int nthreads = thread_count(config, threads);
    ModelSpec spec = model_spec(config);

    spdlog::info("building the dataset from {}", config_path);
    io::BuiltData built = io::build_dataset(data_config, config.base_dir());
    for (const auto& line : io::report_lines(built)) spdlog::info("{}", line);
    Dataset& data = built.dataset;
    const Index Dc = static_cast<Index>(built.covariates.size());
    const Kernel kernel = model_kernel(config, Dc, built.num_coordinates);
    if (config.text("model.mean_function") == "linear") spec.linear_inputs = Dc;

    const Split split = split_units(data.num_bags(), config.real("train.holdout.fraction"),
                                    static_cast<unsigned long long>(config.integer("train.holdout.seed")));
    const Standardization standardization = fit_standardization(data, split.train, Dc);
    standardization.apply(data.inputs);
    spdlog::info("{} training units, {} holdout units", split.train.size(), split.holdout.size());

    const std::string kind = config.text("model.kind");
    io::ModelFile file;
    file.kind = kind;
    FitResult result;
    std::ostringstream history;
    history.precision(17);
    history << "epoch,objective,holdout_nll,learning_rate,seconds\n";
    if (kind == "constant") {
      // Each training unit's own rate; the overall training rate elsewhere. Nothing to optimise.
      const Vector P = data.bag_weights();
      double y = 0, p = 0;
      for (Index a : split.train) {
        file.unit_rates[data.bag_ids[static_cast<size_t>(a)]] = data.response[a] / P[a];
        y += data.response[a];
        p += P[a];
      }
      file.overall_rate = y / p;
      result.stop_reason = "closed_form";
      result.elbo = NAN;
      spdlog::info("constant model: overall training rate {:.6g} per person", file.overall_rate);
    } else {
      // bag_pixel fits the same model to each unit collapsed to one pseudo-pixel.
      const Dataset fit_data = kind == "bag_pixel" ? collapse_bags(data) : Dataset();
      const Dataset& d = kind == "bag_pixel" ? fit_data : data;
      InitOptions init;
      init.inducing = config.integer("model.inducing.count");
      init.jitter = config.real("model.jitter");
      init.seed = static_cast<unsigned long long>(config.integer("train.seed"));
      const Dataset train_data = subset_bags(d, split.train);
      Model model = init_model(spec, kernel, train_data, init);
      if (model.num_inducing() < init.inducing)
        spdlog::warn("only {} distinct training inputs: using {} inducing points instead of {}", model.num_inducing(),
                     model.num_inducing(), init.inducing);
      FitOptions fo = fit_options(config, nthreads, train_data.num_pixels());
      spdlog::info("optimizer: {}", to_string(fo.optimizer));
      Progress progress("training", fo.epochs * (fits_in_stages(spec, fo) ? 2 : 1), !quiet);
      // Without a progress bar (batch runs, logs to files) epochs are logged at info level.
      const bool bar = !quiet && stderr_is_terminal();
      const int log_every = std::max(1, fo.epochs / 20);
      fo.on_epoch = [&](const EpochInfo& e) {
        history << e.epoch << "," << e.elbo << "," << e.holdout_nll << "," << e.learning_rate << "," << e.seconds << "\n";
        char suffix[128];
        std::snprintf(suffix, sizeof suffix, "epoch %d  objective %.6g  holdout NLL %.5g", e.epoch, e.elbo, e.holdout_nll);
        progress.update(e.epoch, suffix);
        if (e.epoch % log_every == 0 || e.epoch == 1)
          spdlog::log(bar ? spdlog::level::debug : spdlog::level::info, "epoch {}: objective {:.8g}, holdout NLL {:.6g}, {:.1f} s",
                      e.epoch, e.elbo, e.holdout_nll, e.seconds);
        return true;
      };
      spdlog::info("fitting {} ({} likelihood, {} link): {} pixels, {} inputs, {} inducing points, {} threads", kind,
                   to_string(spec.likelihood), to_string(spec.link), d.num_pixels(), d.num_inputs(), model.num_inducing(),
                   nthreads);
      result = fit(model, d, split.train, split.holdout, fo);
      progress.finish();
      spdlog::info("stopped after {} epochs ({}): objective {:.8g}{}", result.epochs, result.stop_reason, result.elbo,
                   split.holdout.empty()
                       ? std::string()
                       : fmt::format(", holdout NLL {:.6g}", bag_predictive_nll(model, d, split.holdout, nthreads)));
      if (result.recovered_steps)
        spdlog::warn("{} steps gave a non-finite objective and were rolled back with a smaller learning rate",
                     result.recovered_steps);
      file.model = model;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    file.covariates = built.covariates;
    file.standardization = standardization;
    file.coordinates = static_cast<int>(built.num_coordinates);
    file.grid = built.grid;
    file.train_units = ids_of(data, split.train);
    file.holdout_units = ids_of(data, split.holdout);
    file.training = {result.epochs, result.stop_reason, result.elbo, result.best_holdout_nll, seconds};
    file.config = config.resolved_node();
    io::write_model_file(out_dir + "/model.yaml", file);
    io::write_text_atomic(out_dir + "/run.resolved.yaml", config.resolved_yaml());
    io::write_text_atomic(out_dir + "/history.csv", history.str());
    spdlog::info("wrote {}/model.yaml, run.resolved.yaml and history.csv ({:.1f} s)", out_dir, seconds);
  });
}

}  // namespace vbagg::cli
