// The unit random effect (MODEL.md 4g): its bag terms against closed forms and quadrature, its
// predictions, its bookkeeping of training units, and a fit that recovers its spread.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "core/fit.hpp"
#include "core/init.hpp"
#include "core/likelihood.hpp"
#include "core/objective.hpp"
#include "core/param_layout.hpp"
#include "core/predict.hpp"
#include "test_util.hpp"

namespace vbagg {
namespace {

using test::log_integral;

double poisson_logp(double y, double log_mu) { return y * log_mu - std::exp(log_mu) - std::lgamma(y + 1); }
double nb_logp(double y, double log_mu, double r) {
  return std::lgamma(y + r) - std::lgamma(r) - std::lgamma(y + 1) + r * std::log(r) + y * log_mu -
         (r + y) * std::log(r + std::exp(log_mu));
}

// For one pixel, log mu = log w + f with f ~ N(m, s^2) exactly, and the term is
// E_f[log int p(y | e^{log mu + u}) N(u; -sigma^2/2, sigma^2) du]: here by the trapezoid rule in both
// variables on fixed grids, independent of the term's adaptive Gauss-Hermite rules.
TEST(UnitEffect, OnePixelTermMatchesNestedQuadrature) {
  const double m0 = 1.1, s2v = 0.3, wv = 2.5, sigma = 0.6, r = 6.0;
  const Vector m = Vector::Constant(1, m0), s2 = Vector::Constant(1, s2v), w = Vector::Constant(1, wv);
  const Matrix T = Matrix::Constant(1, 1, std::sqrt(s2v));
  for (double y : {0.0, 3.0, 23.0, 2500.0})
    for (LikelihoodKind lik : {LikelihoodKind::poisson, LikelihoodKind::negative_binomial}) {
      const auto logp = [&](double log_mu) {
        return lik == LikelihoodKind::poisson ? poisson_logp(y, log_mu) : nb_logp(y, log_mu, r);
      };
      const double expected = test::normal_expectation(std::log(wv) + m0, std::sqrt(s2v), [&](double t) {
        return log_integral(
            [&](double u) {
              const double c = u + 0.5 * sigma * sigma;  // u ~ N(-sigma^2/2, sigma^2)
              return logp(t + u) - c * c / (2 * sigma * sigma) - std::log(sigma * std::sqrt(2 * M_PI));
            },
            -12 * sigma - 5, 12 * sigma + std::log(y + 1) + 12, 8000);
      });
      BagPosterior bag(m, s2, w, y);
      bag.T = &T;
      const Vector d = Vector::Zero(1);  // all of the variance is in T
      const DenseNystrom products(T);
      bag.d = &d;
      bag.t = &products;
      bag.has_unit_effect = true;
      bag.unit_log_sd = std::log(sigma);
      const ModelSpec spec = test::spec_of(lik, Link::exp, CovarianceMode::nystrom, Expectation::delta);
      const Vector params = Vector::Constant(lik == LikelihoodKind::poisson ? 0 : 1, std::log(r));
      EXPECT_NEAR(bag_term(spec, params, bag, nullptr), expected, 1e-6 * (1 + std::abs(expected)))
          << to_string(lik) << " y = " << y;
    }
}

Model model_with_units(LikelihoodKind lik) {
  ModelSpec spec = test::spec_of(lik, Link::exp, CovarianceMode::nystrom, Expectation::delta);
  spec.unit_effect = true;
  Model model = test::random_model(spec, make_kernel("rbf", "none", 2, 0), 5, 2, 11);
  model.mean = 1.0;
  for (int a = 0; a < 8; ++a) model.unit_effect.units.push_back("#" + std::to_string(a));
  return model;
}

// The penalised-complexity prior sigma_u ~ Exponential(rate) enters the ELBO as the log density
// of log sigma_u, rate sigma e^{-rate sigma}: a proper density (it integrates to 1 over log sigma,
// checked by quadrature), subtracted in full, with a gradient that finite differences confirm.
TEST(UnitEffect, PriorOnTheSpreadIsTheDensityOfLogSigma) {
  const double rate = -std::log(0.01) / 0.1;
  double mass = 0;
  const double h = 1e-3;
  for (double t = -20; t < 5; t += h) mass += h * std::exp(std::log(rate) + t - rate * std::exp(t));
  EXPECT_NEAR(mass, 1.0, 1e-6);

  const Dataset data = test::random_dataset(6, 5, 12, 2, LikelihoodKind::negative_binomial, 14);
  std::vector<Index> bags(static_cast<size_t>(data.num_bags()));
  for (Index a = 0; a < data.num_bags(); ++a) bags[static_cast<size_t>(a)] = a;
  Model flat = model_with_units(LikelihoodKind::negative_binomial);
  flat.unit_effect.log_sd = std::log(0.3);
  Model with_prior = flat;
  with_prior.spec.unit_effect_prior_rate = rate;
  Vector g_flat, g_prior;
  const double elbo_flat = elbo(flat, data, bags, 1.0, &g_flat).elbo;
  const double elbo_prior = elbo(with_prior, data, bags, 1.0, &g_prior).elbo;
  EXPECT_NEAR(elbo_prior - elbo_flat, std::log(rate) + std::log(0.3) - rate * 0.3, 1e-9);

  const std::vector<std::string> names = with_prior.param_names();
  const Index k = std::find(names.begin(), names.end(), "unit_effect.log_sd") - names.begin();
  ASSERT_LT(k, static_cast<Index>(names.size()));
  Vector expected = g_flat;
  expected[k] += 1 - rate * 0.3;
  EXPECT_LT((g_prior - expected).norm(), 1e-9 * g_flat.norm());
  const Vector numeric = test::numeric_gradient(with_prior, data, bags, 1.0);
  std::string worst;
  EXPECT_LT(test::gradient_error(with_prior, g_prior, numeric, &worst), 1e-6) << worst;

  with_prior.spec.unit_effect_prior_rate = -1;
  EXPECT_THROW(with_prior.spec.validate(), ConfigError);
}

// A training unit's effect, with its loading on the field's draws, is the same whether the list
// holds other units or not (only the fitted units' totals are computed), and any other unit takes
// the prior.
TEST(UnitEffect, FittedUnitsEffectsDoNotDependOnTheOthersListed) {
  const Dataset data = test::random_dataset(5, 20, 40, 2, LikelihoodKind::poisson, 12);
  Model model = model_with_units(LikelihoodKind::poisson);
  model.unit_effect.units = {data.bag_id(1), data.bag_id(3)};
  const std::vector<UnitEffectMoments> all = bag_unit_effects(model, data, {0, 1, 2, 3, 4}, 1);
  const std::vector<UnitEffectMoments> fitted = bag_unit_effects(model, data, {1, 3}, 1);
  const UnitEffectMoments prior = likelihood_of(model.spec.likelihood).unit_effect_prior(model.unit_effect.log_sd);
  for (size_t k : {0, 2, 4}) {
    EXPECT_EQ(all[k].mean, prior.mean) << k;
    EXPECT_EQ(all[k].var, prior.var) << k;
    EXPECT_EQ(all[k].loading.size(), 0) << k;
  }
  for (size_t j = 0; j < 2; ++j) {
    const UnitEffectMoments &a = all[2 * j + 1], &f = fitted[j];
    EXPECT_NE(a.var, prior.var) << j;
    EXPECT_NEAR(a.mean, f.mean, 1e-12) << j;
    EXPECT_NEAR(a.var, f.var, 1e-12 * f.var) << j;
    EXPECT_NEAR(a.shift, f.shift, 1e-12) << j;
    ASSERT_EQ(a.loading.size(), model.num_q()) << j;
    ASSERT_EQ(f.loading.size(), model.num_q()) << j;
    EXPECT_LT((a.loading - f.loading).norm(), 1e-12 * f.loading.norm()) << j;
  }
}

// A training unit's total carries E[e^u] of its effect's conditional given its count (checked here
// against that conditional on a grid); any other unit the prior's E[e^u] = 1; the predictive
// draws have that mean and widen with the effect.
TEST(UnitEffect, PredictionsIntegrateTheEffect) {
  const Dataset data = test::random_dataset(3, 20, 20, 2, LikelihoodKind::poisson, 12);
  const Model model = model_with_units(LikelihoodKind::poisson);
  Model plain = model;
  plain.spec.unit_effect = false;
  const std::vector<Index> bags = {0, 1, 2};
  const Vector base = predicted_bag_totals(plain, data, bags, 1);
  const Vector fitted = predicted_bag_totals(model, data, bags, 1);
  const Vector fresh = predicted_bag_totals(model, data, bags, 1, false);
  const std::vector<UnitEffectMoments> post = bag_unit_effects(model, data, bags, 1);
  const double sigma = std::exp(model.unit_effect.log_sd);
  for (Index a = 0; a < 3; ++a) {
    EXPECT_NEAR(fresh[a], base[a], 1e-10 * base[a]);
    EXPECT_NEAR(fitted[a], base[a] * std::exp(post[a].mean + 0.5 * post[a].var), 1e-10 * base[a]);
    // The conditional p(u | y) on a grid: its mean and variance.
    const double y = data.response[a], t = std::log(base[a]);
    const auto logprior = [&](double u) {
      const double c = u + 0.5 * sigma * sigma;
      return -c * c / (2 * sigma * sigma) - std::log(sigma * std::sqrt(2 * M_PI));
    };
    const auto logpost = [&](double u) { return poisson_logp(y, t + u) + logprior(u); };
    const double z = log_integral(logpost, -10 * sigma, 10 * sigma, 20000);
    const double mean = std::exp(log_integral([&](double u) { return logpost(u) + std::log(u + 20) - z; }, -10 * sigma,
                                              10 * sigma, 20000)) -
                        20;
    const double second = std::exp(
        log_integral([&](double u) { return logpost(u) + 2 * std::log(u + 20) - z; }, -10 * sigma, 10 * sigma, 20000));
    const double var = second - (mean + 20) * (mean + 20);
    EXPECT_NEAR(post[a].mean, mean, 1e-4 * std::sqrt(var)) << a;
    EXPECT_NEAR(post[a].var, var, 1e-4 * var) << a;
    // The predictive density of the count: the mixture over the prior of u.
    const double log_mixture = log_integral(logpost, -10 * sigma, 10 * sigma, 20000);
    EXPECT_NEAR(bag_predictive_nll(model, data, {a}, 1), -log_mixture, 1e-8 * std::abs(log_mixture)) << a;
  }
  const Index n = data.bag_size(0);
  const Vector w = data.weights().head(n);
  const int S = 40000;
  const Vector plain_draws = bag_predictive_draws(plain, data.inputs.leftCols(n), w, S, 5);
  const Vector draws =
      bag_predictive_draws(model, data.inputs.leftCols(n), w, S, 5, {-0.5 * sigma * sigma, sigma * sigma});
  const auto sd = [](const Vector& v) { return std::sqrt((v.array() - v.mean()).square().mean()); };
  EXPECT_NEAR(draws.mean(), fresh[0], 5 * sd(draws) / std::sqrt(double(S)));
  EXPECT_GT(sd(draws), 1.2 * sd(plain_draws));
}

// fit() records its training units; the effect needs a count likelihood and second-order moments.
TEST(UnitEffect, TrainingUnitsAreRecordedAndOtherModelsRefused) {
  const Dataset data = test::random_dataset(4, 3, 6, 2, LikelihoodKind::poisson, 13);
  Model model = model_with_units(LikelihoodKind::poisson);
  attach_unit_effects(model, data, {2, 3});
  EXPECT_EQ(model.unit_effect.units, (std::vector<std::string>{"#2", "#3"}));
  EXPECT_EQ(model.param_names().back(), "unit_effect.log_sd");
  ModelSpec normal = test::spec_of(LikelihoodKind::normal, Link::identity, CovarianceMode::nystrom);
  normal.unit_effect = true;
  EXPECT_THROW(normal.validate(), ConfigError);
  ModelSpec bound = test::spec_of(LikelihoodKind::poisson, Link::exp, CovarianceMode::nystrom, Expectation::bound);
  bound.unit_effect = true;
  EXPECT_THROW(bound.validate(), ConfigError);
}

// 160 bags of 12 pixels around random centres, 100 people each, whose Poisson counts carry a
// lognormal factor of sd `spread` (mean 1) around the rate e^{-1 + wave sin(x)}.
Dataset overdispersed_counts(double spread, double wave) {
  const Index bags = 160, per_bag = 12, D = 2;
  std::mt19937_64 rng(21);
  std::normal_distribution<double> normal;
  std::vector<Index> bag_of;
  Matrix X(D, bags * per_bag);
  for (Index a = 0; a < bags; ++a) {
    const double cx = 3 * normal(rng), cy = 3 * normal(rng);
    for (Index i = 0; i < per_bag; ++i) {
      bag_of.push_back(a);
      X(0, a * per_bag + i) = cx + 0.3 * normal(rng);
      X(1, a * per_bag + i) = cy + 0.3 * normal(rng);
    }
  }
  const Vector pop = Vector::Constant(bags * per_bag, 100.0);
  Vector y(bags);
  for (Index a = 0; a < bags; ++a) {
    double mu = 0;
    for (Index i = a * per_bag; i < (a + 1) * per_bag; ++i) mu += pop[i] * std::exp(-1.0 + wave * std::sin(X(0, i)));
    y[a] = std::poisson_distribution<long long>(mu * std::exp(spread * normal(rng) - 0.5 * spread * spread))(rng);
  }
  return make_dataset(X, pop, bag_of, y);
}

// Below its floor log sigma_u reads as the floor, the ELBO stays finite there, and a gradient
// pressing further down is dropped, while one pointing up (here the prior's) is kept. Just above
// the floor the terms are still exact: the gradient matches finite differences.
TEST(UnitEffect, SpreadIsHeldAtItsFloor) {
  const Dataset data = test::random_dataset(8, 20, 30, 2, LikelihoodKind::poisson, 5);
  const std::vector<Index> bags = {0, 1, 2, 3, 4, 5, 6, 7};
  Model model = model_with_units(LikelihoodKind::poisson);
  const Index k = param_slice(model, ParamBlockId::unit_effect).offset;
  Vector theta = model.pack();
  theta[k] = -400;
  model.unpack(theta);
  EXPECT_EQ(model.unit_effect.log_sd, kUnitLogSdFloor);
  EXPECT_EQ(model.pack()[k], kUnitLogSdFloor);
  Vector g;
  const ObjectiveValue at_floor = elbo(model, data, bags, 1.0, &g);
  ASSERT_TRUE(std::isfinite(at_floor.elbo));
  ASSERT_TRUE(g.allFinite());
  EXPECT_GE(g[k], 0.0);
  Model prior = model;
  prior.spec.unit_effect_prior_rate = 10;
  elbo(prior, data, bags, 1.0, &g);
  EXPECT_GT(g[k], 0.5) << "the prior's push away from sigma_u = 0 survives";

  model.unit_effect.log_sd = kUnitLogSdFloor + 0.5;
  elbo(model, data, bags, 1.0, &g);
  const Vector numeric = test::numeric_gradient(model, data, bags, 1.0);
  std::string worst;
  EXPECT_LT(test::gradient_error(model, g, numeric, &worst), 1e-6) << worst;
  EXPECT_NEAR(g[k], numeric[k], 1e-6 * std::max(1.0, std::abs(numeric[k]))) << worst;
}

// Counts that all equal their expected count 1200 e^-1, with less spread than Poisson's: every bag
// tells the ELBO that a smaller sigma_u is better. natgrad's Adam steps on the other parameters
// forget old gradients within ~10 steps, so they do not shrink as that gradient fades, and they
// walked log sigma_u down until sigma_u^2 underflowed (the fit failed within its first epoch). The
// floor stops them, and the fit stays finite to the end.
TEST(UnitEffect, NatgradStopsAtTheFloorWhereNoSpreadIsBest) {
  Dataset data = overdispersed_counts(0.0, 0.0);
  data.response.setConstant(std::round(1200 * std::exp(-1.0)));
  std::vector<Index> train(data.num_bags());
  for (Index a = 0; a < data.num_bags(); ++a) train[a] = a;
  ModelSpec spec = test::spec_of(LikelihoodKind::poisson, Link::exp, CovarianceMode::nystrom, Expectation::delta);
  spec.unit_effect = true;
  InitOptions init;
  init.inducing = 15;
  Model model = init_model(spec, make_kernel("rbf", "none", 2, 0), data, init);
  model.unit_effect.log_sd = kUnitLogSdFloor + 1;
  FitOptions fo;
  fo.optimizer = Optimizer::natgrad;
  fo.learning_rate = 0.05;
  fo.batch_bags = 10;
  fo.epochs = 40;
  fo.tolerance = 0;
  fo.staged = false;
  double lowest = INFINITY;
  fo.on_epoch = [&](const EpochInfo& e) {
    EXPECT_TRUE(std::isfinite(e.elbo)) << "epoch " << e.epoch;
    lowest = std::min(lowest, model.unit_effect.log_sd);
    return true;
  };
  const FitResult r = fit(model, data, train, {}, fo);
  EXPECT_EQ(r.epochs, 40);
  EXPECT_EQ(lowest, kUnitLogSdFloor) << "the fit reached the floor";
  EXPECT_EQ(model.unit_effect.log_sd, kUnitLogSdFloor) << "and stayed there";
}

// Bags whose counts carry a lognormal factor of sd 0.7 around a smooth rate: the fit learns a
// spread near 0.7, its held-out unit intervals cover far more than without the effect, and the
// effect stays at its start during the first stage.
TEST(UnitEffect, FitRecoversTheSpreadAndWidensHeldOutIntervals) {
  const Index bags = 160, D = 2;
  const Dataset data = overdispersed_counts(0.7, 0.5);
  std::vector<Index> train, test;
  for (Index a = 0; a < bags; ++a) (a % 4 == 0 ? test : train).push_back(a);

  auto fit_with = [&](bool unit_effect, double prior_rate = 0) {
    ModelSpec spec = test::spec_of(LikelihoodKind::poisson, Link::exp, CovarianceMode::nystrom, Expectation::delta);
    spec.unit_effect = unit_effect;
    spec.unit_effect_prior_rate = prior_rate;
    InitOptions init;
    init.inducing = 15;
    Model model = init_model(spec, make_kernel("rbf", "none", D, 0), subset_bags(data, train), init);
    FitOptions fo;
    fo.optimizer = Optimizer::lbfgs;
    fo.epochs = 150;
    fo.threads = 2;
    const double start = model.unit_effect.log_sd;
    int frozen_evaluations = 0;
    fo.on_epoch = [&](const EpochInfo&) {
      frozen_evaluations += model.unit_effect.log_sd == start;
      return true;
    };
    fit(model, data, train, {}, fo);
    if (unit_effect) {
      EXPECT_GE(frozen_evaluations, 10) << "the first stage holds the effect";
    }
    return model;
  };
  const Model with = fit_with(true), without = fit_with(false);
  EXPECT_GT(with.unit_effect.log_sd, std::log(0.45));
  EXPECT_LT(with.unit_effect.log_sd, std::log(1.0));
  // R disaggregation's prior, P(sigma > 0.1) = 0.01, pulls sigma down, but 120 units outweigh it.
  const Model shrunk = fit_with(true, -std::log(0.01) / 0.1);
  EXPECT_LT(shrunk.unit_effect.log_sd, with.unit_effect.log_sd - 0.05);
  EXPECT_GT(shrunk.unit_effect.log_sd, std::log(0.4));
  const double cov_with = test::held_out_coverage90(with, data, test),
               cov_without = test::held_out_coverage90(without, data, test);
  EXPECT_GE(cov_with, 0.78);
  EXPECT_LT(cov_without, 0.6);
  EXPECT_LT(bag_predictive_nll(with, data, test, 2), bag_predictive_nll(without, data, test, 2));
}

}  // namespace
}  // namespace vbagg
