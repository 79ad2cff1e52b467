// The binomial's unit effect (MODEL.md 4g on the logit): its bag terms against nested quadrature
// and Monte Carlo, a unit's effect given its survey, predictions that integrate it, and a fit to
// overdispersed surveys that recovers its spread.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "core/fit.hpp"
#include "core/init.hpp"
#include "core/likelihood.hpp"
#include "core/objective.hpp"
#include "core/predict.hpp"
#include "test_util.hpp"

namespace vbagg {
namespace {

double log_logistic(double x) { return x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x)); }

// log Binomial(y | n, sigma(x)).
double binomial_logp(double y, double n, double x) {
  return std::lgamma(n + 1) - std::lgamma(y + 1) - std::lgamma(n - y + 1) + y * log_logistic(x) +
         (n - y) * log_logistic(-x);
}

// log int Binomial(y | n, sigma(x + u)) N(u; 0, sigma^2) du on a fixed trapezoid grid.
double mixture(double y, double n, double x, double sigma) {
  return test::log_integral(
      [&](double u) {
        return binomial_logp(y, n, x + u) - u * u / (2 * sigma * sigma) - std::log(sigma * std::sqrt(2 * M_PI));
      },
      -14 * sigma - 1, 14 * sigma + 1, 6000);
}

ModelSpec binomial_spec(Expectation e) {
  ModelSpec spec = test::spec_of(LikelihoodKind::binomial, Link::logit, CovarianceMode::nystrom, e);
  spec.unit_effect = true;
  spec.samples = 8;
  return spec;
}

// For one pixel the logit of the bag's prevalence is f ~ N(m, s^2) exactly, and the term is
// E_f[log int Binomial(y | n, sigma(f + u)) N(u; 0, sigma^2) du]: here by the trapezoid rule in both
// variables, independent of the term's Gauss-Hermite rules. From no positives to all, and a survey
// of 1,000 whose integrand in u is narrow.
TEST(BinomialUnitEffect, OnePixelTermMatchesNestedQuadrature) {
  const double m0 = -0.9, s2v = 0.5, sigma = 0.8;
  const Vector m = Vector::Constant(1, m0), s2 = Vector::Constant(1, s2v), w = Vector::Constant(1, 2.0);
  const Matrix T = Matrix::Constant(1, 1, std::sqrt(s2v));
  const Vector d = Vector::Zero(1);
  const DenseNystrom products(T);
  for (auto [y, n] : {std::pair{0.0, 30.0}, {7.0, 30.0}, {30.0, 30.0}, {260.0, 1000.0}}) {
    const double expected =
        test::normal_expectation(m0, std::sqrt(s2v), [&](double f) { return mixture(y, n, f, sigma); });
    BagPosterior bag(m, s2, w, y, n);
    bag.T = &T;
    bag.d = &d;
    bag.t = &products;
    bag.has_unit_effect = true;
    bag.unit_log_sd = std::log(sigma);
    EXPECT_NEAR(bag_term(binomial_spec(Expectation::delta), Vector(), bag, nullptr), expected,
                1e-6 * (1 + std::abs(expected)))
        << y << " of " << n;
  }
}

// The sampled term with the effect, averaged over many steps' fresh draws, against the
// deterministic term, which is exact for one-pixel bags.
TEST(BinomialUnitEffect, SampledTermIsUnbiased) {
  const Dataset data = test::random_dataset(3, 1, 1, 2, LikelihoodKind::binomial, 41);
  Model model = test::random_model(binomial_spec(Expectation::sample), make_kernel("rbf", "none", 2, 0), 4, 2, 42);
  model.mean = -0.7;
  model.unit_effect.log_sd = std::log(0.6);
  Model exact = model;
  exact.spec.expectation = Expectation::delta;
  for (Index a = 0; a < data.num_bags(); ++a) {
    const double reference = elbo(exact, data, std::vector<Index>{a}, 1.0, nullptr).data_term;
    const test::StepAverage s = test::sampled_term_over_steps(model, data, a, 1500, 9);
    EXPECT_NEAR(s.mean, reference, 4 * s.se + 1e-9) << "bag " << a;
  }
}

// A surveyed unit's effect given its positives, against the moments of u under
// Binomial(y | n, sigma(x + u)) N(u; 0, sigma^2) on a trapezoid grid.
TEST(BinomialUnitEffect, EffectGivenTheSurveyMatchesQuadrature) {
  const BagLikelihood& lik = likelihood_of(LikelihoodKind::binomial);
  const double sigma = 0.7, n = 200;
  for (double prevalence : {0.05, 0.3, 0.8})
    for (double y : {0.0, 40.0, 150.0}) {
      const double x = std::log(prevalence / (1 - prevalence));
      double z = 0, m1 = 0, m2 = 0;
      const double h = 1e-3;
      for (double u = -10; u <= 10; u += h) {
        const double p = std::exp(binomial_logp(y, n, x + u) - u * u / (2 * sigma * sigma));
        z += p;
        m1 += u * p;
        m2 += u * u * p;
      }
      const double mean = m1 / z, var = m2 / z - mean * mean;
      const UnitEffectMoments u = lik.unit_effect_given({y, n}, n * prevalence, Vector(), std::log(sigma));
      EXPECT_NEAR(u.mean, mean, 1e-6) << y << " at " << prevalence;
      EXPECT_NEAR(u.var, var, 1e-6 * (1 + var)) << y << " at " << prevalence;
    }
  const UnitEffectMoments prior = lik.unit_effect_prior(std::log(sigma));
  EXPECT_EQ(prior.mean, 0.0);
  EXPECT_DOUBLE_EQ(prior.var, sigma * sigma);
}

