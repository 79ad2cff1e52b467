// Fitting the swiss roll: both Poisson links must beat the constant baseline at pixel level.
#include "core/fit.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/baselines.hpp"
#include "core/init.hpp"
#include "core/metrics.hpp"
#include "core/natgrad.hpp"
#include "core/objective.hpp"
#include "core/predict.hpp"
#include "core/swissroll.hpp"
#include "test_util.hpp"

namespace vbagg {
namespace {

SwissRoll small_roll() {
  SwissRollOptions o;
  o.bags = 100;
  o.size_mean = 50;
  o.size_sd = 20;
  o.seed = 7;
  return make_swiss_roll(o);
}

struct FitScore {
  double nll, mse, elbo_start, elbo_end;
};

FitScore fit_and_score(const SwissRoll& roll, Link link, Optimizer opt) {
  ModelSpec spec;
  spec.likelihood = LikelihoodKind::poisson;
  spec.link = link;
  InitOptions init;
  init.inducing = 30;
  init.seed = 3;
  Model model = init_model(spec, make_kernel("ard", "none", roll.data.num_inputs(), 0), roll.data, init);
  const double start = elbo(model, roll.data, nullptr).elbo;
  std::vector<Index> train(roll.data.num_bags());
  for (Index a = 0; a < roll.data.num_bags(); ++a) train[a] = a;
  FitOptions fo;
  fo.optimizer = opt;
  fo.epochs = opt == Optimizer::adam ? 400 : 300;
  fo.learning_rate = 0.01;
  fo.batch_bags = 15;
  fo.threads = 2;
  fit(model, roll.data, train, {}, fo);
  PredictOptions po;
  po.threads = 2;
  const Prediction p = predict(model, roll.data.inputs, po);
  return {pixel_poisson_nll(roll.pixel_counts, p.mean), mean_squared_error(p.mean, roll.rate), start,
          elbo(model, roll.data, nullptr).elbo};
}

class SwissRollFit : public ::testing::TestWithParam<std::tuple<Link, Optimizer>> {};

TEST_P(SwissRollFit, BeatsConstantBaseline) {
  const SwissRoll roll = small_roll();
  const Vector constant = constant_rate(roll.data);
  const double base_nll = pixel_poisson_nll(roll.pixel_counts, constant);
  const double base_mse = mean_squared_error(constant, roll.rate);
  const auto [link, opt] = GetParam();
  const FitScore s = fit_and_score(roll, link, opt);
  RecordProperty("constant_nll", std::to_string(base_nll));
  RecordProperty("vbagg_nll", std::to_string(s.nll));
  std::cout << "constant NLL " << base_nll << " MSE " << base_mse << " | vbagg NLL " << s.nll << " MSE " << s.mse
            << " | ELBO " << s.elbo_start << " -> " << s.elbo_end << "\n";
  EXPECT_GT(s.elbo_end, s.elbo_start);
  EXPECT_LT(s.nll, base_nll - 0.05);
  EXPECT_LT(s.mse, 0.6 * base_mse);
}

INSTANTIATE_TEST_SUITE_P(
    Links, SwissRollFit,
    ::testing::Values(std::make_tuple(Link::exp, Optimizer::adam), std::make_tuple(Link::square, Optimizer::adam),
                      std::make_tuple(Link::exp, Optimizer::lbfgs), std::make_tuple(Link::square, Optimizer::lbfgs)),
    [](const auto& info) { return to_string(std::get<0>(info.param)) + "_" + to_string(std::get<1>(info.param)); });

}  // namespace
}  // namespace vbagg

