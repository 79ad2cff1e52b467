#include "model_setup.hpp"

#include <spdlog/spdlog.h>

#include <Eigen/QR>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <unordered_map>

#include "core/likelihood.hpp"
#include "core/point_spread.hpp"
#include "processes.hpp"

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

Split split_units(const Dataset& data, double fraction, unsigned long long seed) {
  std::vector<int> sources;
  for (Index a = 0; a < data.num_bags(); ++a) sources.push_back(data.observed(a) ? data.source_of(a) : -1);
  return split_units(sources, fraction, seed);
}

Split split_units(const std::vector<int>& sources, double fraction, unsigned long long seed) {
  Split out;
  const int last = sources.empty() ? -1 : *std::max_element(sources.begin(), sources.end());
  for (int s = 0; s <= last; ++s) {
    std::vector<Index> own;
    for (size_t a = 0; a < sources.size(); ++a)
      if (sources[a] == s) own.push_back(static_cast<Index>(a));
    if (own.empty()) continue;
    const Split part = split_units(static_cast<Index>(own.size()), fraction, seed);
    for (Index k : part.train) out.train.push_back(own[static_cast<size_t>(k)]);
    for (Index k : part.holdout) out.holdout.push_back(own[static_cast<size_t>(k)]);
  }
  std::sort(out.train.begin(), out.train.end());
  std::sort(out.holdout.begin(), out.holdout.end());
  return out;
}

Split hold_out_periods(Split split, const io::BuiltData& built, const std::string& periods) {
  const io::TimeAxis held = io::parse_time_axis(periods, "train.holdout.periods");
  if (held.empty()) return split;
  if (built.time.empty()) throw ConfigError("train.holdout.periods is set but data.time is not: there are no periods");
  std::vector<bool> out(built.time.size(), false);
  for (const io::Period& p : held.periods()) {
    const long k = built.time.index_of(p.label);
    if (k < 0) throw ConfigError("train.holdout.periods: " + p.label + " is not among the periods of data.time");
    out[static_cast<size_t>(k)] = true;
  }
  Split s;
  s.holdout = split.holdout;
  for (Index a : split.train)
    (out[static_cast<size_t>(built.units[static_cast<size_t>(a)].period)] ? s.holdout : s.train).push_back(a);
  if (s.train.empty()) throw ConfigError("train.holdout.periods holds out every period: no unit is left to train on");
  std::sort(s.holdout.begin(), s.holdout.end());
  return s;
}

namespace {

// Whether the core defines the model `spec` describes (ModelSpec::validate): how `auto` settings
// find what a model allows.
bool defined(const ModelSpec& spec) {
  try {
    spec.validate();
    return true;
  } catch (const ConfigError&) {
    return false;
  }
}

// A one-source spec with model.expectation and model.unit_effect resolved for its likelihood.
ModelSpec complete_source(ModelSpec s, const Settings::Model& c) {
  const BagLikelihood& lik = likelihood_of(s.likelihood);
  // auto: the delta method keeps the posterior variance where it exists; else the bound; else draws.
  s.expectation = c.expectation            ? *c.expectation
                  : lik.has_delta_method() ? Expectation::delta
                  : lik.has_bound()        ? Expectation::bound
                                           : Expectation::sample;
  if (c.unit_effect) {
    s.unit_effect = *c.unit_effect;
  } else {
    // Whether this source's observation model defines a unit effect (the other sources and the
    // tasks aside).
    ModelSpec probe = s;
    probe.more_sources.clear();
    probe.tasks.clear();
    probe.task = 0;
    probe.latents = 1;
    probe.unit_effect = true;
    s.unit_effect = defined(probe);  // not defined for this model: auto leaves it off
  }
  if (c.kind == ModelKind::constant) s.unit_effect = false;
  return s;
}

// Each source's name, likelihood and where its trials field is set (data.units alone: one source).
struct SourceChoice {
  std::string name;
  LikelihoodKind likelihood;
  bool trials;
  std::string trials_key;
  std::optional<Link> link;
  std::string task;
};

std::vector<SourceChoice> source_choices(const Settings& settings) {
  const LikelihoodKind configured = settings.model.spec.likelihood;
  if (settings.sources.empty())
    return {{"", configured, !settings.trials_field.empty(), "data.units.trials_field", std::nullopt, ""}};
  std::vector<SourceChoice> out;
  for (size_t i = 0; i < settings.sources.size(); ++i) {
    const Settings::Source& s = settings.sources[i];
    const LikelihoodKind lik = s.likelihood ? *s.likelihood : s.trials ? LikelihoodKind::binomial : configured;
    out.push_back({s.name.empty() ? "units" : s.name, lik, s.trials,
                   "data.sources[" + std::to_string(i) + "].trials_field", s.link, s.task});
  }
  // Tasks: a source without one observes the first source's task, which is named after that source
  // when it names none. No source naming a task: one task, as in a fit of one quantity.
  const bool named = std::any_of(out.begin(), out.end(), [](const SourceChoice& c) { return !c.task.empty(); });
  if (named) {
    if (out[0].task.empty()) out[0].task = out[0].name;
    for (SourceChoice& c : out)
      if (c.task.empty()) c.task = out[0].task;
  }
  return out;
}

// The task names in order of first appearance, and each source's task index (tasks empty: one).
std::vector<std::string> task_names(const std::vector<SourceChoice>& sources) {
  std::vector<std::string> tasks;
  for (const SourceChoice& c : sources)
    if (!c.task.empty() && std::find(tasks.begin(), tasks.end(), c.task) == tasks.end()) tasks.push_back(c.task);
  return tasks;
}

// The sources observe more than one task (model_spec's num_tasks() > 1), without completing and
// validating the whole spec: where the auto schedule and budget of shared latent fields apply.
bool several_tasks(const Settings& settings) { return task_names(source_choices(settings)).size() > 1; }

// The source's link: its own, else model.link, else the first its likelihood allows.
Link source_link(const SourceChoice& src, const Settings::Model& c) {
  return src.link ? *src.link : c.link ? *c.link : likelihood_of(src.likelihood).links().front();
}

}  // namespace

