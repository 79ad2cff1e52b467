#include "model_setup.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <unordered_map>

#include "core/likelihood.hpp"

namespace vbagg::cli {

Split split_units(Index bags, double fraction, unsigned long long seed) {
  std::vector<Index> order(static_cast<size_t>(bags));
  for (Index a = 0; a < bags; ++a) order[static_cast<size_t>(a)] = a;
  std::mt19937_64 rng(seed);
  for (Index i = bags - 1; i > 0; --i)
    std::swap(order[static_cast<size_t>(i)],
              order[static_cast<size_t>(rng() % static_cast<unsigned long long>(i + 1))]);
  const Index holdout = std::min(bags - 1, static_cast<Index>(std::llround(fraction * static_cast<double>(bags))));
  Split s;
  s.holdout.assign(order.begin(), order.begin() + holdout);
  s.train.assign(order.begin() + holdout, order.end());
  std::sort(s.holdout.begin(), s.holdout.end());
  std::sort(s.train.begin(), s.train.end());
  return s;
}

ModelSpec model_spec(const Settings& settings) {
  const Settings::Model& c = settings.model;
  ModelSpec s = c.spec;
  const BagLikelihood& lik = likelihood_of(s.likelihood);
  s.link = c.link ? *c.link : lik.links().front();
  // auto: the delta method keeps the posterior variance where it exists; else the bound; else draws.
  s.expectation = c.expectation            ? *c.expectation
                  : lik.has_delta_method() ? Expectation::delta
                  : lik.has_bound()        ? Expectation::bound
                                           : Expectation::sample;
  s.map_estimate = c.kind == ModelKind::nystrom;
  if (c.unit_effect) {
    s.unit_effect = *c.unit_effect;
  } else {
    s.unit_effect = true;
    try {
      s.validate();
    } catch (const ConfigError&) {
      s.unit_effect = false;  // not defined for this model: auto leaves it off
    }
  }
  if (c.kind == ModelKind::constant) s.unit_effect = false;
  try {
    s.validate();
  } catch (const ConfigError& e) {
    throw ConfigError((s.map_estimate
                           ? std::string("model.kind nystrom: ")
                           : std::string("model.likelihood / model.link / model.unit_effect / model.fixed_effects: ")) +
                      e.what());
  }
  if (lik.needs_trials() != !settings.trials_field.empty())
    throw ConfigError(lik.needs_trials() ? "model.likelihood " + to_string(s.likelihood) +
                                               " needs the number tested per unit: set data.units.trials_field"
                                         : "data.units.trials_field is set, but model.likelihood " +
                                               to_string(s.likelihood) + " has no trials (binomial has)");
  if (c.kind == ModelKind::constant && !likelihood_of(s.likelihood).is_count())
    throw ConfigError(
        "model.kind constant is a rate per unit: it needs a count likelihood (poisson, negative_binomial)");
  return s;
}

Kernel model_kernel(const Settings& settings, Index covariates, Index coordinates) {
  const std::string& space = settings.model.kernel_space;
  if (space != "none" && coordinates == 0)
    throw ConfigError("model.kernel.space is '" + space +
                      "' but data.coordinates is false; set model.kernel.space: none "
                      "or data.coordinates: true");
  return make_kernel(settings.model.kernel_covariates, space, covariates, coordinates);
}

int thread_count(const Settings& settings, int cli_threads) {
  const int t = cli_threads > 0 ? cli_threads : settings.train.threads;
  return t > 0 ? t : omp_get_num_procs();
}

Optimizer choose_optimizer(const Settings& settings, Index training_pixels) {
  if (settings.train.optimizer) return *settings.train.optimizer;
  // A sampled expectation needs fresh draws every step and plain gradient steps.
  if (model_spec(settings).expectation == Expectation::sample) return Optimizer::adam;
  return training_pixels <= kFullBatchPixels ? Optimizer::lbfgs : Optimizer::natgrad;
}

Index inducing_count(const Settings& settings, Index training_units) {
  if (settings.model.inducing_count > 0) return settings.model.inducing_count;
  return std::clamp<Index>((training_units + 2) / 3, 32, 200);
}

FitOptions fit_options(const Settings& settings, int threads, Index training_pixels) {
  const Settings::Train& t = settings.train;
  FitOptions o;
  o.optimizer = choose_optimizer(settings, training_pixels);
  o.learning_rate = t.learning_rate;
  o.natgrad_step = t.natgrad_step;
  o.epochs = t.epochs;
  o.first_stage_epochs = t.first_stage_epochs;
  o.batch_bags = t.batch_bags;
  o.tolerance = t.tolerance;
  o.patience = t.patience;
  o.seed = t.seed;
  o.threads = threads;
  return o;
}

void refuse_overwriting_inputs(const std::string& out_dir, const std::vector<std::string>& outputs,
                               const io::DataConfig& data) {
  namespace fs = std::filesystem;
  std::vector<std::string> inputs = {data.population.path, data.units.path};
  for (const auto& l : data.covariates) inputs.push_back(l.path);
  for (const auto& name : outputs) {
    const fs::path out = fs::weakly_canonical(fs::path(out_dir) / name);
    for (const auto& in : inputs)
      if (!in.empty() && fs::weakly_canonical(in) == out)
        throw ConfigError("--out " + out_dir + " would overwrite the input '" + in + "'; choose another folder");
  }
}

std::vector<Index> bags_of(const Dataset& data, const std::vector<std::string>& ids) {
  std::unordered_map<std::string, Index> index;
  for (Index a = 0; a < data.num_bags(); ++a) index.emplace(data.bag_ids[static_cast<size_t>(a)], a);
  std::vector<Index> out;
  for (const auto& id : ids)
    if (auto it = index.find(id); it != index.end()) out.push_back(it->second);
  return out;
}

}  // namespace vbagg::cli