namespace vbagg {
namespace {

// The small swiss-roll comparison of the paper: VBAgg beats the constant and bag-pixel baselines
// at pixel level (bag-pixel ignores the within-bag spread of the inputs).
TEST(SwissRollBaselines, VbaggBeatsConstantAndBagPixel) {
  SwissRollOptions o;
  o.bags = 100;
  o.size_mean = 50;
  o.size_sd = 20;
  o.seed = 11;
  const SwissRoll roll = make_swiss_roll(o);
  std::vector<Index> train(roll.data.num_bags());
  for (Index a = 0; a < roll.data.num_bags(); ++a) train[a] = a;
  ModelSpec spec;
  spec.link = Link::square;
  InitOptions init;
  init.inducing = 30;
  FitOptions fo;
  fo.optimizer = Optimizer::lbfgs;
  fo.epochs = 300;
  fo.threads = 2;
  const Kernel kernel = make_kernel("ard", "none", roll.data.num_inputs(), 0);
  Model vb = init_model(spec, kernel, roll.data, init);
  fit(vb, roll.data, train, {}, fo);
  const Dataset collapsed = collapse_bags(roll.data);
  Model bp = init_model(spec, kernel, collapsed, init);
  fit(bp, collapsed, train, {}, fo);
  PredictOptions po;
  const double nll_vb = pixel_poisson_nll(roll.pixel_counts, predict(vb, roll.data.inputs, po).mean);
  const double nll_bp = pixel_poisson_nll(roll.pixel_counts, predict(bp, roll.data.inputs, po).mean);
  const double nll_const = pixel_poisson_nll(roll.pixel_counts, constant_rate(roll.data));
  std::cout << "pixel NLL: vbagg " << nll_vb << ", bag_pixel " << nll_bp << ", constant " << nll_const << "\n";
  EXPECT_LT(nll_vb, nll_const - 0.03);
  EXPECT_LT(nll_vb, nll_bp - 0.03);
}

}  // namespace
}  // namespace vbagg