ModelSpec model_spec(const Settings& settings) {
  const Settings::Model& c = settings.model;
  const std::vector<SourceChoice> sources = source_choices(settings);
  ModelSpec s = c.spec;
  s.likelihood = sources[0].likelihood;
  s.link = source_link(sources[0], c);
  s.map_estimate = c.kind == ModelKind::nystrom;
  s.tasks = task_names(sources);
  s.task = std::max<Index>(0, s.find_task(sources[0].task));  // a source without a task: the first
  // auto: several tasks put their intercepts and coefficients in q, since each scales the shared
  // fields and as a point estimate its uncertainty is missing from the intervals
  // (docs/experiments.md, "Annealed steps: variational fixed effects become calibrated").
  s.fixed_effects = c.fixed_effects.value_or(s.num_tasks() > 1 && c.kind == ModelKind::vbagg ? FixedEffects::variational
                                                                                             : FixedEffects::point);
  s = complete_source(s, c);
  // auto: a unit's periods share its effect wherever the model defines that
  // (ModelSpec::unit_effect_shared), else each unit-period has its own.
  ModelSpec shared = s;
  shared.unit_effect_shared = true;
  s.unit_effect_shared = s.unit_effect && settings.periods &&
                         (c.unit_effect_scope == "unit" || (c.unit_effect_scope == "auto" && defined(shared)));
  if (sources.size() > 1) {
    s.source_name = sources[0].name;
    for (size_t i = 1; i < sources.size(); ++i) {
      ModelSpec view = s;
      view.likelihood = sources[i].likelihood;
      view.link = source_link(sources[i], c);
      view = complete_source(view, c);
      s.more_sources.push_back({sources[i].name, view.likelihood, view.expectation, view.aggregation, view.unit_effect,
                                view.link, std::max<Index>(0, s.find_task(sources[i].task))});
    }
  }
  try {
    s.validate();
  } catch (const ConfigError& e) {
    throw ConfigError(
        (s.map_estimate ? std::string("model.kind nystrom: ")
                        : std::string("model.likelihood / model.link / model.unit_effect / model.unit_effect_scope / "
                                      "model.fixed_effects: ")) +
        e.what());
  }
  for (const SourceChoice& src : sources) {
    const BagLikelihood& lik = likelihood_of(src.likelihood);
    const std::string who = sources.size() > 1 ? "source '" + src.name + "': likelihood " : "model.likelihood ";
    if (lik.needs_trials() != src.trials)
      throw ConfigError(
          lik.needs_trials()
              ? who + to_string(src.likelihood) + " needs the number tested per unit: set " + src.trials_key
              : src.trials_key + " is set, but " + who + to_string(src.likelihood) + " has no trials (binomial has)");
  }
  if (c.kind == ModelKind::constant && sources.size() > 1)
    throw ConfigError("model.kind constant is a rate per unit of one source; data.sources lists " +
                      std::to_string(sources.size()));
  if (c.kind == ModelKind::constant && !likelihood_of(s.likelihood).is_count())
    throw ConfigError(
        "model.kind constant is a rate per unit: it needs a count likelihood (poisson, negative_binomial)");
  return s;
}

