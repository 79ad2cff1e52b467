#include "fit.hpp"

#include <LBFGS.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <random>

#include "init.hpp"
#include "likelihood.hpp"
#include "natgrad.hpp"
#include "objective.hpp"
#include "param_layout.hpp"
#include "point_spread.hpp"
#include "polish.hpp"
#include "predict.hpp"

namespace vbagg {

Optimizer parse_optimizer(const std::string& s) {
  if (s == "adam") return Optimizer::adam;
  if (s == "lbfgs") return Optimizer::lbfgs;
  if (s == "natgrad") return Optimizer::natgrad;
  throw ConfigError("unknown optimizer '" + s + "' (allowed: adam, lbfgs, natgrad)");
}
std::string to_string(Optimizer o) {
  switch (o) {
    case Optimizer::adam:
      return "adam";
    case Optimizer::lbfgs:
      return "lbfgs";
    case Optimizer::natgrad:
      return "natgrad";
  }
  return "?";
}

bool polish_follows(Optimizer o) { return o == Optimizer::natgrad || o == Optimizer::lbfgs; }

Schedule parse_schedule(const std::string& s) {
  if (s == "constant") return Schedule::constant;
  if (s == "cosine") return Schedule::cosine;
  if (s == "anneal") return Schedule::anneal;
  throw ConfigError("unknown schedule '" + s + "' (allowed: constant, cosine, anneal)");
}
std::string to_string(Schedule s) {
  switch (s) {
    case Schedule::cosine:
      return "cosine";
    case Schedule::anneal:
      return "anneal";
    case Schedule::constant:
      break;
  }
  return "constant";
}

namespace {

using Clock = std::chrono::steady_clock;

// The bags of a list over the whole data that this process evaluates.
std::vector<Index> held_here(const std::vector<Index>& bags, const FitOptions& o) {
  return o.shard ? o.shard->local_bags(bags) : bags;
}

// What the bag lists' sources and ids are read from: the whole data's summary in a data-parallel
// run, else the data.
const Dataset& bag_table(const Dataset& data, const FitOptions& o) { return o.shard ? o.shard->summary : data; }

ObjectiveOptions objective_options(const FitOptions& o) {
  ObjectiveOptions obj;
  obj.threads = o.threads;
  obj.processes = o.shard ? o.shard->processes : nullptr;
  return obj;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

bool finite(const ObjectiveValue& v, const Vector& g) { return std::isfinite(v.elbo) && g.allFinite(); }

// Tracks held-out NLL for early stopping and remembers the best parameters.
struct HoldoutTracker {
  const Dataset& data;
  const std::vector<Index>& bags;
  const FitOptions& options;
  double best = INFINITY;
  int best_epoch = 0;
  Vector best_theta;
  double best_jitter = 0;
  int epoch_offset = 0;  // epochs of earlier stages of a staged fit

  double update(const Model& model, int stage_epoch) {
    if (bags.empty()) return NAN;
    const int epoch = stage_epoch + epoch_offset;
    const double nll = held_out_nll(model, data, bags, options);
    if (nll < best) {
      best = nll;
      best_epoch = epoch;
      best_theta = model.pack();
      best_jitter = model.jitter;
    }
    return nll;
  }
  bool exhausted(int stage_epoch) const {
    return options.patience > 0 && !bags.empty() && stage_epoch + epoch_offset - best_epoch >= options.patience;
  }
  void restore(Model& model) const {
    if (best_theta.size()) {
      model.unpack(best_theta);
      model.jitter = best_jitter;
    }
  }
};

// Convergence: the objective moved by less than tolerance (relative) over the last kWindow
// epochs. A window rather than one step: an L-BFGS line search or a noisy minibatch epoch can
// change the objective little while the fit is still far from done.
class ConvergenceTest {
 public:
  explicit ConvergenceTest(double tolerance) : tol_(tolerance) {}
  bool converged(double objective) {
    if (!(tol_ > 0) || !std::isfinite(objective)) return false;
    history_.push_back(objective);
    if (static_cast<int>(history_.size()) <= kWindow) return false;
    const double old = history_[history_.size() - 1 - kWindow];
    return std::abs(objective - old) <= tol_ * std::max(1.0, std::abs(old));
  }

 private:
  static constexpr int kWindow = 10;
  double tol_;
  std::vector<double> history_;
};

// The training bags as the groups a minibatch keeps whole (unit_groups): with a unit effect shared
// by a unit's periods, each unit's bags, since the unit's term couples them; otherwise every bag
// on its own.
std::vector<std::vector<Index>> minibatch_groups(const ModelSpec& spec, const Dataset& table,
                                                 const std::vector<Index>& train) {
  std::vector<std::vector<Index>> groups;
  for (const auto& g : unit_groups(spec, table, train)) {
    groups.emplace_back();
    for (size_t k : g) groups.back().push_back(train[k]);
  }
  return groups;
}

// A unit's term needs all its bags in one process: a data-parallel run whose processes split a
// unit's periods (io::build_dataset keeps them together) is refused on every process at once.
void check_units_whole(const ModelSpec& spec, const std::vector<Index>& train, const FitOptions& o) {
  if (!o.shard || !spec.unit_effect_shared) return;
  std::string split;
  for (const auto& g : minibatch_groups(spec, o.shard->summary, train)) {
    Index here = 0;
    for (Index a : g) here += o.shard->local[static_cast<size_t>(a)] >= 0 ? 1 : 0;
    if (here > 0 && here < static_cast<Index>(g.size()) && split.empty())
      split = unit_of_bag(o.shard->summary.bag_id(g[0]));
  }
  if (o.shard->processes->any(!split.empty()))
    throw DataError("the periods of unit " + (split.empty() ? std::string("(on another process)") : "'" + split + "'") +
                    " are held by more than one process, but its unit effect is shared by its periods (set "
                    "model.unit_effect_scope: period for one effect per unit and period)");
}

// UnitEffect::posterior of the fitted model: each training unit's shared effect given all its
// training periods. A unit's bags are held by one process (check_units_whole), which fills its
// entry; the sum over the processes copies it to all. A shared effect comes with periods, which
// take one source (the configuration refuses data.time with data.sources), so every unit is the
// first source's.
void record_unit_posteriors(Model& model, const Dataset& data, const std::vector<Index>& train, const FitOptions& o) {
  model.unit_effect.posterior.clear();
  if (!model.spec.unit_effect || !model.spec.unit_effect_shared) return;
  const Dataset& table = bag_table(data, o);
  std::map<std::string, Index> index;
  for (Index a : train) index.emplace(unit_of_bag(table.bag_id(a)), 0);
  Index next = 0;
  for (auto& [unit, k] : index) k = next++;
  const std::vector<Index> mine = held_here(train, o);
  const std::vector<UnitEffectMoments> effects = bag_unit_effects(model, data, mine, o.threads);
  // mean, var, held, shift, then the loading on the field's draws (UnitEffectMoments)
  const Index rank = model.loading_size();
  Matrix moments = Matrix::Zero(4 + rank, next);
  for (size_t k = 0; k < mine.size(); ++k) {
    const Index u = index[unit_of_bag(data.bag_id(mine[k]))];
    const UnitEffectMoments& e = effects[k];
    moments.col(u).head(4) << e.mean, e.var, 1.0, e.shift;
    if (e.loading.size() != rank && e.loading.size() != 0)
      throw std::logic_error("unit " + unit_of_bag(data.bag_id(mine[k])) + "'s effect has a loading of " +
                             std::to_string(e.loading.size()) + " entries where the field's draws have " +
                             std::to_string(rank));
    if (e.loading.size() == rank) moments.col(u).tail(rank) = e.loading;
  }
  if (o.shard) o.shard->processes->sum(moments);
  for (const auto& [unit, u] : index)
    if (moments(2, u) == 1.0) {
      UnitEffectMoments& e = model.unit_effect.posterior[unit];
      e = {moments(0, u), moments(1, u)};
      if (rank > 0) {
        e.shift = moments(3, u);
        e.loading = moments.col(u).tail(rank);
      }
    }
}

// Reorders an epoch's shuffled groups so every stretch of it holds each source in proportion: the
// k-th of a source's n_s groups goes to position (k + 1/2) / n_s of the epoch. Every minibatch then
// mixes the sources (a small source is not left to a few batches), and the epoch still visits
// every bag once, so the scaled minibatch ELBO stays unbiased.
void interleave_sources(std::vector<std::vector<Index>>& order, const Dataset& data) {
  std::vector<Index> count;
  for (const auto& g : order) {
    const auto s = static_cast<size_t>(data.source_of(g[0]));
    if (s >= count.size()) count.resize(s + 1, 0);
    ++count[s];
  }
  if (count.size() < 2) return;
  std::vector<std::pair<double, size_t>> keyed;
  std::vector<Index> seen(count.size(), 0);
  for (size_t k = 0; k < order.size(); ++k) {
    const auto s = static_cast<size_t>(data.source_of(order[k][0]));
    keyed.push_back({(static_cast<double>(seen[s]++) + 0.5) / static_cast<double>(count[s]), k});
  }
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::vector<Index>> sorted;
  for (const auto& [key, k] : keyed) sorted.push_back(std::move(order[k]));
  order = std::move(sorted);
}

// The factor on the step sizes epoch by epoch (FitOptions::schedule), and when the schedule ends
// the fit.
class StepSchedule {
 public:
  StepSchedule(Schedule s, int epochs, double tolerance) : kind_(s), epochs_(epochs), convergence_(tolerance) {}
  double factor(int epoch) const {
    if (kind_ == Schedule::cosine) return half_cosine(epoch - 1, epochs_);
    if (kind_ == Schedule::anneal && anneal_from_ > 0) return half_cosine(epoch - anneal_from_, anneal_length_);
    return 1.0;
  }
  // After epoch `epoch` with this objective: the reason the fit ends, or "" to go on.
  std::string after(int epoch, double objective) {
    if (kind_ != Schedule::anneal) return convergence_.converged(objective) ? "converged" : "";
    if (anneal_from_ > 0) return epoch >= anneal_from_ + anneal_length_ - 1 ? "annealed" : "";
    // Levelled off (or half the budget gone) at constant steps: anneal from the next epoch.
    if ((convergence_.converged(objective) || 2 * epoch >= epochs_) && epoch < epochs_) {
      anneal_from_ = epoch + 1;
      anneal_length_ = std::min(std::max(epoch, kShortestAnneal), epochs_ - epoch);
    }
    return "";
  }

 private:
  // Steps from 1 at step 0 along half a cosine towards 0 after `length` steps.
  static double half_cosine(int step, int length) {
    return 0.5 * (1 + std::cos(M_PI * static_cast<double>(step) / static_cast<double>(length)));
  }
  static constexpr int kShortestAnneal = 10;
  Schedule kind_;
  int epochs_;
  ConvergenceTest convergence_;  // anneal: where the constant steps have levelled off
  int anneal_from_ = 0, anneal_length_ = 0;
};

// natgrad from the prior: the kernel and mean stay at their start for the first epochs, while the
// natural-gradient steps bring q from the prior to the data. Their gradients there are up to
// 1000 times those of the rest of the fit, and Adam would carry that scale in its second moment.
constexpr int kNatgradHoldEpochs = 2;
// natgrad: Adam's second-moment decay for the kernel and mean. Their gradient scale keeps
// falling as q and the kernel settle, and the usual 0.999 (a memory of ~1000 steps) would keep
// the steps that much too small for tens of epochs; 0.9 follows the scale within ~10 steps.
// (Adam on q itself, with its 10^5 entries, keeps 0.999.)
constexpr double kNatgradBeta2 = 0.9;
// natgrad: Adam's first-moment decay for the kernel and mean. Their minibatch gradients are mostly
// noise once the fit is near; averaging them over ~100 steps (0.99, against the usual 0.9 over
// ~10) lets the steps follow the trend rather than the noise.
constexpr double kNatgradBeta1 = 0.99;

// A minibatch objective this many times worse than the first step's has diverged: natural-gradient
// steps on a few bags can overshoot where the exp link's curvature grows, sending q's mean far
// out and the objective to -10^100 while it stays finite. It is rolled back like a non-finite one.
constexpr double kDivergence = 1e6;

// Entries of the gradient that stay zero, so their parameters keep their values.
void freeze(Vector& g, const ParamSlice& frozen) { g.segment(frozen.offset, frozen.size).setZero(); }

// t0: the start of the whole fit, so that a second stage's epochs report the time since then.
FitResult fit_adam(Model& model, const Dataset& data, const std::vector<Index>& train, HoldoutTracker& holdout,
                   const FitOptions& o, const ParamSlice& frozen, Clock::time_point t0) {
  std::mt19937_64 rng(o.seed);
  // A minibatch is whole groups (minibatch_groups) of at least batch_bags bags; the ELBO estimate
  // scales by groups, so it stays unbiased when groups differ in size.
  std::vector<std::vector<Index>> order = minibatch_groups(model.spec, bag_table(data, o), train);
  const Index n = static_cast<Index>(order.size());
  const Index batch = std::max<Index>(1, std::min(o.batch_bags, static_cast<Index>(train.size())));
  ObjectiveOptions obj = objective_options(o);
  // natgrad: q(v) moves by natural-gradient steps and Adam only moves the parameters after q's,
  // which come first in Model::pack.
  const bool natural = o.optimizer == Optimizer::natgrad;
  obj.q_moments_gradient = natural;
  obj.draw_seed = o.seed;
  const Index q_params =
      natural ? param_slice(model, ParamBlockId::q_mean).size + param_slice(model, ParamBlockId::q_chol).size : 0;
  double step_size = o.natgrad_step;
  Vector theta = model.pack();
  Vector m1 = Vector::Zero(theta.size()), m2 = Vector::Zero(theta.size());
  const double b1 = natural ? kNatgradBeta1 : 0.9, b2 = natural ? kNatgradBeta2 : 0.999, eps = 1e-8;
  double lr = o.learning_rate;
  long step = 0, adam_steps = 0;
  double first_magnitude = INFINITY;  // |objective| at the first step, once known
  // Held only when q starts at the prior (not in a second stage or a resumed fit) and the fit is
  // long enough to spare the epochs.
  const bool from_prior = model.q_mean.isZero(0) && model.q_chol.isIdentity(0);
  const int hold = natural && from_prior && o.epochs >= 10 * kNatgradHoldEpochs ? kNatgradHoldEpochs : 0;
  FitResult res;
  StepSchedule schedule(o.schedule, o.epochs, o.tolerance);
  Vector last_good = theta;
  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    // Fisher-Yates with the project's own RNG draws, identical on every standard library.
    for (Index i = n - 1; i > 0; --i)
      std::swap(order[i], order[static_cast<Index>(rng() % static_cast<unsigned long long>(i + 1))]);
    interleave_sources(order, bag_table(data, o));
    const double decay = schedule.factor(epoch);
    double sum = 0;
    int batches = 0;
    for (Index start = 0; start < n;) {
      std::vector<Index> bags;
      Index groups = 0;
      for (; start < n && static_cast<Index>(bags.size()) < batch; ++start, ++groups)
        bags.insert(bags.end(), order[start].begin(), order[start].end());
      const std::vector<Index> mine = held_here(bags, o);
      Vector g;
      ObjectiveValue v;
      // A non-finite or diverged objective rolls back the step that led here and retries this
      // batch with halved steps; 20 halvings in a row mean the data cannot be fitted.
      for (int tries = 0;; ++tries) {
        bool ok = true;
        try {
          obj.draw_step = static_cast<unsigned long long>(step);  // fresh draws every step (and retry)
          v = elbo(model, data, mine, static_cast<double>(n) / static_cast<double>(groups), &g, obj);
          ok = finite(v, g) && !(v.elbo < -kDivergence * first_magnitude);
        } catch (const NumericalError&) {
          ok = false;
        }
        if (ok) {
          if (first_magnitude == INFINITY) first_magnitude = std::max(1.0, std::abs(v.elbo));
          break;
        }
        if (tries == 20)
          throw NumericalError("the objective stayed non-finite or diverged after 20 step reductions (learning rate " +
                               std::to_string(lr) + "); the data or settings cannot be fitted" +
                               (natural ? " (try a smaller train.natgrad_step or a larger train.batch_bags)" : ""));
        theta = last_good;
        model.unpack(theta);
        lr *= 0.5;
        step_size *= 0.5;
        ++res.recovered_steps;
      }
      model.jitter = std::max(model.jitter, v.jitter_used);
      freeze(g, frozen);
      last_good = theta;
      sum += v.elbo;
      ++batches;
      ++step;
      // Ascent on the ELBO.
      if (epoch > hold) {
        ++adam_steps;
        m1 = b1 * m1 + (1 - b1) * g;
        m2 = b2 * m2 + (1 - b2) * g.cwiseAbs2();
        const double c1 = 1 - std::pow(b1, static_cast<double>(adam_steps)),
                     c2 = 1 - std::pow(b2, static_cast<double>(adam_steps));
        const Index rest = theta.size() - q_params;
        theta.tail(rest).array() +=
            decay * lr * (m1.tail(rest).array() / c1) / ((m2.tail(rest).array() / c2).sqrt() + eps);
      }
      if (natural) {
        // A precision that is not positive definite, or would nearly lose the old one (possible
        // where the term is not log-concave in f: the square link, a unit effect), halves the
        // step until it is (natural_gradient_step).
        natural_gradient_step_halving(model, v.grad_q_mean, v.grad_q_cov, decay * step_size);
        theta.head(q_params) = model.pack().head(q_params);
      }
      model.unpack(theta);
      // Every parameter as the model holds it: one that Adam stepped past its floor
      // (kUnitLogSdFloor) goes on from the floor.
      theta = model.pack();
    }
    EpochInfo info;
    info.epoch = epoch;
    info.elbo = batches ? sum / batches : NAN;
    info.learning_rate = decay * lr;
    info.holdout_nll = holdout.update(model, epoch);
    info.seconds = seconds_since(t0);
    res.epochs = epoch;
    res.elbo = info.elbo;
    if (o.on_epoch && !o.on_epoch(info)) {
      res.stop_reason = "callback";
      return res;
    }
    if (holdout.exhausted(epoch)) {
      res.stop_reason = "early_stopping";
      return res;
    }
    const std::string done = schedule.after(epoch, info.elbo);
    if (!done.empty()) {
      res.stop_reason = done;
      return res;
    }
  }
  res.stop_reason = "max_epochs";
  return res;
}

struct StopFit {
  std::string reason;
};

constexpr int kHoldoutStride = 10;

// How often L-BFGS starts afresh from its best point after a direction that does not descend.
constexpr int kLbfgsRestarts = 5;

// Relative change over 10 epochs at which a staged fit's first stage is done.
constexpr double kFirstStageTolerance = 1e-3;

FitResult fit_lbfgs(Model& model, const Dataset& data, const std::vector<Index>& train, HoldoutTracker& holdout,
                    const FitOptions& o, const ParamSlice& frozen, Clock::time_point t0) {
  const ObjectiveOptions obj = objective_options(o);
  const std::vector<Index> mine = held_here(train, o);
  FitResult res;
  ConvergenceTest convergence(o.tolerance);
  int evals = 0;
  Vector best_x = model.pack();
  double best_f = INFINITY;
  // LBFGSpp minimises; the objective is -ELBO. Each evaluation is a full pass over the data.
  auto f = [&](const Vector& x, Vector& grad) -> double {
    model.unpack(x);
    ObjectiveValue v;
    try {
      v = elbo(model, data, mine, 1.0, &grad, obj);
    } catch (const NumericalError&) {
      grad.setZero(x.size());
      return INFINITY;  // the line search backs off
    }
    if (!finite(v, grad)) {
      grad.setZero(x.size());
      return INFINITY;
    }
    model.jitter = std::max(model.jitter, v.jitter_used);
    freeze(grad, frozen);
    grad = -grad;
    ++evals;
    if (-v.elbo < best_f) {
      best_f = -v.elbo;
      best_x = x;
    }
    EpochInfo info;
    info.epoch = evals;
    info.elbo = v.elbo;
    // An evaluation is far cheaper than an epoch of minibatches: the held-out bags are scored
    // every kHoldoutStride evaluations (a tenth of the work of a small fit otherwise).
    info.holdout_nll = evals % kHoldoutStride == 0 ? holdout.update(model, evals) : NAN;
    info.seconds = seconds_since(t0);
    res.epochs = evals;
    res.elbo = v.elbo;
    if (o.on_epoch && !o.on_epoch(info)) throw StopFit{"callback"};
    if (holdout.exhausted(evals)) throw StopFit{"early_stopping"};
    // The best value so far: a line search's trial points may be worse and say nothing.
    if (convergence.converged(-best_f)) throw StopFit{"converged"};
    if (evals >= o.epochs) throw StopFit{"max_epochs"};
    return -v.elbo;
  };
  LBFGSpp::LBFGSParam<double> param;
  param.m = o.lbfgs_memory;
  param.epsilon = 1e-6;
  param.epsilon_rel = 1e-6;
  param.max_iterations = 0;
  param.max_linesearch = 40;
  LBFGSpp::LBFGSSolver<double> solver(param);
  Vector x = model.pack();
  double fx;
  // LBFGSpp gives up when its curvature pairs yield a direction that does not descend (a
  // std::logic_error), which happened with the objective still rising by 20 nats a step
  // (docs/experiments.md, "A unit effect on the logit"): L-BFGS then starts afresh from the best
  // point with an empty memory, as long as each start has gained on the one before.
  double best_at_start = INFINITY;
  for (int start = 0;; ++start) {
    try {
      solver.minimize(f, x, fx);
      res.stop_reason = "converged";
    } catch (const StopFit& s) {
      res.stop_reason = s.reason;
    } catch (const std::runtime_error&) {
      // The line search found no further decrease: the best point seen is the answer.
      res.stop_reason = "line_search";
    } catch (const std::logic_error&) {
      res.stop_reason = "line_search";
      if (start < kLbfgsRestarts && best_f < best_at_start) {
        best_at_start = best_f;
        x = best_x;
        continue;
      }
    }
    break;
  }
  if (!std::isfinite(best_f))
    throw NumericalError(
        "the objective was non-finite at every point L-BFGS tried; the data or settings cannot be fitted");
  model.unpack(best_x);
  res.elbo = -best_f;
  return res;
}

// The polish after a natgrad or L-BFGS fit's epochs (FitOptions::polish): every accepted step is
// reported as one more epoch, with the held-out NLL, so early stopping, the history and the
// tolerance see it.
void polish_after(Model& model, const Dataset& data, const std::vector<Index>& train, HoldoutTracker& holdout,
                  const FitOptions& o, Clock::time_point t0, FitResult& res) {
  PolishOptions po;
  po.evaluations = o.polish;
  po.q_steps = o.polish_q_steps;
  po.gain_cap = o.polish_gain_cap;
  po.objective = objective_options(o);
  bool early = false, converged = false;
  ConvergenceTest convergence(o.tolerance);
  po.accepted = [&](double elbo) {
    ++res.epochs;
    res.elbo = elbo;
    EpochInfo info;
    info.epoch = res.epochs;
    info.elbo = elbo;
    info.holdout_nll = holdout.update(model, res.epochs - holdout.epoch_offset);
    info.seconds = seconds_since(t0);
    if (o.on_epoch && !o.on_epoch(info)) return false;
    early = holdout.exhausted(res.epochs - holdout.epoch_offset);
    converged = !early && convergence.converged(elbo);
    return !early && !converged;
  };
  const PolishResult p = polish(model, data, held_here(train, o), po);
  res.stop_reason = early ? "early_stopping" : converged ? "converged" : p.stop_reason;
}

}  // namespace

double held_out_nll(const Model& model, const Dataset& data, const std::vector<Index>& bags, const FitOptions& o) {
  if (!o.shard) return bag_predictive_nll(model, data, bags, o.threads);
  const std::vector<Index> mine = held_here(bags, o);
  const double sum =
      mine.empty() ? 0.0 : bag_predictive_nll(model, data, mine, o.threads) * static_cast<double>(mine.size());
  return o.shard->processes->sum(sum) / static_cast<double>(bags.size());
}

bool fits_in_stages(const ModelSpec& spec, const FitOptions& options) {
  bool later = spec.any_unit_effect();
  for (Index s = 0; s < spec.num_sources(); ++s)
    later |= likelihood_of(spec.source(s).likelihood).fit_parameters_later();
  return options.staged && later;
}

FitResult fit(Model& model, const Dataset& data, const std::vector<Index>& train, const std::vector<Index>& holdout,
              const FitOptions& options) {
  if (train.empty()) throw DataError("there are no training bags");
  if (options.epochs < 1) throw ConfigError("train.epochs must be at least 1");
  if (options.first_stage_epochs < 1) throw ConfigError("train.first_stage_epochs must be at least 1");
  if (!(options.learning_rate > 0)) throw ConfigError("train.learning_rate must be positive");
  if (options.polish < 0) throw ConfigError("train.polish must be at least 0");
  const auto t0 = Clock::now();
  HoldoutTracker tracker{data, holdout, options, INFINITY, 0, Vector(), 0.0};
  if (options.optimizer != Optimizer::adam && model.spec.any_sampled())
    throw ConfigError(
        "model.expectation sample needs train.optimizer adam: L-BFGS and the polish need a deterministic "
        "objective (draws fixed for a whole run let q fit them), and natural-gradient steps from "
        "sampled gradients of q's covariance diverge once q is concentrated");
  if (options.optimizer == Optimizer::lbfgs && options.polish > 0 && model.spec.map_estimate)
    throw ConfigError(
        "train.polish needs a variational posterior for its natural-gradient steps; a MAP estimate (model.kind "
        "nystrom) has none: set train.polish to 0");
  if (options.optimizer == Optimizer::natgrad) {
    if (model.spec.map_estimate)
      throw ConfigError(
          "train.optimizer natgrad needs a variational posterior; a MAP estimate (model.kind nystrom) has none: use "
          "adam");
    if (!(options.natgrad_step > 0 && options.natgrad_step <= 1))
      throw ConfigError("train.natgrad_step must be in (0, 1]");
  }
  if (options.shard && options.shard->summary.num_bags() != options.shard->num_bags())
    throw DataError("the shard's summary does not list every bag");
  const Dataset& table = bag_table(data, options);
  for (const std::vector<Index>* bags : {&train, &holdout})
    for (Index a : *bags)
      if (!table.observed(a))
        throw DataError("bag " + table.bag_name(a) +
                        " has no observation: it can be predicted, but not fitted or scored");
  model.spread = PointSpread();  // a spread belongs to the point it was taken at
  attach_unit_effects(model, table, train);
  check_units_whole(model.spec, train, options);
  auto run = [&](const FitOptions& o, const ParamSlice& frozen) {
    return o.optimizer == Optimizer::lbfgs ? fit_lbfgs(model, data, train, tracker, o, frozen, t0)
                                           : fit_adam(model, data, train, tracker, o, frozen, t0);
  };
  // The negative binomial's dispersion and the unit effect are first held at their start, then
  // everything is free. Fitted jointly from the prior, they would explain the data as noise
  // before the field could, and stay there.
  const ParamSlice later = staged_slice(model);
  FitResult res;
  if (later.size > 0 && fits_in_stages(model.spec, options)) {
    // The first stage only has to bring the field near its fit: held at its start, the noise
    // model is too tight, and fitting the field to the last digit would fit it to that noise.
    FitOptions stage = options;
    stage.epochs = std::min(options.epochs, options.first_stage_epochs);
    stage.tolerance = std::max(options.tolerance, kFirstStageTolerance);
    // Its end point is only a start: there is nothing to anneal to.
    if (stage.schedule == Schedule::anneal) stage.schedule = Schedule::constant;
    const FitResult first = run(stage, later);
    if (first.stop_reason == "callback" || first.stop_reason == "early_stopping") {
      res = first;
    } else {
      FitOptions second = options;
      if (options.on_epoch)
        second.on_epoch = [&](const EpochInfo& e) {
          EpochInfo shifted = e;
          shifted.epoch += first.epochs;
          return options.on_epoch(shifted);
        };
      tracker.epoch_offset = first.epochs;
      res = run(second, ParamSlice{});
      res.epochs += first.epochs;
      res.recovered_steps += first.recovered_steps;
    }
  } else {
    res = run(options, ParamSlice{});
  }
  if (polish_follows(options.optimizer) && options.polish > 0 && res.stop_reason != "callback" &&
      res.stop_reason != "early_stopping")
    polish_after(model, data, train, tracker, options, t0, res);
  if (!holdout.empty()) {
    res.best_holdout_nll = tracker.best;
    res.best_epoch = tracker.best_epoch;
    if (options.patience > 0) tracker.restore(model);
  }
  // Before the kept posteriors of shared unit effects: their expected totals are predictions.
  if (options.point_spread && spread_defined(model.spec) && res.stop_reason != "callback") {
    SpreadOptions so;
    so.objective = objective_options(options);
    try {
      model.spread = laplace_spread(model, data, held_here(train, options), so);
    } catch (const NumericalError& e) {
      res.spread_skipped = e.what();
    }
  }
  record_unit_posteriors(model, data, train, options);
  return res;
}

}  // namespace vbagg