namespace vbagg {
namespace {

// The negative binomial with the delta method, started as vbagg-train starts it (init_model).
Model negative_binomial_start(const SwissRoll& roll, Index inducing) {
  ModelSpec spec;
  spec.likelihood = LikelihoodKind::negative_binomial;
  spec.expectation = Expectation::delta;
  InitOptions init;
  init.inducing = inducing;
  init.seed = 3;
  return init_model(spec, make_kernel("ard", "none", roll.data.num_inputs(), 0), roll.data, init);
}

// The negative binomial fits in two stages: its dispersion held at the start (r = 100) while the
// field fits, then free. The dispersion moves only in the second stage, and the fit recovers the
// rate better than the constant baseline, as the Poisson fits do.
TEST(NegativeBinomialFit, StagedFitMovesTheDispersionLastAndBeatsConstant) {
  const SwissRoll roll = small_roll();
  Model model = negative_binomial_start(roll, 30);
  const double start = model.likelihood_params[0];
  EXPECT_NEAR(start, std::log(100.0), 1e-12);
  const std::vector<Index> train = test::all_bags(roll.data);
  FitOptions fo;
  fo.optimizer = Optimizer::lbfgs;
  fo.epochs = 80;
  fo.threads = 2;
  std::vector<double> dispersion;
  fo.on_epoch = [&](const EpochInfo&) {
    dispersion.push_back(model.likelihood_params[0]);
    return true;
  };
  const FitResult res = fit(model, roll.data, train, {}, fo);
  ASSERT_EQ(static_cast<int>(dispersion.size()), res.epochs);
  // The first stage (at most fo.epochs evaluations, plus the second stage's evaluation at its
  // starting point) keeps r; the second moves it.
  size_t first_change = 0;
  while (first_change < dispersion.size() && dispersion[first_change] == start) ++first_change;
  EXPECT_GE(first_change, 10u);
  EXPECT_LE(first_change, static_cast<size_t>(fo.epochs) + 2);
  EXPECT_LT(first_change, dispersion.size()) << "the dispersion never moved";
  EXPECT_NE(model.likelihood_params[0], start);
  PredictOptions po;
  po.threads = 2;
  const Prediction p = predict(model, roll.data.inputs, po);
  const Vector constant = constant_rate(roll.data);
  EXPECT_LT(mean_squared_error(p.mean, roll.rate), 0.8 * mean_squared_error(constant, roll.rate));
}

// A staged fit reports one sequence of epochs: numbered on from the first stage, and timed from the
// start of the whole fit (EpochInfo::seconds), not from the start of its stage, so the history's
// clock never runs back (it did, by the first stage's length, where the second began). Through the
// polish after L-BFGS too.
TEST(Stages, ReportOneClockAndOneCount) {
  const SwissRoll roll = small_roll();
  const Model start = negative_binomial_start(roll, 20);
  const std::vector<Index> train = test::all_bags(roll.data);
  for (Optimizer optimizer : {Optimizer::lbfgs, Optimizer::adam}) {
    SCOPED_TRACE(to_string(optimizer));
    Model model = start;
    FitOptions fo;
    fo.optimizer = optimizer;
    fo.first_stage_epochs = 8;
    fo.epochs = 8;
    fo.batch_bags = 20;
    fo.polish = optimizer == Optimizer::lbfgs ? 4 : 0;
    std::vector<EpochInfo> seen;
    fo.on_epoch = [&](const EpochInfo& e) {
      seen.push_back(e);
      return true;
    };
    const FitResult res = fit(model, roll.data, train, {}, fo);
    ASSERT_EQ(static_cast<int>(seen.size()), res.epochs);
    ASSERT_GT(res.epochs, fo.first_stage_epochs) << "no second stage";
    for (size_t k = 0; k < seen.size(); ++k) {
      EXPECT_EQ(seen[k].epoch, static_cast<int>(k) + 1);
      if (k > 0) {
        EXPECT_GE(seen[k].seconds, seen[k - 1].seconds) << "epoch " << k + 1;
      }
    }
  }
}

// LBFGSpp throws std::logic_error when its memory yields a direction that does not descend; the fit
// then starts L-BFGS afresh from its best point, but not without end. The exception is raised here
// from the epoch callback, inside the objective, as LBFGSpp's own would come.
TEST(Lbfgs, StartsAfreshAfterADirectionThatDoesNotDescend) {
  const SwissRoll roll = small_roll();
  ModelSpec spec;
  spec.likelihood = LikelihoodKind::poisson;
  InitOptions init;
  init.inducing = 10;
  const Model start = init_model(spec, make_kernel("ard", "none", roll.data.num_inputs(), 0), roll.data, init);
  const std::vector<Index> train = test::all_bags(roll.data);
  auto run = [&](int throw_from, int throw_until, std::vector<double>* seen) {
    Model model = start;
    FitOptions fo;
    fo.optimizer = Optimizer::lbfgs;
    fo.epochs = 40;
    fo.polish = 0;
    fo.on_epoch = [&](const EpochInfo& e) {
      seen->push_back(e.elbo);
      if (e.epoch >= throw_from && e.epoch <= throw_until)
        throw std::logic_error("the moving direction increases the objective function value");
      return true;
    };
    return fit(model, roll.data, train, {}, fo);
  };
  std::vector<double> once, always;
  // Once: the fit goes on to its budget, and its best objective keeps rising after the restart.
  const FitResult r = run(10, 10, &once);
  EXPECT_EQ(r.stop_reason, "max_epochs");
  EXPECT_EQ(r.epochs, 40);
  EXPECT_GT(*std::max_element(once.begin() + 11, once.end()), *std::max_element(once.begin(), once.begin() + 11));
  // At every evaluation from the 10th: a start that gains nothing ends the fit.
  const FitResult stuck = run(10, 1000, &always);
  EXPECT_EQ(stuck.stop_reason, "line_search");
  EXPECT_LE(stuck.epochs, 12);
}

TEST(Schedule, ParsesAndNamesItsChoices) {
  for (const Schedule s : {Schedule::constant, Schedule::cosine, Schedule::anneal})
    EXPECT_EQ(parse_schedule(to_string(s)), s);
  EXPECT_THROW(parse_schedule("linear"), ConfigError);
}

// The parameters' move over the last epoch, and the learning rate of every epoch, of an Adam fit.
struct ScheduledFit {
  double last_move;
  std::vector<double> rates;
};

ScheduledFit fit_with(Schedule schedule, int epochs, double tolerance = 0, std::string* stop = nullptr) {
  const SwissRoll roll = small_roll();
  ModelSpec spec;
  InitOptions init;
  init.inducing = 20;
  Model model = init_model(spec, make_kernel("ard", "none", roll.data.num_inputs(), 0), roll.data, init);
  std::vector<Index> train(roll.data.num_bags());
  for (Index a = 0; a < roll.data.num_bags(); ++a) train[a] = a;
  FitOptions fo;
  fo.epochs = epochs;
  fo.learning_rate = 0.02;
  fo.batch_bags = 10;
  fo.schedule = schedule;
  fo.tolerance = tolerance;
  ScheduledFit out{0, {}};
  Vector before = model.pack();
  fo.on_epoch = [&](const EpochInfo& e) {
    out.rates.push_back(e.learning_rate);
    const Vector now = model.pack();
    out.last_move = (now - before).norm();
    before = now;
    return true;
  };
  const FitResult r = fit(model, roll.data, train, {}, fo);
  if (stop) *stop = r.stop_reason;
  return out;
}

// cosine: the learning rate falls along half a cosine to near 0, and the fit ends nearly still,
// where a constant rate keeps moving in the minibatch noise.
TEST(Schedule, CosineEndsTheFitAtAPoint) {
  const int epochs = 30;
  const ScheduledFit cosine = fit_with(Schedule::cosine, epochs), constant = fit_with(Schedule::constant, epochs);
  ASSERT_EQ(cosine.rates.size(), static_cast<size_t>(epochs));
  for (int e = 1; e <= epochs; ++e) {
    EXPECT_NEAR(cosine.rates[static_cast<size_t>(e - 1)], 0.02 * 0.5 * (1 + std::cos(M_PI * (e - 1) / epochs)), 1e-15);
    EXPECT_EQ(constant.rates[static_cast<size_t>(e - 1)], 0.02);
  }
  EXPECT_LT(cosine.last_move, 0.1 * constant.last_move);
}

// anneal: constant steps until the objective levels off or half the budget has run, then half a
// cosine to 0 over as many epochs again, and the fit ends there, nearly still.
TEST(Schedule, AnnealKeepsItsStepsUntilAPlateauThenEndsAtZero) {
  std::string stop;
  const ScheduledFit half = fit_with(Schedule::anneal, 40, 0.0, &stop);
  ASSERT_EQ(half.rates.size(), 40u);
  EXPECT_EQ(stop, "annealed");
  for (int e = 1; e <= 40; ++e)
    EXPECT_NEAR(half.rates[static_cast<size_t>(e - 1)],
                e <= 20 ? 0.02 : 0.02 * 0.5 * (1 + std::cos(M_PI * (e - 21) / 20)), 1e-15)
        << e;
  // A loose tolerance finds a plateau early: from there the steps fall over as many epochs as ran.
  const ScheduledFit early = fit_with(Schedule::anneal, 400, 0.05, &stop);
  EXPECT_EQ(stop, "annealed");
  const size_t p = static_cast<size_t>(std::count(early.rates.begin(), early.rates.end(), 0.02)) - 1;
  ASSERT_GE(p, 11u) << "the convergence test needs its window of ten epochs";
  ASSERT_LT(2 * p, 400u);
  EXPECT_EQ(early.rates.size(), 2 * p);
  EXPECT_LT(early.rates.back(), 0.02 * 0.01);
  const ScheduledFit constant = fit_with(Schedule::constant, 40);
  EXPECT_LT(half.last_move, 0.1 * constant.last_move);
}

// At constant steps every entry of q's Cholesky factor jitters around its optimum, and each jitter
// adds its square to every pixel's variance; steps annealed to 0 settle. A binomial fit with the
// sampled expectation and variational fixed effects, as in docs/experiments.md: the annealed fit
// ends with the higher ELBO (estimated with many draws) and the narrower latent variance.
TEST(Schedule, AnnealedStepsEndWithoutTheJittersVariance) {
  const Dataset data = test::random_dataset(150, 5, 15, 2, LikelihoodKind::binomial, 31);
  ModelSpec spec = test::spec_of(LikelihoodKind::binomial, Link::logit, CovarianceMode::nystrom, Expectation::sample);
  spec.linear_inputs = 2;
  spec.fixed_effects = FixedEffects::variational;
  InitOptions init;
  init.inducing = 25;
  std::vector<Index> train(data.num_bags());
  for (Index a = 0; a < data.num_bags(); ++a) train[a] = a;
  struct End {
    double elbo, variance;
  };
  auto end_of = [&](Schedule schedule) {
    Model model = init_model(spec, make_kernel("rbf", "none", 2, 0), data, init);
    FitOptions fo;
    fo.epochs = 200;
    fo.batch_bags = 10;
    fo.schedule = schedule;
    fit(model, data, train, {}, fo);
    Vector m, var;
    predict_latent(model, data.inputs, m, var, 1);
    model.spec.samples = 512;
    return End{elbo(model, data, nullptr).elbo, var.mean()};
  };
  const End constant = end_of(Schedule::constant), annealed = end_of(Schedule::anneal);
  EXPECT_GT(annealed.elbo, constant.elbo + 1);
  EXPECT_LT(annealed.variance, 0.8 * constant.variance);
}

}  // namespace
}  // namespace vbagg