Kernel model_kernel(const Settings& settings, Index covariates, Index coordinates, const io::TimeAxis& time) {
  // auto: rbf for one period; with periods the many bags per unit pin rbf's smooth field down too
  // tightly (95 % coverage 0.69-0.81), and a Matern prior keeps the intervals honest: matern52
  // was as accurate as matern32 or more in five of six countries and better calibrated in four
  // (docs/experiments.md).
  const std::string space = settings.model.kernel_space != "auto" ? settings.model.kernel_space
                            : time.empty()                        ? "rbf"
                                                                  : "matern52";
  if (space != "none" && coordinates == 0)
    throw ConfigError("model.kernel.space is '" + space +
                      "' but data.coordinates is false; set model.kernel.space: none "
                      "or data.coordinates: true");
  std::string on_time = settings.model.kernel_time;
  if (on_time == "auto") on_time = time.empty() ? "none" : time.monthly() ? "seasonal+trend" : "trend";
  if (on_time != "none" && time.empty())
    throw ConfigError("model.kernel.time is '" + on_time + "' but data.time is not set: there is no time axis");
  if (on_time.find("seasonal") != std::string::npos && !time.monthly())
    throw ConfigError("model.kernel.time is '" + on_time +
                      "' but the periods of data.time are years: a seasonal kernel needs months (use trend)");
  if (on_time == "none" && !time.empty() && space == "none")
    throw ConfigError(
        "data.time is set but model.kernel.time and model.kernel.space are none: the model could "
        "not tell the periods apart");
  const std::string season = settings.model.kernel_season == "auto" ? "periodic" : settings.model.kernel_season;
  if (season != "periodic" && on_time.find("seasonal") == std::string::npos)
    throw ConfigError("model.kernel.season is '" + season + "' but model.kernel.time is '" + on_time +
                      "': there is no seasonal part to shape");
  const std::string space_time =
      settings.model.kernel_space_time == "auto" ? "shared" : settings.model.kernel_space_time;
  if (space_time != "shared" && (on_time != "seasonal+trend" || space == "none"))
    throw ConfigError("model.kernel.space_time is '" + space_time + "' but model.kernel.time is '" + on_time +
                      "' and model.kernel.space '" + space +
                      "': only a space kernel times seasonal+trend has two time parts to separate");
  return make_kernel(settings.model.kernel_covariates, space, covariates, coordinates, on_time, season, space_time);
}

namespace {

// The variance of the first source's training units' log rates (logits of a survey's prevalence;
// half a case or positive added, so that zeros count) that their mean covariates do not explain:
// the residual variance of a least-squares fit on the population-weighted mean of each covariate
// over the unit's pixels (an MPI job's processes pool their sums). The linear mean explains that
// part, not the field; with too few units for the fit, the variance about their mean. At least
// 0.01 (a field of sd 0.1), for a handful of units that agree.
double residual_log_rate_variance(const io::BuiltData& built, const std::vector<Index>& train) {
  const Dataset& d = built.dataset;
  const Index Dc = static_cast<Index>(built.covariates.size());
  Matrix sums = Matrix::Zero(Dc + 1, static_cast<Index>(built.units.size()));  // sum of w x, then of w
  for (Index a = 0; a < d.num_bags(); ++a) {
    const Index g = d.global_bag_of(a) - built.first_unit;
    for (Index i = d.bag_begin(a); i < d.bag_begin(a) + d.bag_size(a); ++i) {
      const double w = d.coverage[i] * d.population[i];
      sums.col(g).head(Dc) += w * d.inputs.col(i).head(Dc);
      sums(Dc, g) += w;
    }
  }
  processes().sum(sums);
  std::vector<Index> units;
  for (Index a : train)
    if (built.units[static_cast<size_t>(a)].source == 0 && sums(Dc, a) > 0) units.push_back(a);
  const Index n = static_cast<Index>(units.size());
  const bool regress = n > 2 * (Dc + 1);
  const Index p = regress ? Dc + 1 : 1;
  Matrix X(n, p);
  Vector y(n);
  for (Index k = 0; k < n; ++k) {
    const Index a = units[static_cast<size_t>(k)];
    const io::UnitSummary& u = built.units[static_cast<size_t>(a)];
    y[k] = u.trials > 0 ? std::log((u.response + 0.5) / (u.trials - u.response + 0.5))
                        : std::log((u.response + 0.5) / u.population);
    X(k, 0) = 1;
    if (regress) X.row(k).tail(Dc) = sums.col(a).head(Dc).transpose() / sums(Dc, a);
  }
  if (n < 2) return 0.01;
  const Vector residual = y - X * X.colPivHouseholderQr().solve(y);
  return std::max(residual.squaredNorm() / static_cast<double>(n - p), 0.01);
}

}  // namespace

