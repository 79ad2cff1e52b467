// The unit random effect (MODEL.md 4g): its bag terms against closed forms and quadrature, its
// predictions, its bookkeeping of training units, and a fit that recovers its spread.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/fit.hpp"
#include "core/likelihood.hpp"
#include "core/objective.hpp"
#include "core/predict.hpp"
#include "test_util.hpp"

namespace vbagg {
namespace {

// E[g(c + sd z)], z ~ N(0, 1), by the trapezoid rule on [-12, 12]: independent of the
// likelihoods' Gauss-Hermite rule.
template <class G>
double normal_expectation(double c, double sd, G g) {
  const int n = 24000;
  const double h = 24.0 / n;
  double sum = 0;
  for (int k = 0; k <= n; ++k) {
    const double z = -12 + k * h;
    sum += (k == 0 || k == n ? 0.5 : 1.0) * std::exp(-0.5 * z * z) * g(c + sd * z);
  }
  return sum * h / std::sqrt(2 * M_PI);
}

// For one pixel log(rate) = log w + f + u is Normal(log w + m + nu, s^2 + omega^2): the Poisson
// term has a closed form under both expectations, and the delta method's negative binomial term
// is that Normal's expectation.
TEST(UnitEffect, OnePixelTermsAreExact) {
  const double m0 = 1.1, s2v = 0.3, wv = 2.5, y = 23, nu = 0.4, omega2 = 0.36;
  const Vector m = Vector::Constant(1, m0), s2 = Vector::Constant(1, s2v), w = Vector::Constant(1, wv);
  const Matrix C = Matrix::Constant(1, 1, s2v), T = Matrix::Constant(1, 1, std::sqrt(s2v));
  BagPosterior bag{m, s2, w, y, &T, nullptr};
  bag.unit_mean = nu;
  bag.unit_var = omega2;
  for (Expectation ex : {Expectation::bound, Expectation::delta}) {
    const ModelSpec spec = test::spec_of(LikelihoodKind::poisson, Link::exp, CovarianceMode::nystrom, ex);
    const double expected =
        y * (std::log(wv) + m0 + nu) - wv * std::exp(m0 + 0.5 * s2v + nu + 0.5 * omega2) - std::lgamma(y + 1);
    EXPECT_NEAR(bag_term(spec, Vector(), bag, nullptr), expected, 1e-10) << to_string(ex);
  }
  const double r = 6.0;
  const ModelSpec nb =
      test::spec_of(LikelihoodKind::negative_binomial, Link::exp, CovarianceMode::nystrom, Expectation::delta);
  const double expected = normal_expectation(std::log(wv) + m0 + nu, std::sqrt(s2v + omega2), [&](double log_mu) {
    return std::lgamma(y + r) - std::lgamma(r) - std::lgamma(y + 1) + r * std::log(r) + y * log_mu -
           (r + y) * std::log(r + std::exp(log_mu));
  });
  EXPECT_NEAR(bag_term(nb, Vector::Constant(1, std::log(r)), bag, nullptr), expected, 1e-8);
}

Model model_with_units(LikelihoodKind lik) {
  ModelSpec spec = test::spec_of(lik, Link::exp, CovarianceMode::nystrom, Expectation::delta);
  spec.unit_effect = true;
  Model model = test::random_model(spec, make_kernel("rbf", "none", 2, 0), 5, 2, 11);
  model.mean = 1.0;
  return model;
}

// A training unit's total carries E[e^u] of its q; any other unit the prior's e^{sigma^2 / 2};
// the predictive draws have that mean and widen with the effect.
TEST(UnitEffect, PredictionsIntegrateTheEffect) {
  const Dataset data = test::random_dataset(3, 20, 20, 2, LikelihoodKind::poisson, 12);
  const Model model = model_with_units(LikelihoodKind::poisson);
  Model plain = model;
  plain.spec.unit_effect = false;
  const std::vector<Index> bags = {0, 1, 2};
  const Vector base = predicted_bag_totals(plain, data, bags, 1);
  const Vector fitted = predicted_bag_totals(model, data, bags, 1);
  const Vector fresh = predicted_bag_totals(model, data, bags, 1, false);
  const UnitEffect& u = model.unit_effect;
  const double prior_var = std::exp(2 * u.log_sd);
  for (Index a = 0; a < 3; ++a) {
    EXPECT_NEAR(fitted[a], base[a] * std::exp(u.mean[a] + 0.5 * std::exp(2 * u.log_sd_q[a])), 1e-10 * base[a]);
    EXPECT_NEAR(fresh[a], base[a] * std::exp(0.5 * prior_var), 1e-10 * base[a]);
  }
  const Index n = data.bag_size(0);
  const Vector w = data.weights().head(n);
  const int S = 40000;
  const Vector plain_draws = bag_predictive_draws(plain, data.inputs.leftCols(n), w, S, 5);
  const Vector draws = bag_predictive_draws(model, data.inputs.leftCols(n), w, S, 5, {0.0, prior_var});
  const auto sd = [](const Vector& v) { return std::sqrt((v.array() - v.mean()).square().mean()); };
  EXPECT_NEAR(draws.mean(), fresh[0], 5 * sd(draws) / std::sqrt(double(S)));
  EXPECT_GT(sd(draws), 1.2 * sd(plain_draws));
}

// fit() gives every training unit a q, keeps those it has, and the ELBO refuses a unit without.
TEST(UnitEffect, TrainingUnitsAreAttachedByIdAndOthersRefused) {
  const Dataset data = test::random_dataset(4, 3, 6, 2, LikelihoodKind::poisson, 13);
  Model model = model_with_units(LikelihoodKind::poisson);
  const double kept = model.unit_effect.mean[2];
  attach_unit_effects(model, data, {2, 3});
  ASSERT_EQ(model.unit_effect.units, (std::vector<std::string>{"#2", "#3"}));
  EXPECT_EQ(model.unit_effect.mean[0], kept);
  EXPECT_EQ(model.num_params(), model.pack().size());
  EXPECT_NO_THROW(elbo(model, data, {2, 3}, 1.0, nullptr));
  EXPECT_THROW(elbo(model, data, {0, 2}, 1.0, nullptr), DataError);
  ModelSpec normal = test::spec_of(LikelihoodKind::normal, Link::identity, CovarianceMode::nystrom);
  normal.unit_effect = true;
  EXPECT_THROW(normal.validate(), ConfigError);
}

// Bags whose counts carry a lognormal factor of sd 0.7 around a smooth rate: the fit learns a
// spread near 0.7, its held-out unit intervals cover far more than without the effect, and the
// effect stays at its start during the first stage.
TEST(UnitEffect, FitRecoversTheSpreadAndWidensHeldOutIntervals) {
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
    for (Index i = a * per_bag; i < (a + 1) * per_bag; ++i) mu += pop[i] * std::exp(-1.0 + 0.5 * std::sin(X(0, i)));
    y[a] = std::poisson_distribution<long long>(mu * std::exp(0.7 * normal(rng) - 0.245))(rng);
  }
  const Dataset data = make_dataset(X, pop, bag_of, y);
  std::vector<Index> train, test;
  for (Index a = 0; a < bags; ++a) (a % 4 == 0 ? test : train).push_back(a);

