// The polish after natural-gradient epochs (FitOptions::polish, core/polish.hpp).
#include "core/polish.hpp"

#include <gtest/gtest.h>

#include <random>

#include "core/fit.hpp"
#include "core/init.hpp"
#include "core/param_layout.hpp"
#include "core/swissroll.hpp"
#include "test_util.hpp"

namespace vbagg::polish_test {

const Index kD = 3;

struct Problem {
  Dataset data;
  Model model;
};

// Poisson counts on 40 bags of 10-30 pixels from a rate that every covariate shapes (a linear
// effect, a wave, a bump), so no kernel parameter has its optimum at infinity; a linear mean in
// the covariates and an ARD kernel, started as vbagg-train starts them (init_model).
Problem poisson_problem(unsigned seed, Link link = Link::exp) {
  Problem p{test::random_dataset(40, 10, 30, kD, LikelihoodKind::poisson, seed), Model()};
  std::mt19937_64 rng(seed);
  for (Index a = 0; a < p.data.num_bags(); ++a) {
    double rate = 0;
    for (Index i = p.data.bag_begin(a); i < p.data.bag_begin(a) + p.data.bag_size(a); ++i) {
      const auto x = p.data.inputs.col(i);
      rate += p.data.population[i] * p.data.coverage[i] *
              std::exp(1.0 + std::cos(x[0]) + std::sin(1.5 * x[1]) + std::exp(-x[2] * x[2]));
    }
    p.data.response[a] = static_cast<double>(std::poisson_distribution<long>(rate)(rng));
  }
  ModelSpec spec;
  spec.link = link;
  spec.linear_inputs = kD;
  InitOptions init;
  init.inducing = 12;
  p.model = init_model(spec, make_kernel("ard", "none", kD, 0), p.data, init);
  return p;
}

FitOptions natgrad_options(int epochs, int polish) {
  FitOptions o;
  o.optimizer = Optimizer::natgrad;
  o.epochs = epochs;
  o.batch_bags = 8;
  o.natgrad_step = 0.3;
  o.learning_rate = 0.05;
  o.schedule = Schedule::cosine;
  o.polish = polish;
  return o;
}

// The polish against the same number of passes over the data spent on more epochs: 10 epochs and
// 40 evaluations (three passes each) end higher than 130 epochs. Each accepted step is reported as
// one more epoch, better than the one before, and the model ends where the last was read.
TEST(Polish, BeatsAsManyPassesOfEpochs) {
  for (unsigned seed : {4u, 9u}) {
    Problem p = poisson_problem(seed);
    Model epochs_only = p.model;
    const std::vector<Index> all = test::all_bags(p.data);
    fit(epochs_only, p.data, all, {}, natgrad_options(130, 0));
    std::vector<EpochInfo> seen;
    FitOptions o = natgrad_options(10, 40);
    o.on_epoch = [&](const EpochInfo& e) {
      seen.push_back(e);
      return true;
    };
    const FitResult r = fit(p.model, p.data, all, {}, o);
    EXPECT_EQ(r.stop_reason, "polish_budget") << "seed " << seed;
    ASSERT_GT(r.epochs, 20) << "seed " << seed;
    ASSERT_EQ(static_cast<int>(seen.size()), r.epochs);
    for (size_t k = 11; k < seen.size(); ++k) {
      EXPECT_EQ(seen[k].epoch, static_cast<int>(k) + 1);
      EXPECT_GT(seen[k].elbo, seen[k - 1].elbo) << "seed " << seed << " step " << k - 10;
    }
    const double polished = elbo(p.model, p.data, nullptr).elbo, epochs = elbo(epochs_only, p.data, nullptr).elbo;
    EXPECT_NEAR(polished, r.elbo, 1e-10 * std::abs(r.elbo)) << "seed " << seed;
    EXPECT_GT(polished, epochs + 1.0) << "seed " << seed;
  }
}

// The budget counts evaluations: with 3, at most 3 steps follow the epochs and the fit says the
// budget ended it. A callback that declines ends it at once, and the model keeps the step it saw.
TEST(Polish, KeepsToItsBudgetAndToTheCallback) {
  Problem p = poisson_problem(5);
  const std::vector<Index> all = test::all_bags(p.data);
  Model budgeted = p.model;
  const FitResult r = fit(budgeted, p.data, all, {}, natgrad_options(6, 3));
  EXPECT_EQ(r.stop_reason, "polish_budget");
  EXPECT_GT(r.epochs, 6);
  EXPECT_LE(r.epochs, 9);
  FitOptions o = natgrad_options(6, 50);
  Vector at_first_step;
  o.on_epoch = [&](const EpochInfo& e) {
    if (e.epoch <= 6) return true;
    at_first_step = p.model.pack();
    return false;
  };
  const FitResult stopped = fit(p.model, p.data, all, {}, o);
  EXPECT_EQ(stopped.stop_reason, "callback");
  EXPECT_EQ(stopped.epochs, 7);
  EXPECT_EQ(p.model.pack(), at_first_step);
}

// The cap on what a step's first trial promises: held tight (a tenth of the largest recent gain),
// every quasi-Newton step after the first is accepted at its first trial, and the objective still
// rises at every step. Uncapped, some steps of the same polish need more than one trial, so the cap
// is what made them take one.
TEST(Polish, CapsWhatAFirstTrialPromises) {
  int backtracked = 0;
  for (unsigned seed : {4u, 9u}) {
    Problem p = poisson_problem(seed);
    const std::vector<Index> all = test::all_bags(p.data);
    fit(p.model, p.data, all, {}, natgrad_options(10, 0));
    for (double cap : {0.1, 0.0}) {
      Model m = p.model;
      PolishOptions po;
      po.evaluations = 30;
      po.gain_cap = cap;
      std::vector<double> seen;
      po.accepted = [&](double e) {
        seen.push_back(e);
        return true;
      };
      const PolishResult r = polish(m, p.data, all, po);
      ASSERT_GT(r.steps, 5) << "seed " << seed << " cap " << cap;
      ASSERT_EQ(static_cast<int>(r.trials.size()), r.steps);
      for (size_t k = 1; k < seen.size(); ++k) EXPECT_GT(seen[k], seen[k - 1]) << "seed " << seed << " cap " << cap;
      for (size_t k = 1; k < r.trials.size(); ++k) {
        if (cap > 0) {
          EXPECT_EQ(r.trials[k], 1) << "seed " << seed << " step " << k + 1;
        } else if (r.trials[k] > 1) {
          ++backtracked;
        }
      }
    }
  }
  EXPECT_GT(backtracked, 0);
}

// Only natural-gradient and L-BFGS epochs are polished: an Adam fit with a polish budget is the Adam fit.
TEST(Polish, DoesNotFollowAdam) {
  Problem p = poisson_problem(6);
  const std::vector<Index> all = test::all_bags(p.data);
  Model with = p.model, without = p.model;
  FitOptions o = natgrad_options(5, 10);
  o.optimizer = Optimizer::adam;
  const FitResult r = fit(with, p.data, all, {}, o);
  o.polish = 0;
  fit(without, p.data, all, {}, o);
  EXPECT_EQ(r.epochs, 5);
  EXPECT_EQ(with.pack(), without.pack());
  o.polish = -1;
  EXPECT_THROW(fit(with, p.data, all, {}, o), ConfigError);
}

// A natural-gradient step of size 1 is not an ascent everywhere for a term that is not log-concave
// in f (the square link): from q's prior it overshoots, and the polish, reading its first value
// after one such step (a second mostly recovers), returns to its start when it cannot beat it.
TEST(Polish, NeverEndsBelowItsStart) {
  int returned = 0;
  for (unsigned seed : {4u, 9u, 11u}) {
    Problem p = poisson_problem(seed, Link::square);
    const double start = elbo(p.model, p.data, nullptr).elbo;
    const Vector theta = p.model.pack();
    PolishOptions po;
    po.evaluations = 1;
    po.q_steps = 1;
    const PolishResult r = polish(p.model, p.data, test::all_bags(p.data), po);
    EXPECT_GE(r.elbo, start) << "seed " << seed;
    EXPECT_NEAR(elbo(p.model, p.data, nullptr).elbo, r.elbo, 1e-10 * std::abs(start)) << "seed " << seed;
    // Returned, it reports the start's objective, which its first pass read before q moved.
    if (p.model.pack() == theta) {
      EXPECT_EQ(r.elbo, start) << "seed " << seed;
      ++returned;
    }
  }
  EXPECT_GT(returned, 0);
}

// The polish after L-BFGS (FitOptions::polish with Optimizer::lbfgs) goes on from where L-BFGS's
// budget ended it: its steps are reported as epochs after L-BFGS's, each better than the one
// before, and the fit ends higher than L-BFGS alone.
TEST(Polish, FollowsLbfgs) {
  for (unsigned seed : {4u, 9u}) {
    Problem p = poisson_problem(seed);
    const std::vector<Index> all = test::all_bags(p.data);
    Model alone = p.model;
    FitOptions o;
    o.optimizer = Optimizer::lbfgs;
    o.epochs = 40;
    o.polish = 30;
    std::vector<double> seen;
    o.on_epoch = [&](const EpochInfo& e) {
      seen.push_back(e.elbo);
      return true;
    };
    const FitResult r = fit(p.model, p.data, all, {}, o);
    EXPECT_EQ(r.stop_reason, "polish_budget") << "seed " << seed;
    ASSERT_GT(r.epochs, 50) << "seed " << seed;
    ASSERT_EQ(static_cast<int>(seen.size()), r.epochs);
    for (size_t k = 41; k < seen.size(); ++k) EXPECT_GT(seen[k], seen[k - 1]) << "seed " << seed << " step " << k - 40;
    o.polish = 0;
    o.on_epoch = nullptr;
    fit(alone, p.data, all, {}, o);
    const double polished = elbo(p.model, p.data, nullptr).elbo, quasi = elbo(alone, p.data, nullptr).elbo;
    EXPECT_NEAR(polished, r.elbo, 1e-10 * std::abs(r.elbo)) << "seed " << seed;
    EXPECT_GT(polished, quasi + 1.0) << "seed " << seed;
  }
}

// train.tolerance ends a polish (after natural-gradient or L-BFGS epochs) at the first step whose
// objective moved by less than it, relative, over the 10 steps before, and reports "converged";
// without it the same fit runs on. (On this problem the objective creeps on along a ridge, the mean
// falling as the kernel's variance grows, so only the tolerance ends it.)
TEST(Polish, StopsAtTheTolerance) {
  const double tol = 1e-3;
  for (Optimizer opt : {Optimizer::natgrad, Optimizer::lbfgs}) {
    Problem p = poisson_problem(9);
    const std::vector<Index> all = test::all_bags(p.data);
    Model untolerant = p.model;
    FitOptions o = natgrad_options(10, 300);
    o.optimizer = opt;
    const FitResult full = fit(untolerant, p.data, all, {}, o);
    EXPECT_EQ(full.stop_reason, "polish_budget") << to_string(opt);
    std::vector<double> seen;
    o.tolerance = tol;
    o.on_epoch = [&](const EpochInfo& e) {
      seen.push_back(e.elbo);
      return true;
    };
    const FitResult r = fit(p.model, p.data, all, {}, o);
    EXPECT_EQ(r.stop_reason, "converged") << to_string(opt);
    EXPECT_LT(r.epochs, full.epochs) << to_string(opt);
    // The polish's steps follow the 10 epochs (the tolerance needs more than 10 readings to end them).
    ASSERT_GT(seen.size(), 10u);
    const std::vector<double> steps(seen.begin() + 10, seen.end());
    const size_t n = steps.size();
    ASSERT_GT(n, 11u) << to_string(opt);
    auto moved = [&](size_t k) { return std::abs(steps[k] - steps[k - 10]) / std::abs(steps[k - 10]); };
    EXPECT_LE(moved(n - 1), tol) << to_string(opt);
    for (size_t k = 10; k + 1 < n; ++k) EXPECT_GT(moved(k), tol) << to_string(opt) << " step " << k;
  }
}

// Small Poisson counts under the delta method, as on the swiss roll: near the optimum a
// natural-gradient step of 1 on q lowers the objective, so with every step at 1 each reading lies
// below where q started and the polish ends ("polished") with budget left. Shortened after such a
// fall, the steps go on, every accepted step still a rise, and end higher. (Where the fixed steps
// give up depends on the rounding of the fit before them: after 20 of the 60 evaluations in a
// Release build, 48 in the sanitizers' Debug build. A fit at this size is `slow`.)
TEST(Polish, ShortensQStepsThatLowerTheObjective) {
  SwissRollOptions so;
  so.bags = 60;
  so.size_mean = 60;
  so.size_sd = 20;
  so.seed = 3;
  const SwissRoll roll = make_swiss_roll(so);
  const std::vector<Index> all = test::all_bags(roll.data);
  ModelSpec spec;
  spec.expectation = Expectation::delta;
  InitOptions init;
  init.inducing = 40;
  init.seed = 3;
  Model start = init_model(spec, make_kernel("ard", "none", roll.data.num_inputs(), 0), roll.data, init);
  FitOptions o;
  o.optimizer = Optimizer::lbfgs;
  o.epochs = 100;
  fit(start, roll.data, all, {}, o);
  PolishOptions po;
  po.evaluations = 60;
  po.smallest_q_step = 1.0;
  Model at_one = start;
  const PolishResult fixed = polish(at_one, roll.data, all, po);
  po.smallest_q_step = 1.0 / 64;
  Model shortened = start;
  std::vector<double> seen;
  po.accepted = [&](double e) {
    seen.push_back(e);
    return true;
  };
  const PolishResult r = polish(shortened, roll.data, all, po);
  EXPECT_EQ(fixed.stop_reason, "polished");
  EXPECT_LT(fixed.evaluations, po.evaluations);
  EXPECT_EQ(fixed.smallest_q_step, 1.0);
  EXPECT_LT(r.smallest_q_step, 1.0);
  EXPECT_GT(r.elbo, fixed.elbo + 1.0);
  for (size_t k = 1; k < seen.size(); ++k) EXPECT_GT(seen[k], seen[k - 1]) << "step " << k;
  EXPECT_NEAR(elbo(shortened, roll.data, nullptr).elbo, r.elbo, 1e-10 * std::abs(r.elbo));
}

// A MAP estimate has no q for the polish's natural-gradient steps: asking for one is refused.
TEST(Polish, NeedsAVariationalPosterior) {
  Problem p = poisson_problem(4);
  FitOptions o;
  o.optimizer = Optimizer::lbfgs;
  o.epochs = 5;
  o.polish = 5;
  p.model.spec.map_estimate = true;
  EXPECT_THROW(fit(p.model, p.data, test::all_bags(p.data), {}, o), ConfigError);
}

}  // namespace vbagg::polish_test