ModelSpec::KernelPrior space_kernel_prior(const Settings& settings, const io::BuiltData& built, const Kernel& kernel,
                                          const std::vector<Index>& train) {
  ModelSpec::KernelPrior prior;
  const Index Dc = static_cast<Index>(built.covariates.size()), Dx = built.num_coordinates;
  // auto: on for one period. Space and time have not been measured with it (docs/experiments.md).
  const bool wanted = settings.model.space_prior.value_or(built.time.empty());
  if (!wanted || Dx == 0) return prior;
  if (!(settings.model.space_prior_sd > 0))
    throw ConfigError("model.kernel.space_prior_sd must be positive with model.kernel.space_prior on");
  for (size_t c = 0; c < kernel.parts().size(); ++c)
    if (kernel.parts()[c].begin == Dc && kernel.parts()[c].dim == Dx) prior.part = static_cast<Index>(c);
  if (prior.part < 0) return prior;
  prior.log_variance = std::log(residual_log_rate_variance(built, train));
  const Matrix range = processes().row_ranges(built.dataset.inputs.middleRows(Dc, Dx));
  const double diagonal = (range.col(1) - range.col(0)).norm();
  prior.log_lengthscale = std::log(std::max(diagonal / 4, 1e-3));
  prior.sd = settings.model.space_prior_sd;
  spdlog::info("space kernel priors (sd {:.3g} on the log scale): variance about {:.3g}, lengthscale about {:.4g} km",
               prior.sd, std::exp(prior.log_variance), std::exp(prior.log_lengthscale));
  return prior;
}

int thread_count(const Settings& settings, int cli_threads) {
  const int t = cli_threads > 0 ? cli_threads : settings.train.threads;
  return t > 0 ? t : default_threads();
}

Optimizer choose_optimizer(const Settings& settings, Index training_pixels) {
  if (settings.train.optimizer) return *settings.train.optimizer;
  // A sampled expectation needs fresh draws every step and plain gradient steps.
  const ModelSpec spec = model_spec(settings);
  if (spec.any_sampled()) return Optimizer::adam;
  // A MAP estimate has no q for natural-gradient steps.
  if (spec.map_estimate) return training_pixels <= kFullBatchPixels ? Optimizer::lbfgs : Optimizer::adam;
  return training_pixels <= kFullBatchPixels ? Optimizer::lbfgs : Optimizer::natgrad;
}

namespace {

// Where the polish was measured and is on by default: an L-BFGS fit of a variational model, of one
// period or several, of one source or several. Several tasks' L-BFGS stopped at its budget, and
// 100 evaluations and the polish made all three synthetic countries' incidence maps more accurate
// and better calibrated, in less time; several sources of one task fitted alike either way
// (docs/experiments.md, "The polish for several sources").
bool polish_measured(const Settings& settings, Optimizer optimizer) {
  const ModelSpec spec = model_spec(settings);
  return optimizer == Optimizer::lbfgs && !spec.map_estimate && settings.model.kind != ModelKind::constant;
}

}  // namespace

int default_polish(const Settings& settings, Optimizer optimizer, int epochs) {
  if (settings.train.polish) return *settings.train.polish;
  // Bounded by the epochs too: a fit told to stop after a few (a quick look at new data, a smoke
  // test) should not run hundreds of polish steps after them.
  return polish_measured(settings, optimizer) ? std::min(kAutoPolish, epochs) : 0;
}

// auto: the annealed steps that variational fixed effects need to settle (several tasks).
Schedule default_schedule(const Settings& settings) {
  return settings.train.schedule.value_or(several_tasks(settings) ? Schedule::anneal : Schedule::constant);
}

