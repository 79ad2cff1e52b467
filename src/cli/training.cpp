#include "training.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <sstream>

#include "app.hpp"
#include "core/baselines.hpp"
#include "core/fit.hpp"
#include "core/init.hpp"
#include "core/likelihood.hpp"
#include "core/point_spread.hpp"
#include "core/predict.hpp"
#include "core/standardize.hpp"
#include "processes.hpp"

namespace vbagg::cli {

namespace {

std::vector<std::string> ids_of(const io::BuiltData& built, const std::vector<Index>& bags) {
  std::vector<std::string> ids;
  for (Index a : bags) ids.push_back(built.units[static_cast<size_t>(a)].id);
  return ids;
}

std::vector<Index> all_units(const io::BuiltData& built) {
  std::vector<Index> all(built.units.size());
  for (size_t a = 0; a < all.size(); ++a) all[a] = static_cast<Index>(a);
  return all;
}

// Each training unit's own rate; the overall training rate elsewhere. Nothing to optimise.
void fit_constant(const Dataset& data, const Split& split, io::ModelFile& file, FitResult& result) {
  file.constant = fit_constant_rates(data, split.train);
  result.stop_reason = "closed_form";
  result.elbo = NAN;
  spdlog::info("constant model: overall training rate {:.6g} per person", file.constant.overall);
}

// The intercept and the covariate effects on the latent scale (per sd of each covariate), with
// their posterior sd when they are part of q.
void log_fixed_effects(const Model& model, const std::vector<std::string>& covariates) {
  const FixedEffectEstimates e = fixed_effect_estimates(model);
  const bool sd = model.spec.fixed_effects == FixedEffects::variational;
  auto one = [&](Index k) {
    return sd ? fmt::format("{:.4g} ± {:.2g}", e.mean[k], e.sd[k]) : fmt::format("{:.4g}", e.mean[k]);
  };
  std::string text = "intercept " + one(0);
  for (Index k = 1; k < e.mean.size(); ++k) text += ", " + covariates[static_cast<size_t>(k - 1)] + " " + one(k);
  const std::string task = model.spec.num_tasks() > 1 ? " of task '" + model.spec.task_name(model.spec.task) + "'" : "";
  spdlog::info("fixed effects ({}){}: {}", to_string(model.spec.fixed_effects), task, text);
}

// The point estimates' Laplace sds, and which ones the data barely bound (near the largest sd the
// spread gives: a covariate kernel part the map hardly uses, a noise parameter on a plateau).
void log_point_spread(const Model& model, double largest_sd) {
  const PointSpread& s = model.spread;
  if (s.directions() == 0) return;
  std::string bounded, loose;
  for (size_t j = 0; j < s.names.size(); ++j) {
    const double sd = s.sd[static_cast<Index>(j)];
    if (sd >= 0.9 * largest_sd)
      loose += (loose.empty() ? "" : ", ") + s.names[j];
    else if (sd > 0)
      bounded += fmt::format("{}{} {:.2g}", bounded.empty() ? "" : ", ", s.names[j], sd);
  }
  spdlog::info("point estimates' spread (Laplace sd, {} directions): {}", s.directions(), bounded);
  if (!loose.empty()) spdlog::info("barely bound by the data (sd near the largest, {}): {}", largest_sd, loose);
}

// Each task's mixing weights over the latent fields, and the prior correlations of the tasks.
void log_tasks(const Model& model, const std::vector<std::string>& covariates) {
  if (!model.spec.mixed()) return;
  for (Index d = 0; d < model.spec.num_tasks(); ++d) {
    if (model.spec.num_tasks() > 1) log_fixed_effects(model.for_task(d), covariates);
    std::string w;
    for (Index q = 0; q < model.num_latents(); ++q) w += fmt::format("{}{:.3g}", q ? ", " : "", model.mixing(d, q));
    const std::string task = model.spec.tasks.empty() ? "" : "task '" + model.spec.task_name(d) + "': ";
    spdlog::info("{}mixing weights over {} latent fields ({})", task, model.num_latents(), w);
  }
  const Matrix C = model.task_correlations();
  for (Index d = 0; d < C.rows(); ++d)
    for (Index e = d + 1; e < C.cols(); ++e)
      spdlog::info("prior correlation of the latent fields of '{}' and '{}': {:.3f}", model.spec.task_name(d),
                   model.spec.task_name(e), C(d, e));
}

// Each source's own fitted parameters (dispersion, noise, unit-effect sd), by name.
void log_source_parameters(const Model& model) {
  for (Index s = 0; s < model.spec.num_sources(); ++s) {
    const Model v = model.for_source(s);
    std::string text;
    const auto names = likelihood_of(v.spec.likelihood).param_names();
    for (size_t k = 0; k < names.size(); ++k)
      text +=
          fmt::format("{}{} {:.4g}", text.empty() ? "" : ", ", names[k], v.likelihood_params[static_cast<Index>(k)]);
    if (v.spec.unit_effect)
      text += fmt::format("{}unit effect sd {:.3g}", text.empty() ? "" : ", ", std::exp(v.unit_effect.log_sd));
    if (!text.empty())
      spdlog::info("{}{}", v.spec.source_name.empty() ? "" : "source '" + v.spec.source_name + "': ", text);
  }
}

// In an MPI job, the shards of the whole data (whose bags are built.units) and of its training
// units, and this process's share of the training units. `shared` is false in a run of one process.
struct ProcessShare {
  bool shared = false;
  Dataset local_train;
  Shard all, train;
};

// `d` is this process's share of the units (or its bag_pixel collapse), as io::build_dataset gives it.
ProcessShare share_units(const io::BuiltData& built, const Dataset& d, const std::vector<Index>& train) {
  ProcessShare s;
  const Collective& world = processes();
  if (world.size() == 1) return s;
  s.shared = true;
  s.all = make_shard(d, ids_of(built, all_units(built)), world);
  s.train = subset_shard(s.all, d, train, s.local_train);
  // The spread of the work: every process's pixels, summed into the leading process's log.
  Vector load = Vector::Zero(world.size());
  load[world.rank()] = static_cast<double>(d.num_pixels());
  world.sum(load);
  spdlog::info("{} processes share {} units: {:.0f} to {:.0f} pixels each", world.size(), built.units.size(),
               load.minCoeff(), load.maxCoeff());
  return s;
}

// The GP kinds: vbagg, nystrom (MAP), and bag_pixel (the same model on each unit collapsed to one
// pseudo-pixel).
void fit_gp(const Settings& settings, const io::BuiltData& built, const Split& split, ModelSpec spec, int threads,
            bool show_progress, io::ModelFile& file, FitResult& result, std::ostringstream& history) {
  const Dataset& data = built.dataset;
  const ModelKind kind = settings.model.kind;
  const Index Dc = static_cast<Index>(built.covariates.size());
  const Kernel kernel = model_kernel(settings, Dc, built.num_coordinates, built.time);
  if (settings.model.linear_mean) spec.linear_inputs = Dc;
  spec.kernel_prior = space_kernel_prior(settings, built, kernel, split.train);
  const Dataset fit_data = kind == ModelKind::bag_pixel ? collapse_bags(data) : Dataset();
  const Dataset& d = kind == ModelKind::bag_pixel ? fit_data : data;
  InitOptions init;
  init.inducing = inducing_count(settings, built.units, split.train);
  init.jitter = settings.model.jitter;
  init.seed = settings.train.seed;
  // In an MPI job each process holds its share of the units; the model, the steps and the result
  // are those of one process holding them all (to rounding).
  ProcessShare share = share_units(built, d, split.train);
  Model model;
  {
    // The training units' copy only serves the initialisation: it is gone before the fit.
    const Dataset train_data = share.shared ? Dataset() : subset_bags(d, split.train);
    const Dataset& train_here = share.shared ? share.local_train : train_data;
    // Inducing points over every unit's pixels: held-out units and units without counts are
    // predicted too, and their totals need the correlated part of q.
    const PixelColumns placement = share.shared ? PixelColumns(d, share.all) : PixelColumns(d.inputs);
    init.placement = &placement;
    if (share.shared) init.shard = &share.train;
    model = init_model(spec, kernel, train_here, init);
    share.local_train = Dataset();
  }
  if (model.num_inducing() < init.inducing)
    spdlog::warn("only {} distinct training inputs: using {} inducing points instead of {}", model.num_inducing(),
                 model.num_inducing(), init.inducing);
  Index training_pixels = 0;
  for (Index a : split.train)
    training_pixels += kind == ModelKind::bag_pixel ? 1 : built.units[static_cast<size_t>(a)].pixels;
  FitOptions fo = fit_options(settings, threads, training_pixels);
  if (share.shared) fo.shard = &share.all;
  spdlog::info("optimizer: {}", to_string(fo.optimizer));
  const int first = fits_in_stages(spec, fo) ? std::min(fo.epochs, fo.first_stage_epochs) : 0;
  // Without a progress bar (batch runs, logs to files) epochs are logged at info level instead.
  const bool bar = show_progress && stderr_is_terminal();
  const int polish = polish_follows(fo.optimizer) ? fo.polish : 0;
  if (fo.polish > 0 && polish == 0)
    spdlog::warn("train.polish follows natural-gradient or L-BFGS epochs only; this {} fit has none",
                 to_string(fo.optimizer));
  Progress progress("training", fo.epochs + first + polish, bar);
  const int log_every = std::max(1, fo.epochs / 20);
  // L-BFGS scores the holdout every few evaluations (history.csv has nan between): the log and the
  // bar show the latest score, with its epoch when it is older than the line.
  double scored_nll = NAN;
  int scored_epoch = 0;
  fo.on_epoch = [&](const EpochInfo& e) {
    history << e.epoch << "," << e.elbo << "," << e.holdout_nll << "," << e.learning_rate << "," << e.seconds << "\n";
    if (!std::isnan(e.holdout_nll)) {
      scored_nll = e.holdout_nll;
      scored_epoch = e.epoch;
    }
    const std::string nll = std::isnan(scored_nll) ? std::string()
                            : scored_epoch == e.epoch
                                ? fmt::format(", holdout NLL {:.6g}", scored_nll)
                                : fmt::format(", holdout NLL {:.6g} (epoch {})", scored_nll, scored_epoch);
    progress.update(e.epoch, fmt::format("epoch {}  objective {:.6g}{}", e.epoch, e.elbo, nll));
    if (e.epoch % log_every == 0 || e.epoch == 1)
      spdlog::log(bar ? spdlog::level::debug : spdlog::level::info, "epoch {}: objective {:.8g}{}, {:.1f} s", e.epoch,
                  e.elbo, nll, e.seconds);
    fault_point("epoch");
    return true;
  };
  spdlog::info("fitting {} ({} likelihood, {} link): {} pixels, {} inputs, {} inducing points, {} threads",
               to_string(kind), to_string(spec.likelihood), to_string(spec.link), total_pixels(built), d.num_inputs(),
               model.num_inducing(), threads);
  for (Index s = 0; s < spec.num_sources() && spec.num_sources() > 1; ++s) {
    const SourceSpec src = spec.source(s);
    Index units = 0;
    for (Index a : split.train) units += built.units[static_cast<size_t>(a)].source == s ? 1 : 0;
    spdlog::info("source '{}': {} training units, {} likelihood, {} link, {} expectation{}{}", src.name, units,
                 to_string(src.likelihood), to_string(src.link), to_string(src.expectation),
                 src.unit_effect ? ", unit effect" : "",
                 spec.tasks.empty() ? "" : ", task '" + spec.task_name(src.task) + "'");
  }
  result = fit(model, d, split.train, split.holdout, fo);
  progress.finish();
  spdlog::info("stopped after {} epochs ({}): objective {:.8g}{}", result.epochs, result.stop_reason, result.elbo,
               split.holdout.empty() ? std::string()
                                     : fmt::format(", holdout NLL {:.6g}", held_out_nll(model, d, split.holdout, fo)));
  if (!result.spread_skipped.empty())
    spdlog::warn("the point estimates' spread was not estimated ({}): the intervals take them as known",
                 result.spread_skipped);
  if (result.recovered_steps)
    spdlog::warn("{} steps gave a non-finite objective and were rolled back with a smaller learning rate",
                 result.recovered_steps);
  if (model.spec.num_tasks() == 1) log_fixed_effects(model, built.covariates);
  log_tasks(model, built.covariates);
  log_source_parameters(model);
  log_point_spread(model, SpreadOptions().max_sd);
  file.model = std::move(model);
}

}  // namespace

TrainRun train_on_split(const Config& config, io::BuiltData built, const Split& split, int threads, bool progress) {
  const auto t0 = std::chrono::steady_clock::now();
  const Settings settings = settings_of(config);
  const ModelSpec spec = model_spec(settings);
  Dataset& data = built.dataset;
  const Index Dc = static_cast<Index>(built.covariates.size());
  // Each process of an MPI job holds some of the training units; the sums cover them all.
  const Standardization standardization = fit_standardization(data, bags_held(data, split.train), Dc, processes());
  standardization.apply(data.inputs);
  spdlog::info("{} training units, {} holdout units", split.train.size(), split.holdout.size());

  TrainRun run;
  io::ModelFile& file = run.file;
  file.kind = settings.model.kind;
  FitResult result;
  std::ostringstream history;
  history.precision(17);
  history << "epoch,objective,holdout_nll,learning_rate,seconds\n";
  if (settings.model.kind == ModelKind::constant)
    // Bag totals are all it needs: the whole data's summary in an MPI job.
    fit_constant(process_count() > 1 ? make_shard(data, ids_of(built, all_units(built)), processes()).summary : data,
                 split, file, result);
  else
    fit_gp(settings, built, split, spec, threads, progress, file, result, history);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  file.covariates = built.covariates;
  file.standardization = standardization;
  file.coordinates = static_cast<int>(built.num_coordinates);
  file.time = built.time;
  file.grid = built.grid;
  file.train_units = ids_of(built, split.train);
  file.holdout_units = ids_of(built, split.holdout);
  file.training = {result.epochs, result.stop_reason, result.elbo, result.best_holdout_nll, seconds};
  file.config = config.resolved_node();
  run.history = history.str();
  return run;
}

}  // namespace vbagg::cli
