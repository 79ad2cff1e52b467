// A unit effect shared by a unit's periods (MODEL.md 4g, ModelSpec::unit_effect_shared): the
// unit's term against the one-bag term, nested quadrature and finite differences; the ELBO's
// gradient; and predictions that condition a unit's effect on all its fitted periods.
#include <gtest/gtest.h>

#include <Eigen/Cholesky>
#include <cmath>
#include <random>

#include "core/bag_pass.hpp"
#include "core/likelihoods/count.hpp"
#include "core/objective.hpp"
#include "core/point_spread.hpp"
#include "core/predict.hpp"
#include "test_util.hpp"

namespace vbagg {
namespace {

const CountLikelihood& count_likelihood(LikelihoodKind k) {
  return dynamic_cast<const CountLikelihood&>(likelihood_of(k));
}

Vector params_of(LikelihoodKind k) { return Vector::Constant(k == LikelihoodKind::poisson ? 0 : 1, std::log(6.0)); }

CountMoments moments(double mean, double rho) {
  CountMoments m;
  m.mean = mean;
  m.rho = rho;
  return m;
}

// log int prod_j p(y_j | e^{t_j + u}) N(u; -sigma^2/2, sigma^2) du by the trapezoid rule.
double log_mixture(const CountLikelihood& lik, const std::vector<double>& y, const std::vector<double>& t,
                   const Vector& params, double sigma) {
  const int n = 3000;
  const double lo = -10 * sigma - 0.5 * sigma * sigma, hi = 10 * sigma - 0.5 * sigma * sigma, h = (hi - lo) / n;
  std::vector<double> v(n + 1);
  double top = -INFINITY;
  for (int k = 0; k <= n; ++k) {
    const double u = lo + k * h, c = u + 0.5 * sigma * sigma;
    double s = -c * c / (2 * sigma * sigma) - std::log(sigma * std::sqrt(2 * M_PI)), d1 = 0, d2 = 0;
    for (size_t j = 0; j < y.size(); ++j)
      s += lik.log_pmf_constant(y[j], params, nullptr) + lik.log_pmf_kernel(y[j], t[j] + u, params, &d1, &d2, nullptr);
    top = std::max(top, v[k] = s);
  }
  double sum = 0;
  for (int k = 0; k <= n; ++k) sum += (k == 0 || k == n ? 0.5 : 1.0) * std::exp(v[k] - top);
  return top + std::log(sum * h);
}

// Three periods of one unit, two with spread log rates: the term against the expectation of the
// exact mixture over independent Normal log rates by nested trapezoid rules. The dimension-wise
// rule misses only the rates' cross terms, so its error is small and falls with rho^2.
TEST(SharedUnitEffect, TermMatchesNestedQuadratureOfTheUnit) {
  for (LikelihoodKind k : {LikelihoodKind::poisson, LikelihoodKind::negative_binomial}) {
    const CountLikelihood& lik = count_likelihood(k);
    const Vector params = params_of(k);
    const std::vector<double> y = {12, 30, 4}, mean = {15, 22, 6};
    const double sigma = 0.5;
    double errors[2];
    for (int level = 0; level < 2; ++level) {
      const double rho = level == 0 ? 0.08 : 0.04;
      const std::vector<double> rhos = {rho, 1.5 * rho, 0.0};
      std::vector<CountMoments> mo;
      for (size_t j = 0; j < 3; ++j) mo.push_back(moments(mean[j], rhos[j]));
      const double term = shared_unit_effect_score(lik, y, mo, params, std::log(sigma), nullptr, nullptr, nullptr);
      // Each log mu_j ~ N(log mean_j - rho_j/2, rho_j); the rule's effect mean -sigma^2/2 is in the
      // mixture.
      auto centre = [&](size_t j) { return std::log(mean[j]) - 0.5 * rhos[j]; };
      const double expected = test::normal_expectation(
          centre(0), std::sqrt(rhos[0]),
          [&](double t0) {
            return test::normal_expectation(
                centre(1), std::sqrt(rhos[1]),
                [&](double t1) {
                  return log_mixture(lik, y, {t0, t1, centre(2)}, params, sigma);
                },
                40, 9.0);
          },
          40, 9.0);
      errors[level] = std::abs(term - expected);
      EXPECT_LT(errors[level], 1e-3 * std::abs(expected)) << to_string(k) << " rho " << rho;
    }
    // Halving the spread cuts the error about four times (second order); 2.5 allows for the
    // quadratures' own error.
    EXPECT_LT(errors[1], errors[0] / 2.5) << to_string(k);
  }
}

// Two months whose log rates are correlated 0.95 through the field (h_1 . h_2), as a unit's months
// are: the term against nested trapezoid rules over the pair's joint Normal, and far from the
// value independent months would give.
TEST(SharedUnitEffect, CorrelatedMonthsMatchNestedQuadrature) {
  const CountLikelihood& lik = count_likelihood(LikelihoodKind::poisson);
  const Vector params = params_of(LikelihoodKind::poisson);
  const std::vector<double> y = {900, 1400}, mean = {1000, 1200};
  const double sigma = 0.4;
  Vector h1(2), h2(2);
  h1 << 0.28, 0.05;
  h2 << 0.30, -0.02;
  std::vector<CountMoments> mo = {moments(mean[0], h1.squaredNorm() + 0.002),
                                  moments(mean[1], h2.squaredNorm() + 0.003)};
  mo[0].h = h1;
  mo[1].h = h2;
  const double term = shared_unit_effect_score(lik, y, mo, params, std::log(sigma), nullptr, nullptr, nullptr);
  Matrix S(2, 2);
  S << mo[0].rho, h1.dot(h2), h1.dot(h2), mo[1].rho;
  const Matrix L = S.llt().matrixL();
  const double a0 = std::log(mean[0]) - 0.5 * mo[0].rho, a1 = std::log(mean[1]) - 0.5 * mo[1].rho;
  const double expected = test::normal_expectation(
      0.0, 1.0,
      [&](double z0) {
        return test::normal_expectation(
            0.0, 1.0,
            [&](double z1) {
              return log_mixture(lik, y, {a0 + L(0, 0) * z0, a1 + L(1, 0) * z0 + L(1, 1) * z1}, params, sigma);
            },
            40, 9.0);
      },
      60, 9.0);
  EXPECT_NEAR(term, expected, 1e-4 * std::abs(expected));
  std::vector<CountMoments> independent = mo;
  independent[0].h.resize(0);
  independent[1].h.resize(0);
  EXPECT_GT(term - shared_unit_effect_score(lik, y, independent, params, std::log(sigma), nullptr, nullptr, nullptr),
            10.0);
}

// A unit's term approximates E_q[log int prod_j p(y_j | e^{t_j + u}) N(u) du], which no choice of
// the rates can lift above sum_j log p(y_j | mu = y_j): the mixture is concave in t (each count's
// log pmf is, and integrating u out keeps it so), so the rule's sum of directions, G(a) +
// sum_c (E_c G - G(a)), stays under G(a). Checked with 2 to 12 periods, correlated rates from tight
// to wide, expected counts below, at and above the observed ones, and any spread of the effect.
TEST(SharedUnitEffect, NoUnitTermExceedsItsCountsLargestLikelihood) {
  std::mt19937_64 rng(17);
  std::normal_distribution<double> normal;
  std::uniform_int_distribution<int> pick(0, 3);
  const double counts[] = {0, 1, 30, 5000};
  for (LikelihoodKind k : {LikelihoodKind::poisson, LikelihoodKind::negative_binomial})
    for (int periods : {2, 3, 12})
      for (double scale : {1e-4, 0.01, 1.0, 10.0})
        for (double shift : {-5.0, 0.0, 5.0})
          for (double log_sd : {-4.0, -0.5, 1.0}) {
            const double r = k == LikelihoodKind::poisson ? 0.0 : std::exp(params_of(k)[0]);
            std::vector<double> y(static_cast<size_t>(periods));
            std::vector<CountMoments> mo(static_cast<size_t>(periods));
            double largest = 0;
            for (size_t j = 0; j < y.size(); ++j) {
              y[j] = counts[pick(rng)];
              mo[j].h = Vector::NullaryExpr(4, [&] { return std::sqrt(scale) * normal(rng); });
              mo[j].rho = mo[j].h.squaredNorm() + 0.1 * scale;
              mo[j].mean = std::max(y[j], 1.0) * std::exp(shift + 0.3 * normal(rng));
              if (y[j] > 0)
                largest += k == LikelihoodKind::poisson
                               ? y[j] * std::log(y[j]) - y[j] - std::lgamma(y[j] + 1)
                               : std::lgamma(y[j] + r) - std::lgamma(r) - std::lgamma(y[j] + 1) +
                                     r * std::log(r / (r + y[j])) + y[j] * std::log(y[j] / (r + y[j]));
            }
            const double term =
                shared_unit_effect_score(count_likelihood(k), y, mo, params_of(k), log_sd, nullptr, nullptr, nullptr);
            EXPECT_LE(term, largest + 1e-9 * std::max(1.0, std::abs(largest)))
                << to_string(k) << " periods " << periods << " scale " << scale << " shift " << shift << " log sd "
                << log_sd;
          }
}

// Central differences of the unit's term in every bag's mean, rho and h, log sigma and log r.
TEST(SharedUnitEffect, GradientsMatchFiniteDifferences) {
  for (LikelihoodKind k : {LikelihoodKind::poisson, LikelihoodKind::negative_binomial}) {
    const CountLikelihood& lik = count_likelihood(k);
    const Vector params = params_of(k);
    const std::vector<double> y = {3, 140, 0, 25};
    std::vector<CountMoments> mo = {moments(5, 0.05), moments(90, 0.01), moments(0.8, 0.2), moments(30, 0.0)};
    // The first three share field uncertainty (rho_j >= |h_j|^2).
    const double hs[3][2] = {{0.15, 0.1}, {0.08, -0.05}, {0.3, 0.2}};
    for (int j = 0; j < 3; ++j) mo[static_cast<size_t>(j)].h = (Vector(2) << hs[j][0], hs[j][1]).finished();
    const double log_sd = -0.4;
    std::vector<CountMomentsGradient> d;
    Vector gp;
    double gs = 0;
    shared_unit_effect_score(lik, y, mo, params, log_sd, &d, &gp, &gs);
    auto value = [&](const std::vector<CountMoments>& m, const Vector& p, double s) {
      return shared_unit_effect_score(lik, y, m, p, s, nullptr, nullptr, nullptr);
    };
    const double h = 1e-5;
    for (size_t j = 0; j < y.size(); ++j) {
      auto up = mo, down = mo;
      up[j].mean *= 1 + h;
      down[j].mean *= 1 - h;
      const double fd_mean = (value(up, params, log_sd) - value(down, params, log_sd)) / (2 * h * mo[j].mean);
      EXPECT_NEAR(d[j].mean, fd_mean, 1e-6 * (1 + std::abs(fd_mean))) << to_string(k) << " bag " << j;
      if (mo[j].rho > 0) {
        up = mo;
        down = mo;
        up[j].rho += h * mo[j].rho;
        down[j].rho -= h * mo[j].rho;
        const double fd_rho = (value(up, params, log_sd) - value(down, params, log_sd)) / (2 * h * mo[j].rho);
        EXPECT_NEAR(d[j].rho, fd_rho, 1e-5 * (1 + std::abs(fd_rho))) << to_string(k) << " bag " << j;
      }
    }
    for (size_t j = 0; j < 3; ++j)
      for (Index i = 0; i < 2; ++i) {
        auto up = mo, down = mo;
        up[j].h[i] += h;
        down[j].h[i] -= h;
        const double fd_h = (value(up, params, log_sd) - value(down, params, log_sd)) / (2 * h);
        ASSERT_EQ(d[j].h.size(), 2);
        EXPECT_NEAR(d[j].h[i], fd_h, 1e-6 * (1 + std::abs(fd_h))) << to_string(k) << " bag " << j << " h" << i;
      }
    const double fd_sd = (value(mo, params, log_sd + h) - value(mo, params, log_sd - h)) / (2 * h);
    EXPECT_NEAR(gs, fd_sd, 1e-6 * (1 + std::abs(fd_sd))) << to_string(k);
    if (params.size()) {
      const Vector pu = params.array() + h, pd = params.array() - h;
      const double fd_r = (value(mo, pu, log_sd) - value(mo, pd, log_sd)) / (2 * h);
      EXPECT_NEAR(gp[0], fd_r, 1e-6 * (1 + std::abs(fd_r)));
    }
  }
}

// Eight bags named as four units in two periods.
Dataset two_period_data(LikelihoodKind lik) {
  Dataset data = test::random_dataset(8, 4, 9, 2, lik, 31);
  for (Index a = 0; a < 8; ++a)
    data.bag_ids.push_back("d" + std::to_string(a % 4) + "@2020-0" + std::to_string(1 + a / 4));
  return data;
}

Model shared_model(LikelihoodKind lik, CovarianceMode cov) {
  ModelSpec spec = test::spec_of(lik, Link::exp, cov, Expectation::delta);
  spec.unit_effect = true;
  spec.unit_effect_shared = true;
  return test::random_model(spec, make_kernel("rbf", "none", 2, 0), 5, 2, 17);
}

// The ELBO with units' periods sharing their effect: its gradient against fourth-order central
// differences, for both likelihoods, on a minibatch of whole units: through each bag's moments
// and the months' covariances h_j . h_k.
TEST(SharedUnitEffect, ElboGradientMatchesFiniteDifferences) {
  for (LikelihoodKind lik : {LikelihoodKind::poisson, LikelihoodKind::negative_binomial})
    for (CovarianceMode cov : {CovarianceMode::nystrom}) {
      const Dataset data = two_period_data(lik);
      const Model model = shared_model(lik, cov);
      const std::vector<Index> bags = {1, 5, 2, 6, 0, 4};
      Vector g;
      ObjectiveOptions opt;
      opt.threads = 2;
      elbo(model, data, bags, 1.5, &g, opt);
      const Vector numeric = test::numeric_gradient(model, data, bags, 1.5, 1e-3, opt);
      std::string worst;
      EXPECT_LT(test::gradient_error(model, g, numeric, &worst), 1e-6) << to_string(lik) << " " << worst;
    }
}

// A shared bag keeps its forward pass from its moments to its way back. While every shared bag's
// fits the cache budget the step takes two passes around the units' terms; beyond it, it sweeps
// by unit, each thread keeping one unit's bags in its share of the budget, and a bag that does not
// fit recomputes its pass block by block. Every budget gives the two passes' ELBO and gradient (to
// rounding: the slots sum the bags in another order), the same bits on one thread and two, and
// the gradient of the sweep that keeps nothing matches central differences.
TEST(SharedUnitEffect, KeptAndRecomputedForwardPassesAgree) {
  for (LikelihoodKind lik : {LikelihoodKind::poisson, LikelihoodKind::negative_binomial}) {
    const Dataset data = two_period_data(lik);
    const Model model = shared_model(lik, CovarianceMode::nystrom);
    const std::vector<Index> bags = {1, 5, 2, 6, 0, 4};  // units d1, d2 and d0, two periods each
    ObjectiveOptions kept;
    kept.block = 2;
    const BagNeeds needs = bag_needs(model.spec);
    double all = 0, largest_bag = 0;
    for (Index a : bags) {
      const double need = kept_bytes(model, needs, residual_cap_of(model.spec, needs), data.bag_size(a), kept);
      all += need;
      largest_bag = std::max(largest_bag, need);
    }
    Vector g_kept;
    const double e_kept = elbo(model, data, bags, 1.5, &g_kept, kept).elbo;
    // Just short of every bag (a unit fits each thread's share), room for about one bag, none.
    for (double bytes : {0.99 * all, 1.5 * largest_bag, 0.0}) {
      Vector g_one;
      double e_one = 0;
      for (int threads : {1, 2}) {
        ObjectiveOptions swept = kept;
        swept.cache_mb = bytes / 1048576.0;
        swept.threads = threads;
        Vector g;
        const double e = elbo(model, data, bags, 1.5, &g, swept).elbo;
        const std::string what =
            to_string(lik) + ", " + std::to_string(bytes) + " bytes, threads " + std::to_string(threads);
        EXPECT_NEAR(e_kept, e, 1e-12 * std::abs(e_kept)) << what;
        EXPECT_LT((g_kept - g).cwiseAbs().maxCoeff(), 1e-10 * (1 + g_kept.cwiseAbs().maxCoeff())) << what;
        if (threads == 1) {
          e_one = e;
          g_one = g;
        } else {
          EXPECT_EQ(e_one, e) << what;
          EXPECT_EQ(g_one, g) << what;
        }
      }
    }
    ObjectiveOptions recomputed = kept;
    recomputed.cache_mb = 0;
    Vector g_recomputed;
    elbo(model, data, bags, 1.5, &g_recomputed, recomputed);
    const Vector numeric = test::numeric_gradient(model, data, bags, 1.5, 1e-3, recomputed);
    std::string worst;
    EXPECT_LT(test::gradient_error(model, g_recomputed, numeric, &worst), 1e-6) << to_string(lik) << " " << worst;
  }
}

// q's moments alone take the shared bags' way back too (kept and recomputed): the same moment
// gradients, bit for bit, as the full pass.
TEST(SharedUnitEffect, QMomentsAloneAreTheFullPassesOnes) {
  const Dataset data = two_period_data(LikelihoodKind::negative_binomial);
  const Model model = shared_model(LikelihoodKind::negative_binomial, CovarianceMode::nystrom);
  const std::vector<Index> bags = {1, 5, 2, 6, 0, 4};
  for (double cache_mb : {256.0, 0.0}) {
    ObjectiveOptions full;
    full.block = 2;
    full.cache_mb = cache_mb;
    test::expect_q_moments_alone_as_full(model, data, bags, full, "cache_mb " + std::to_string(cache_mb));
  }
}

// Units of one bag each: sharing changes nothing. Units of two: the ELBO differs; it is the same to
// the bit for any number of threads, and to rounding for any order of the bags (the order decides
// which slot sums a bag, and so the order of the slots' sums).
TEST(SharedUnitEffect, ElboOfOneBagUnitsIsThePerBagElbo) {
  Dataset data = two_period_data(LikelihoodKind::negative_binomial);
  Model shared = shared_model(LikelihoodKind::negative_binomial, CovarianceMode::nystrom);
  Model per_bag = shared;
  per_bag.spec.unit_effect_shared = false;
  const std::vector<Index> all = {0, 1, 2, 3, 4, 5, 6, 7};
  Vector g_shared, g_per_bag;
  const double joint = elbo(shared, data, all, 1.0, &g_shared).elbo;
  EXPECT_GT(std::abs(joint - elbo(per_bag, data, all, 1.0, nullptr).elbo), 1e-3);
  ObjectiveOptions two;
  two.threads = 2;
  Vector g_other, g_two;
  EXPECT_EQ(elbo(shared, data, all, 1.0, &g_two, two).elbo, joint);
  EXPECT_EQ(g_two, g_shared);
  EXPECT_NEAR(elbo(shared, data, {7, 3, 0, 4, 6, 2, 5, 1}, 1.0, &g_other, two).elbo, joint, 1e-13 * std::abs(joint));
  EXPECT_LT((g_other - g_shared).cwiseAbs().maxCoeff(), 1e-12 * (1 + g_shared.cwiseAbs().maxCoeff()));
  for (Index a = 0; a < 8; ++a) data.bag_ids[static_cast<size_t>(a)] = "u" + std::to_string(a);
  const ObjectiveValue one = elbo(shared, data, all, 1.0, &g_shared), two_v = elbo(per_bag, data, all, 1.0, &g_per_bag);
  EXPECT_NEAR(one.elbo, two_v.elbo, 1e-12 * std::abs(two_v.elbo));
  EXPECT_LT((g_shared - g_per_bag).cwiseAbs().maxCoeff(), 1e-10 * (1 + g_per_bag.cwiseAbs().maxCoeff()));
}

// A bag of a unit whose other period was fitted takes its effect given that period's count (the
// unit's conditional, checked on a grid), not the prior; a unit with no fitted period the prior.
TEST(SharedUnitEffect, HeldOutPeriodBorrowsItsUnit) {
  const Dataset data = two_period_data(LikelihoodKind::poisson);
  Model model = shared_model(LikelihoodKind::poisson, CovarianceMode::nystrom);
  model.unit_effect.units = {"d0@2020-01", "d1@2020-01", "d1@2020-02"};  // d2, d3: never fitted
  const std::vector<UnitEffectMoments> u = bag_unit_effects(model, data, {4, 5, 6}, 1);
  Model plain = model;
  plain.spec.unit_effect = false;
  const double sigma = std::exp(model.unit_effect.log_sd);
  EXPECT_DOUBLE_EQ(u[2].var, sigma * sigma);  // d2: the prior
  EXPECT_DOUBLE_EQ(u[2].mean, -0.5 * sigma * sigma);
  const CountLikelihood& lik = count_likelihood(LikelihoodKind::poisson);
  for (const auto& [k, own] : std::vector<std::pair<size_t, std::vector<Index>>>{{0, {0}}, {1, {1, 5}}}) {
    const Vector totals = predicted_bag_totals(plain, data, own, 1);
    std::vector<double> y, t;
    for (size_t j = 0; j < own.size(); ++j) {
      y.push_back(data.response[own[j]]);
      t.push_back(std::log(totals[static_cast<Index>(j)]));
    }
    // The conditional of u given the unit's fitted counts on a grid: its mean and variance.
    const int n = 20000;
    const double lo = -10 * sigma, hi = 10 * sigma, h = (hi - lo) / n;
    double z = 0, m1 = 0, m2 = 0, top = -INFINITY;
    std::vector<double> lp(n + 1);
    double d1 = 0, d2 = 0;
    for (int i = 0; i <= n; ++i) {
      const double uu = lo + i * h, c = uu + 0.5 * sigma * sigma;
      lp[i] = -c * c / (2 * sigma * sigma);
      for (size_t j = 0; j < y.size(); ++j) lp[i] += lik.log_pmf_kernel(y[j], t[j] + uu, Vector(), &d1, &d2, nullptr);
      top = std::max(top, lp[i]);
    }
    for (int i = 0; i <= n; ++i) {
      const double w = std::exp(lp[i] - top), uu = lo + i * h;
      z += w;
      m1 += w * uu;
      m2 += w * uu * uu;
    }
    const double mean = m1 / z, var = m2 / z - mean * mean;
    EXPECT_NEAR(u[k].mean, mean, 1e-4 * std::sqrt(var)) << "unit d" << k;
    EXPECT_NEAR(u[k].var, var, 1e-3 * var) << "unit d" << k;
    EXPECT_LT(u[k].var, 0.9 * sigma * sigma);
  }
}

// A unit the fit kept an effect for takes it, even where none of its fitted periods are in the
// data (a forecast month); a unit without one, its fitted months in the data; the density of a
// count never takes the kept effect (it has seen the count).
TEST(SharedUnitEffect, AForecastTakesTheKeptEffect) {
  const Dataset data = two_period_data(LikelihoodKind::poisson);
  Model model = shared_model(LikelihoodKind::poisson, CovarianceMode::nystrom);
  model.unit_effect.units = {"d0@2020-01", "d1@2020-01", "d2@2019-12"};  // d2's fitted month is not in the data
  model.unit_effect.posterior = {{"d0", {0.5, 0.01}}, {"d2", {-0.4, 0.02}}};
  const std::vector<UnitEffectMoments> u = bag_unit_effects(model, data, {4, 6, 7, 5}, 1);
  EXPECT_EQ(u[0].mean, 0.5);   // d0: kept
  EXPECT_EQ(u[1].mean, -0.4);  // d2: kept
  EXPECT_EQ(u[1].var, 0.02);
  Model unkept = model;
  unkept.unit_effect.posterior.clear();
  EXPECT_EQ(u[3].mean, bag_unit_effects(unkept, data, {5}, 1)[0].mean);  // d1: from its month in the data
  EXPECT_LT(u[3].var, 0.9 * std::exp(2 * model.unit_effect.log_sd));
  const double sigma = std::exp(model.unit_effect.log_sd);
  EXPECT_DOUBLE_EQ(u[2].var, sigma * sigma);  // d3: never fitted, the prior
  Model without = model;
  without.unit_effect.posterior.clear();
  EXPECT_DOUBLE_EQ(bag_predictive_nll(model, data, {6}, 1), bag_predictive_nll(without, data, {6}, 1));
}

// How the effect's mean given the counts moves with each bag's log total: the mixture's
// Cov(u, k_j') against central differences of the mean, for both likelihoods, small and large counts.
TEST(SharedUnitEffect, PosteriorSlopesMatchFiniteDifferences) {
  for (LikelihoodKind k : {LikelihoodKind::poisson, LikelihoodKind::negative_binomial}) {
    const CountLikelihood& lik = count_likelihood(k);
    const std::vector<double> y = {0, 7, 230, 41};
    const std::vector<double> totals = {1.5, 9.0, 180.0, 60.0};
    std::vector<double> slopes;
    shared_unit_effect_posterior(lik, y, totals, params_of(k), std::log(0.4), &slopes);
    ASSERT_EQ(slopes.size(), y.size());
    double sum = 0;
    for (size_t j = 0; j < y.size(); ++j) {
      const double h = 1e-5;
      std::vector<double> up = totals, down = totals;
      up[j] *= std::exp(h);
      down[j] *= std::exp(-h);
      const double numeric = (shared_unit_effect_posterior(lik, y, up, params_of(k), std::log(0.4)).mean -
                              shared_unit_effect_posterior(lik, y, down, params_of(k), std::log(0.4)).mean) /
                             (2 * h);
      EXPECT_NEAR(slopes[j], numeric, 1e-5 + 1e-4 * std::abs(numeric)) << to_string(k) << " bag " << j;
      EXPECT_LT(slopes[j], 0) << to_string(k) << " bag " << j;  // a higher rate leaves less to the effect
      sum += slopes[j];
    }
    // Shifting every rate at once moves the effect back by less than the shift, by nearly all of it
    // where Poisson counts of hundreds fix the sum.
    EXPECT_GT(sum, -1) << to_string(k);
    if (k == LikelihoodKind::poisson) {
      EXPECT_LT(sum, -0.95);
    }
  }
}

// A model of unit d1 (bags 1 and 5) whose draws there are all zeta: inducing points at the unit's
// pixels (the loading leaves out the pixels' own residuals, which a bag of many pixels averages
// away), q as narrow as a fit leaves it rather than the random model's near-prior width, and two
// directions of the point estimates' spread after q's entries.
Model unit_model(LikelihoodKind k, const Dataset& data, bool shared) {
  Model model = shared_model(k, CovarianceMode::nystrom);
  model.spec.unit_effect_shared = shared;
  const Index n1 = data.bag_size(1), n5 = data.bag_size(5);
  model.inducing.resize(data.num_inputs(), n1 + n5);
  model.inducing << data.inputs.middleCols(data.bag_begin(1), n1), data.inputs.middleCols(data.bag_begin(5), n5);
  model.q_mean = Vector::LinSpaced(model.num_q(), -0.3, 0.3);
  model.q_chol = 0.25 * Matrix::Identity(model.num_q(), model.num_q());
  const Index F = spread_field_size(model);
  model.spread.field.resize(F, 2);
  model.spread.field << Vector::LinSpaced(F, 0.025, -0.01), Vector::LinSpaced(F, -0.015, 0.02);
  model.spread.q_mean.resize(model.num_q(), 2);
  model.spread.q_mean << Vector::LinSpaced(model.num_q(), 0.05, -0.05), Vector::Constant(model.num_q(), 0.025);
  return model;
}

// A training unit's effect given its fitted periods moves with the field's draw: the kept loading
// and shift (mean + shift + loading . zeta) against the effect's conditional mean recomputed from
// each draw's own totals of the unit's periods (the same seed, so the same zeta), by Monte Carlo;
// and so does an effect per bag given its own count. With q all but a point, the draws are the
// point spread's, whose directions the loading must take after q's entries.
TEST(SharedUnitEffect, LoadingFollowsTheFieldsDraws) {
  for (LikelihoodKind k : {LikelihoodKind::poisson, LikelihoodKind::negative_binomial})
    for (bool shared : {true, false})
      for (bool spread_only : {false, true}) {
        const std::string label =
            to_string(k) + (shared ? ", shared" : ", an effect per bag") + (spread_only ? ", q a point" : "");
        const Dataset data = two_period_data(k);
        Model model = unit_model(k, data, shared);
        // With q all but a point the draws are the spread's: its directions must follow q's entries.
        if (spread_only) model.q_chol *= 1e-3;
        model.unit_effect.units = {"d1@2020-01", "d1@2020-02"};
        // The effect of bag 5 given its unit's fitted bags: both months, or its own.
        const std::vector<Index> own = shared ? std::vector<Index>{1, 5} : std::vector<Index>{5};
        const UnitEffectMoments u = bag_unit_effects(model, data, {5}, 1)[0];
        ASSERT_EQ(u.loading.size(), model.num_q() + 2);
        const LatentField field(model);
        const int S = 4000;
        const unsigned long long seed = 91;
        const Matrix zeta = shared_draw_normals(field, S, seed);
        std::vector<Vector> eta;
        for (Index a : own) eta.push_back(test::bag_total_draws_of(field, data, a, S, seed));
        const CountLikelihood& lik = count_likelihood(k);
        Vector exact(S), linear(S);
        for (int s = 0; s < S; ++s) {
          std::vector<double> y, t;
          for (size_t j = 0; j < own.size(); ++j) {
            y.push_back(data.response[own[j]]);
            t.push_back(eta[j][s]);
          }
          exact[s] = shared_unit_effect_posterior(lik, y, t, model.likelihood_params, model.unit_effect.log_sd).mean;
          linear[s] = u.mean + u.shift + zeta.row(s).dot(u.loading);
        }
        const double sd = std::sqrt((exact.array() - exact.mean()).square().mean());
        const double corr = ((exact.array() - exact.mean()) * (linear.array() - linear.mean())).mean() /
                            (sd * std::sqrt((linear.array() - linear.mean()).square().mean()));
        const double rms = std::sqrt((exact - linear).squaredNorm() / S);
        // The effect does move with the draw (not by a rounding), and the loading follows it.
        EXPECT_GT(sd, 0.03) << label;  // 3 % of the rate at least
        EXPECT_GT(corr, 0.99) << label;
        EXPECT_LT(rms, 0.1 * sd) << label;
        EXPECT_NEAR(linear.mean(), exact.mean(), 0.05 * sd) << label;
      }
}

// A unit-month's predictive draws of its count take the effect given each draw of the field: their
// spread against a reference that draws the unit's months jointly, takes the effect from its exact
// conditional given each draw's fitted totals, then the count; and narrower than with the effect
// drawn on its own.
TEST(SharedUnitEffect, CountDrawsTakeTheEffectGivenTheDraw) {
  const Dataset data = two_period_data(LikelihoodKind::poisson);
  Model model = unit_model(LikelihoodKind::poisson, data, true);
  model.unit_effect.units = {"d1@2020-01", "d1@2020-02"};
  const UnitEffectMoments u = bag_unit_effects(model, data, {5}, 1)[0];
  const LatentField field(model);
  const int S = 20000;
  const unsigned long long seed = 13;
  const Vector fitted = test::bag_total_draws_of(field, data, 1, S, seed);
  const Vector target = test::bag_total_draws_of(field, data, 5, S, seed);
  const CountLikelihood& lik = count_likelihood(LikelihoodKind::poisson);
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal;
  Vector reference(S);
  for (int s = 0; s < S; ++s) {
    const UnitEffectMoments given =
        shared_unit_effect_posterior(lik, {data.response[1], data.response[5]}, {fitted[s], target[s]},
                                     model.likelihood_params, model.unit_effect.log_sd);
    reference[s] = poisson_draw(target[s] * std::exp(given.mean + std::sqrt(given.var) * normal(rng)), rng);
  }
  const Index b5 = data.bag_begin(5), n5 = data.bag_size(5);
  const Matrix X5 = data.inputs.middleCols(b5, n5);
  const Vector w5 = data.weights().segment(b5, n5);
  const double moving = test::log1p_sd(bag_predictive_draws(field, X5, w5, S, seed, u));
  const double alone = test::log1p_sd(bag_predictive_draws(field, X5, w5, S, seed, {u.mean, u.var}));
  const double ref = test::log1p_sd(reference);
  EXPECT_NEAR(moving, ref, 0.03 * ref);
  EXPECT_GT(alone, 1.3 * ref);
}

// The density of a held-out month's count with the field's uncertainty integrated takes the unit's
// effect given each draw of the field, as units.csv's draws do: against Monte Carlo over joint
// draws of the fitted and the held-out month (the effect's exact conditional given each draw's
// fitted total, then the count mixed over it), and far from the effect drawn on its own.
TEST(SharedUnitEffect, IntegratedDensityTakesTheEffectGivenTheDraw) {
  for (LikelihoodKind k : {LikelihoodKind::poisson, LikelihoodKind::negative_binomial}) {
    const Dataset data = two_period_data(k);
    Model model = unit_model(k, data, true);
    model.unit_effect.units = {"d1@2020-01"};  // d1@2020-02 (bag 5) held out
    // A dispersion of 50, not the random model's e^-0.5, where the count noise would drown the field.
    if (k == LikelihoodKind::negative_binomial) model.likelihood_params.setConstant(std::log(50.0));
    const double nll = bag_predictive_nll(model, data, {5}, 1, true);
    const LatentField field(model);
    const int S = 20000;
    const unsigned long long seed = 5;
    const Vector fitted = test::bag_total_draws_of(field, data, 1, S, seed);
    const Vector target = test::bag_total_draws_of(field, data, 5, S, seed);
    const CountLikelihood& lik = count_likelihood(k);
    const UnitEffectMoments at_mean = bag_unit_effects(model, data, {5}, 1)[0];
    double joint = 0, alone = 0;
    for (int s = 0; s < S; ++s) {
      const UnitEffectMoments given = shared_unit_effect_posterior(lik, {data.response[1]}, {fitted[s]},
                                                                   model.likelihood_params, model.unit_effect.log_sd);
      joint += std::exp(unit_effect_log_pmf(lik, data.response[5], target[s], model.likelihood_params, given));
      alone += std::exp(
          unit_effect_log_pmf(lik, data.response[5], target[s], model.likelihood_params, {at_mean.mean, at_mean.var}));
    }
    const double mc = -std::log(joint / S), mc_alone = -std::log(alone / S);
    EXPECT_NEAR(nll, mc, 0.02) << to_string(k);
    EXPECT_GT(mc_alone - mc, 0.1) << to_string(k);  // drawn on its own, the interval is too wide
  }
}

// The density of a count conditions its unit's shared effect on the unit's other fitted periods,
// never on the count itself.
TEST(SharedUnitEffect, CountDensityLeavesItsOwnCountOut) {
  const Dataset data = two_period_data(LikelihoodKind::poisson);
  Model both = shared_model(LikelihoodKind::poisson, CovarianceMode::nystrom);
  both.unit_effect.units = {"d1@2020-01", "d1@2020-02"};
  Model other = both, none = both;
  other.unit_effect.units = {"d1@2020-01"};
  none.unit_effect.units.clear();
  const double with_both = bag_predictive_nll(both, data, {5}, 1);
  EXPECT_DOUBLE_EQ(with_both, bag_predictive_nll(other, data, {5}, 1));
  EXPECT_GT(std::abs(with_both - bag_predictive_nll(none, data, {5}, 1)), 1e-3);
}

// The shared effect needs the months' joint delta-method moments: the sampled expectation (one
// bag at a time) and the exact covariance (no h) are refused.
TEST(SharedUnitEffect, OtherExpectationsAreRefused) {
  for (auto [cov, ex] : {std::pair{CovarianceMode::nystrom, Expectation::sample},
                         std::pair{CovarianceMode::exact, Expectation::delta}}) {
    ModelSpec spec = test::spec_of(LikelihoodKind::poisson, Link::exp, cov, ex);
    spec.unit_effect = true;
    spec.validate();
    spec.unit_effect_shared = true;
    EXPECT_THROW(spec.validate(), ConfigError);
  }
}

}  // namespace
}  // namespace vbagg