int default_epochs(const Settings& settings, Optimizer optimizer) {
  // Measured on 24 months of a 60-unit country (docs/experiments.md, "A penalised-complexity
  // prior"): after 350 evaluations the shared unit effects still held part of the field and a
  // static covariate's effect (maps' 95 % intervals covering 71 % of the truth); after 1,550 the
  // effects' sd had fallen from 0.21 to 0.02 (truth 0) and the pixel MSE 35-fold.
  // With the polish after 400 of them, three such countries ended higher than after L-BFGS
  // alone (867-1,550 evaluations) in fewer passes (docs/experiments.md, "A shorter L-BFGS, then
  // the polish").
  if (optimizer == Optimizer::lbfgs && settings.periods)
    return default_polish(settings, optimizer, kSpaceTimeEpochsBeforePolish) > 0 ? kSpaceTimeEpochsBeforePolish : 1500;
  // One period: L-BFGS's last hundreds of evaluations gained a few nats at a crawl, and the polish
  // gains them in fewer passes. On 36 synthetic countries, 100 evaluations per stage and then the
  // polish (at most 100 evaluations) were as calibrated and as accurate as 300 and the polish, in
  // two thirds of the time without unit noise (docs/experiments.md, "A shorter L-BFGS for one
  // period"). Before the negative binomial kept its digits at the Poisson limit, the shorter
  // L-BFGS left one country to the polish in that objective's rounding noise, and its map was lost.
  if (optimizer == Optimizer::lbfgs && default_polish(settings, optimizer, kEpochsBeforePolish) > 0)
    return kEpochsBeforePolish;
  // Several tasks: their annealed steps were measured over 1000 epochs (docs/experiments.md).
  return optimizer != Optimizer::lbfgs && several_tasks(settings) ? 1000 : 300;
}

Index inducing_count(const Settings& settings, const std::vector<io::UnitSummary>& units,
                     const std::vector<Index>& train) {
  if (settings.model.inducing_count > 0) return settings.model.inducing_count;
  std::vector<Index> per_source;
  for (Index a : train) {
    const auto s = static_cast<size_t>(units[static_cast<size_t>(a)].source);
    if (s >= per_source.size()) per_source.resize(s + 1, 0);
    ++per_source[s];
  }
  const Index densest = per_source.empty() ? 0 : *std::max_element(per_source.begin(), per_source.end());
  return std::clamp<Index>((densest + 2) / 3, 32, 200);
}

FitOptions fit_options(const Settings& settings, int threads, Index training_pixels) {
  const Settings::Train& t = settings.train;
  FitOptions o;
  o.optimizer = choose_optimizer(settings, training_pixels);
  o.learning_rate = t.learning_rate;
  o.natgrad_step = t.natgrad_step;
  o.schedule = default_schedule(settings);
  o.epochs = t.epochs > 0 ? t.epochs : default_epochs(settings, o.optimizer);
  o.first_stage_epochs = t.first_stage_epochs;
  o.polish = default_polish(settings, o.optimizer, o.epochs);
  o.batch_bags = t.batch_bags;
  o.tolerance = t.tolerance;
  o.lbfgs_memory = t.lbfgs_memory;
  o.patience = t.patience;
  o.seed = t.seed;
  o.threads = threads;
  // Its readings are full passes over the data, about four per parameter: a fifth of an L-BFGS
  // fit, but minutes at the sizes natgrad fits.
  o.point_spread = settings.model.point_spread.value_or(settings.model.kind == ModelKind::vbagg &&
                                                        training_pixels <= kFullBatchPixels);
  if (settings.model.point_spread.value_or(false) &&
      (settings.model.kind == ModelKind::constant || !spread_defined(model_spec(settings))))
    throw ConfigError(
        "model.point_uncertainty laplace needs a variational model (model.kind vbagg or bag_pixel) whose every "
        "source has the bound or delta expectation: the sampled expectation's objective changes with its draws");
  return o;
}

void refuse_overwriting_inputs(const std::string& out_dir, const std::vector<std::string>& outputs,
                               const io::DataConfig& data) {
  namespace fs = std::filesystem;
  std::vector<std::string> inputs = {data.population.path, data.units.path, data.units.response_table};
  for (const auto& l : data.covariates) inputs.push_back(l.path);
  // Every period's files of a space-time configuration's patterns.
  for (size_t p = 0; p < data.time.size(); ++p) {
    const io::DataConfig one = io::period_config(data, p);
    inputs.push_back(one.population.path);
    for (const auto& l : one.covariates) inputs.push_back(l.path);
  }
  for (const auto& m : data.more_sources) {
    inputs.push_back(m.units.path);
    inputs.push_back(m.population.path);
    for (const auto& l : m.covariates) inputs.push_back(l.path);
  }
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
