// The run's settings as typed values, read once from a validated configuration. The apps use these
// fields, so a misspelt setting in code is a compile error; settings_of is the one place that
// names the keys of model.*, train.*, predict.* and output.* (the data.* keys are io::DataConfig,
// Config::data_config), and a test checks that it reads every one of them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config.hpp"
#include "core/fit.hpp"
#include "core/model.hpp"

namespace vbagg::cli {

struct Settings {
  struct Model {
    ModelKind kind = ModelKind::vbagg;
    // The core's choices as set: likelihood, covariance, aggregation, samples,
    // prior precision and sd, learned inducing inputs (model_spec completes it).
    ModelSpec spec;
    std::optional<Link> link;                   // nullopt: auto, the likelihood's first link
    std::optional<Expectation> expectation;     // nullopt: auto
    bool linear_mean = true;                    // mean_function: linear
    std::optional<bool> unit_effect;            // nullopt: auto
    std::optional<FixedEffects> fixed_effects;  // nullopt: auto (model_spec: variational for several tasks)
    std::string unit_effect_scope;              // model.unit_effect_scope: auto, unit or period
    std::optional<bool> point_spread;           // model.point_uncertainty laplace; nullopt: auto
    double jitter = 1e-6;
    std::string kernel_covariates, kernel_space, kernel_time;
    std::string kernel_season;        // model.kernel.season: auto, periodic or cycle
    std::string kernel_space_time;    // model.kernel.space_time: auto, shared or separate
    std::optional<bool> space_prior;  // model.kernel.space_prior (none: auto)
    double space_prior_sd = 1;        // model.kernel.space_prior_sd
    Index inducing_count = 0;         // 0: from the number of training units
    std::string inducing_init;
  } model;
  struct Train {
    std::optional<Optimizer> optimizer;  // nullopt: auto
    std::optional<Schedule> schedule;    // nullopt: auto (fit_options: anneal for several tasks)
    double learning_rate = 0, natgrad_step = 0, tolerance = 0, holdout_fraction = 0;
    int epochs = 0, first_stage_epochs = 0, patience = 0, threads = 0;
    std::optional<int> polish;  // nullopt: auto
    int lbfgs_memory = 0;
    Index batch_bags = 0;
    unsigned long long seed = 0, holdout_seed = 0;
    std::string holdout_periods;  // data.time's form; empty: none
  } train;
  struct Predict {
    std::vector<double> quantiles, exceedance;
    int samples = 0;
    int strip_rows = 0;  // 0: automatic
    double rate_per = 1;
    bool qgis_style = true;
    std::vector<std::string> spans;  // predict.spans, split at ';'
  } predict;
  std::string output_dir;    // absolute
  std::string trials_field;  // data.units.trials_field: binomial data
  bool periods = false;      // data.time is set: a unit has a bag per period
  // data.sources, as far as the model depends on them (empty: data.units is the one source).
  struct Source {
    std::string name;
    std::optional<LikelihoodKind> likelihood;  // nullopt: model.likelihood, binomial with trials
    bool trials = false;                       // has a trials_field
    std::optional<Link> link;                  // nullopt: model.link, else the likelihood's first
    std::string task;                          // empty: the first source's task
  };
  std::vector<Source> sources;
};

// Reads every model.*, train.*, predict.* and output.* key of `config`; `keys`, when given,
// receives the keys read (for the test that none is left out).
Settings settings_of(const Config& config, std::vector<std::string>* keys = nullptr);

}  // namespace vbagg::cli