// A unit of 300 pixels under an effect of sd 0.6: its predictive density is as wide as its joint
// draws with the effect drawn in each, and far wider than without the effect.
TEST(BinomialUnitEffect, PredictiveDensityIntegratesTheEffect) {
  Dataset data = test::random_dataset(1, 300, 300, 2, LikelihoodKind::binomial, 12);
  const double n = 200;
  data.trials = Vector::Constant(1, n);
  Model model = test::random_model(binomial_spec(Expectation::delta), make_kernel("rbf", "none", 2, 0), 8, 2, 13);
  model.mean = -1.0;
  model.unit_effect.log_sd = std::log(0.6);
  Model without = model;
  without.spec.unit_effect = false;
  auto moments = [&](const Model& m) {
    double mean = 0, second = 0, total = 0;
    for (int y = 0; y <= n; ++y) {
      data.response[0] = y;
      const double p = std::exp(-bag_predictive_nll(m, data, {0}, 1));
      total += p;
      mean += y * p;
      second += y * y * p;
    }
    EXPECT_NEAR(total, 1.0, 1e-9);
    return std::pair{mean, second - mean * mean};
  };
  const auto [mean, var] = moments(model);
  const auto [mean_without, var_without] = moments(without);
  const int S = 20000;
  const UnitEffectMoments prior = likelihood_of(LikelihoodKind::binomial).unit_effect_prior(model.unit_effect.log_sd);
  const Vector draws = bag_predictive_draws(model, data.inputs, data.weights(), S, 14, prior, n);
  const double draws_mean = draws.mean(), draws_var = (draws.array() - draws_mean).square().sum() / (S - 1);
  EXPECT_NEAR(mean, draws_mean, 5 * std::sqrt(draws_var / S));
  EXPECT_NEAR(var, draws_var, 0.05 * draws_var);
  EXPECT_GT(var, 2 * var_without);
  // The expected positives with the effect (units.csv's expected count) are the draws' mean.
  EXPECT_NEAR(predicted_bag_totals(model, data, {0}, 1, false)[0], draws_mean, 5 * std::sqrt(draws_var / S));
}

// Survey clusters of 20 pixels each whose prevalence departs from a smooth surface by a logit
// effect of sd 0.8 (300 tested each): the fit learns a spread near 0.8, and its held-out clusters'
// 90 % intervals cover far more than without the effect.
TEST(BinomialUnitEffect, FitRecoversTheSpreadAndWidensHeldOutIntervals) {
  std::mt19937_64 rng(23);
  std::normal_distribution<double> normal;
  const Index bags = 160, size = 20, N = bags * size, D = 2;
  Matrix X(D, N);
  std::vector<Index> bag_of(static_cast<size_t>(N));
  Vector y(bags), trials = Vector::Constant(bags, 300);
  for (Index a = 0; a < bags; ++a) {
    const double cx = 2.5 * normal(rng), cy = 2.5 * normal(rng), u = 0.8 * normal(rng);
    double pi = 0;
    for (Index k = 0; k < size; ++k) {
      const Index i = a * size + k;
      X(0, i) = cx + 0.3 * normal(rng);
      X(1, i) = cy + 0.3 * normal(rng);
      bag_of[static_cast<size_t>(i)] = a;
      pi += 1 / (1 + std::exp(-(std::sin(X(0, i)) + 0.5 * std::cos(0.7 * X(1, i)) - 0.8 + u))) / size;
    }
    y[a] = static_cast<double>(std::binomial_distribution<long long>(300, pi)(rng));
  }
  Dataset data = make_dataset(X, Vector::Ones(N), bag_of, y);
  data.trials = trials;
  data.validate();
  std::vector<Index> train, test;
  for (Index a = 0; a < bags; ++a) (a % 4 == 0 ? test : train).push_back(a);

  auto fit_with = [&](bool unit_effect) {
    ModelSpec spec = binomial_spec(Expectation::delta);
    spec.unit_effect = unit_effect;
    InitOptions init;
    init.inducing = 15;
    Model model = init_model(spec, make_kernel("rbf", "none", D, 0), subset_bags(data, train), init);
    FitOptions fo;
    fo.optimizer = Optimizer::lbfgs;
    fo.epochs = 150;
    fo.threads = 2;
    fit(model, data, train, {}, fo);
    return model;
  };
  const Model with = fit_with(true), without = fit_with(false);
  EXPECT_GT(with.unit_effect.log_sd, std::log(0.55));
  EXPECT_LT(with.unit_effect.log_sd, std::log(1.1));
  const double cov_with = test::held_out_coverage90(with, data, test),
               cov_without = test::held_out_coverage90(without, data, test);
  EXPECT_GE(cov_with, 0.78);
  EXPECT_LT(cov_without, 0.6);
  EXPECT_LT(bag_predictive_nll(with, data, test, 2), bag_predictive_nll(without, data, test, 2));
}

}  // namespace
}  // namespace vbagg