  auto fit_with = [&](bool unit_effect) {
    ModelSpec spec = test::spec_of(LikelihoodKind::poisson, Link::exp, CovarianceMode::nystrom, Expectation::delta);
    spec.unit_effect = unit_effect;
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
    if (unit_effect) EXPECT_GE(frozen_evaluations, 10) << "the first stage holds the effect";
    return model;
  };
  const Model with = fit_with(true), without = fit_with(false);
  EXPECT_GT(with.unit_effect.log_sd, std::log(0.45));
  EXPECT_LT(with.unit_effect.log_sd, std::log(1.0));
  auto coverage90 = [&](const Model& model) {
    int inside = 0;
    for (Index a : test) {
      const Index b = data.bag_begin(a), n = data.bag_size(a);
      Vector d = bag_predictive_draws(model, data.inputs.middleCols(b, n), data.weights().segment(b, n), 2000,
                                      7 + static_cast<unsigned long long>(a), bag_unit_effects(model, data, {a})[0]);
      std::sort(d.data(), d.data() + d.size());
      inside += y[a] >= d[100] && y[a] <= d[1899];
    }
    return static_cast<double>(inside) / static_cast<double>(test.size());
  };
  const double cov_with = coverage90(with), cov_without = coverage90(without);
  EXPECT_GE(cov_with, 0.78);
  EXPECT_LT(cov_without, 0.6);
  EXPECT_LT(bag_predictive_nll(with, data, test, 2), bag_predictive_nll(without, data, test, 2));
}

}  // namespace
}  // namespace vbagg
