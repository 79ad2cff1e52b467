// The count models' predictive density with the field's uncertainty integrated
// (BagLikelihood::predictive_nll_integrated): exact for one pixel of the exp link against brute-force
// quadrature, and a distribution over the counts with the lognormal total's mean and variance.
#include <gtest/gtest.h>

#include <cmath>

#include "core/likelihood.hpp"
#include "core/link.hpp"
#include "test_util.hpp"

namespace vbagg::predictive_score_test {

double poisson_log_pmf(double y, double mean) { return y * std::log(mean) - mean - std::lgamma(y + 1); }

double nb_log_pmf(double y, double mean, double r) {
  return std::lgamma(y + r) - std::lgamma(r) - std::lgamma(y + 1) + r * std::log(r / (r + mean)) +
         y * std::log(mean / (r + mean));
}

Model count_model(LikelihoodKind kind, double log_r) {
  Model model;
  model.spec = test::spec_of(kind, Link::exp, CovarianceMode::nystrom, Expectation::delta);
  if (kind == LikelihoodKind::negative_binomial) model.likelihood_params = Vector::Constant(1, log_r);
  return model;
}

// One pixel of weight w with f ~ N(m, v): its total w e^f is lognormal itself, so the score is
// -log of the integral of p(y | w e^f) N(f; m, v) df, here by the trapezoid rule over m +- 12 sd.
TEST(CountPredictiveScore, OnePixelIsTheLognormalMixture) {
  const double w = 2.5, m = 1.2, log_r = 1.0;
  for (LikelihoodKind kind : {LikelihoodKind::poisson, LikelihoodKind::negative_binomial}) {
    const Model model = count_model(kind, log_r);
    const BagLikelihood& lik = likelihood_of(kind);
    auto log_pmf = [&](double y, double mean) {
      return kind == LikelihoodKind::poisson ? poisson_log_pmf(y, mean) : nb_log_pmf(y, mean, std::exp(log_r));
    };
    for (double v : {0.0, 0.05, 0.5, 2.0})
      for (double y : {0.0, 3.0, 10.0, 60.0}) {
        const double score = lik.predictive_nll_integrated(model, {y, 0}, Vector::Constant(1, w),
                                                           Vector::Constant(1, m), Vector::Constant(1, v), 0, {});
        double expected = -log_pmf(y, w * std::exp(m));
        if (v > 0) {
          const int n = 40000;
          const double sd = std::sqrt(v), lo = m - 12 * sd, h = 24 * sd / n;
          double integral = 0;
          for (int k = 0; k <= n; ++k) {
            const double f = lo + k * h, z = (f - m) / sd;
            const double term = std::exp(log_pmf(y, w * std::exp(f)) - 0.5 * z * z) / (sd * std::sqrt(2 * M_PI));
            integral += (k == 0 || k == n ? 0.5 : 1.0) * h * term;
          }
          expected = -std::log(integral);
        }
        // The effect's adaptive rule (unit_effect_log_pmf) came within 5e-9 up to a log variance of
        // 0.5, and within 1.2e-6 relative at 2, where a count of 0 cuts the integrand off sharply.
        const double tolerance = v <= 0.5 ? 1e-8 : 2e-6;
        EXPECT_NEAR(score, expected, tolerance * std::max(1.0, std::abs(expected)))
            << (kind == LikelihoodKind::poisson ? "poisson" : "negative binomial") << ", v " << v << ", y " << y;
      }
  }
}

// A bag of three pixels, its covariances' share `cross` and a unit effect: the density sums to one
// over the counts, with the total's mean and the variance of a count mixed over the lognormal of
// that mean and of variance sum_i w_i^2 Var lambda_i + cross, then over the effect.
TEST(CountPredictiveScore, BagOfPixelsIsADistributionWithTheTotalsMoments) {
  const Model model = count_model(LikelihoodKind::poisson, 0);
  const BagLikelihood& lik = likelihood_of(LikelihoodKind::poisson);
  const LinkFunction& link = link_of(Link::exp);
  const Vector w = (Vector(3) << 4.0, 2.0, 6.0).finished();
  const Vector m = (Vector(3) << 0.3, 0.9, -0.2).finished();
  const Vector v = (Vector(3) << 0.04, 0.1, 0.02).finished();
  const double cross = 3.0, sigma_u = 0.2;
  const UnitEffectMoments unit{-0.5 * sigma_u * sigma_u, sigma_u * sigma_u};
  double total = 0, var = cross;
  for (Index i = 0; i < 3; ++i) {
    total += w[i] * link.mean(m[i], v[i]);
    var += w[i] * w[i] * link.variance(m[i], v[i]);
  }
  // The lognormal total times e^u: mean total (E e^u = 1), variance total^2 ((1 + var / total^2)
  // e^{sigma_u^2} - 1); the count adds its Poisson variance.
  const double rate_var = total * total * ((1 + var / (total * total)) * std::exp(sigma_u * sigma_u) - 1);
  double mass = 0, mean = 0, second = 0;
  for (int y = 0; y <= 400; ++y) {
    const double p = std::exp(-lik.predictive_nll_integrated(model, {double(y), 0}, w, m, v, cross, unit));
    mass += p;
    mean += y * p;
    second += double(y) * y * p;
  }
  EXPECT_NEAR(mass, 1.0, 1e-7);
  EXPECT_NEAR(mean, total, 1e-5 * total);
  EXPECT_NEAR(second - mean * mean, total + rate_var, 1e-4 * (total + rate_var));
  // Without the field's uncertainty and the effect it is the Poisson density at the total.
  const Vector zero = Vector::Zero(3);
  double plain = 0;
  for (Index i = 0; i < 3; ++i) plain += w[i] * std::exp(m[i]);
  EXPECT_NEAR(lik.predictive_nll_integrated(model, {17, 0}, w, m, zero, 0, {}), -poisson_log_pmf(17, plain), 1e-12);
}

}  // namespace vbagg::predictive_score_test
