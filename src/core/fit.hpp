// The optimisers (MODEL.md section 6).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "dataset.hpp"
#include "model.hpp"
#include "shard.hpp"

namespace vbagg {

// adam: every parameter by Adam on minibatches. lbfgs: full batch. natgrad: natural-gradient
// steps for q(v) and Adam for the kernel, mean and noise, on the same minibatches.
enum class Optimizer { adam, lbfgs, natgrad };
Optimizer parse_optimizer(const std::string& s);
std::string to_string(Optimizer o);
// Whether FitOptions::polish follows this optimiser's epochs (natgrad and lbfgs; Adam's are not).
bool polish_follows(Optimizer o);

// How Adam's learning rate and the natural-gradient step change over the epochs of adam and
// natgrad fits. constant: they keep their values. cosine: both fall along half a cosine from
// their values at the first epoch towards 0 after the last, so the end point is not left
// wandering in the minibatch noise (L-BFGS has no step to schedule). anneal: constant until the
// objective levels off (FitOptions::tolerance) or half the epochs have run, then half a cosine to
// 0 over as many epochs again (at most the rest of the budget), and the fit ends. At constant
// steps every entry of q's Cholesky factor jitters around its optimum, and each jitter adds its
// square to every pixel's variance: the steps must end at 0 for the intervals to be q's
// (docs/experiments.md, "The sampled fit's too-wide intervals").
enum class Schedule { constant, cosine, anneal };
Schedule parse_schedule(const std::string& s);
std::string to_string(Schedule s);

struct EpochInfo {
  int epoch = 0;             // 1-based; for L-BFGS one full-batch evaluation
  double elbo = 0;           // mean over the epoch's minibatches of the scaled ELBO estimate
  double holdout_nll = NAN;  // mean predictive NLL of the held-out bags (NaN without them)
  double learning_rate = 0;
  double seconds = 0;  // since the start of the fit
};

struct FitOptions {
  Optimizer optimizer = Optimizer::adam;
  double learning_rate = 0.01;
  double natgrad_step = 0.1;  // natgrad: step size in (0, 1] of the natural-gradient steps
  Schedule schedule = Schedule::constant;
  int epochs = 300;
  Index batch_bags = 16;
  // Stop when the epoch objective (for L-BFGS the best so far) moved by less than this, relative,
  // over the last 10 epochs (0: off).
  double tolerance = 0;
  int patience = 0;  // early stopping: epochs without holdout improvement (0: off)
  int lbfgs_memory = 10;
  // Likelihood parameters that ask for it (BagLikelihood::fit_parameters_later: the negative
  // binomial's dispersion) and the unit effect held fixed in a first fit of at most
  // first_stage_epochs epochs, then freed in a second of at most `epochs`.
  bool staged = true;
  int first_stage_epochs = 50;
  // natgrad and lbfgs (not a MAP estimate): after the epochs, at most this many full-batch
  // evaluations of quasi-Newton steps on everything after q, with q following by natural-gradient
  // steps (polish.hpp); each is reported to on_epoch as one more epoch, and `tolerance` ends it
  // like the epochs. 0: none.
  int polish = 0;
  int polish_q_steps = 2;        // PolishOptions::q_steps
  double polish_gain_cap = 4.0;  // PolishOptions::gain_cap
  // After the fit, the spread of its point estimates (point_spread.hpp) into Model::spread, where
  // the model allows it (spread_defined); the fit starts without one either way.
  bool point_spread = false;
  unsigned long long seed = 1;
  int threads = 1;
  // A data-parallel run: `data` is this process's share of the bags, the bag lists given to fit()
  // index the whole data that the shard describes, and every process must call fit() alike. Each
  // evaluates its bags of a step, the gradients are summed over the processes, and all take the
  // same step (null: one process holds every bag).
  const Shard* shard = nullptr;
  // Called after every epoch; returning false stops the fit.
  std::function<bool(const EpochInfo&)> on_epoch;
};

struct FitResult {
  int epochs = 0;
  // "max_epochs", "converged", "early_stopping", "callback", "line_search", "annealed"; after a
  // polish "converged" (FitOptions::tolerance ended it), "polished" (no step improved the
  // objective) or "polish_budget" (FitOptions::polish ran out).
  std::string stop_reason;
  double elbo = 0;  // final epoch's ELBO estimate
  double best_holdout_nll = NAN;
  int best_epoch = 0;
  int recovered_steps = 0;  // steps rolled back after a non-finite objective
  // Why the point estimates' spread was asked for and not estimated (the objective was not finite
  // next to the fit); empty otherwise. The fit itself stands.
  std::string spread_skipped;
};

// Whether fit() runs two stages for this model: its likelihood asks for them
// (BagLikelihood::fit_parameters_later) or it has a unit effect, and options.staged is on.
bool fits_in_stages(const ModelSpec& spec, const FitOptions& options);

// Mean predictive NLL of the listed bags (bag_predictive_nll); with options.shard, each process
// scores the bags it holds and all receive the mean.
double held_out_nll(const Model& model, const Dataset& data, const std::vector<Index>& bags, const FitOptions& options);

// Fits model to the bags `train` of data; `holdout` bags (may be empty) drive early stopping,
// after which the parameters of the best holdout epoch are restored.
FitResult fit(Model& model, const Dataset& data, const std::vector<Index>& train, const std::vector<Index>& holdout,
              const FitOptions& options);

}  // namespace vbagg
