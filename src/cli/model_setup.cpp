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

ModelSpec model_spec(const Config& c) {
  ModelSpec s;
  s.likelihood = parse_likelihood(c.text("model.likelihood"));
  s.link = parse_link(c.text("model.link"));
  s.covariance = parse_covariance_mode(c.text("model.covariance"));
  s.aggregation = parse_aggregation(c.text("model.aggregation"));
  s.expectation = parse_expectation(c.text("model.expectation"));
  s.learn_inducing = c.boolean("model.inducing.learn_locations");
  s.map_estimate = c.text("model.kind") == "nystrom";
  s.prior_precision = c.real("model.prior_precision");
  s.linear_prior_sd = c.real("model.linear_prior_sd");
  s.samples = static_cast<int>(c.integer("model.samples"));
  s.fixed_effects = parse_fixed_effects(c.text("model.fixed_effects"));
  const std::string unit_effect = c.text("model.unit_effect");
  if (unit_effect == "auto") {
    s.unit_effect = true;
    try {
      s.validate();
    } catch (const ConfigError&) {
      s.unit_effect = false;  // not defined for this model: auto leaves it off
    }
  } else {
    s.unit_effect = unit_effect == "true";
  }
  if (c.text("model.kind") == "constant") s.unit_effect = false;
  try {
    s.validate();
  } catch (const ConfigError& e) {
    throw ConfigError((s.map_estimate
                           ? std::string("model.kind nystrom: ")
                           : std::string("model.likelihood / model.link / model.unit_effect / model.fixed_effects: ")) +
                      e.what());
  }
  if (c.text("model.kind") == "constant" && !likelihood_of(s.likelihood).is_count())
    throw ConfigError(
        "model.kind constant is a rate per unit: it needs a count likelihood (poisson, negative_binomial)");
  return s;
}

Kernel model_kernel(const Config& c, Index covariates, Index coordinates) {
  const std::string space = c.text("model.kernel.space");
  if (space != "none" && coordinates == 0)
    throw ConfigError("model.kernel.space is '" + space +
                      "' but data.coordinates is false; set model.kernel.space: none "
                      "or data.coordinates: true");
  return make_kernel(c.text("model.kernel.covariates"), space, covariates, coordinates);
}

int thread_count(const Config& c, int cli_threads) {
  const int t = cli_threads > 0 ? cli_threads : static_cast<int>(c.integer("train.threads"));
  return t > 0 ? t : omp_get_num_procs();
}

Optimizer choose_optimizer(const Config& c, Index training_pixels) {
  const std::string name = c.text("train.optimizer");
  if (name != "auto") return parse_optimizer(name);
  // A sampled expectation needs fresh draws every step and plain gradient steps.
  if (c.text("model.expectation") == "sample") return Optimizer::adam;
  return training_pixels <= kFullBatchPixels ? Optimizer::lbfgs : Optimizer::natgrad;
}

Index inducing_count(const Config& c, Index training_units) {
  const Index set = c.integer("model.inducing.count");
  if (set > 0) return set;
  return std::clamp<Index>((training_units + 2) / 3, 32, 200);
}

FitOptions fit_options(const Config& c, int threads, Index training_pixels) {
  FitOptions o;
  o.optimizer = choose_optimizer(c, training_pixels);
  o.learning_rate = c.real("train.learning_rate");
  o.natgrad_step = c.real("train.natgrad_step");
  o.epochs = static_cast<int>(c.integer("train.epochs"));
  o.first_stage_epochs = static_cast<int>(c.integer("train.first_stage_epochs"));
  o.batch_bags = c.integer("train.batch_bags");
  o.tolerance = c.real("train.tolerance");
  o.patience = static_cast<int>(c.integer("train.patience"));
  o.seed = static_cast<unsigned long long>(c.integer("train.seed"));
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
