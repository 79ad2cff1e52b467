// The binomial bag model (prevalence surveys): its sampled and deterministic expectations against
// brute-force Monte Carlo, its predictive density, and fits under both that recover a known
// prevalence surface.
#include <gtest/gtest.h>

#include <Eigen/Cholesky>
#include <cmath>
#include <random>

#include "core/fit.hpp"
#include "core/init.hpp"
#include "core/likelihood.hpp"
#include "core/link.hpp"
#include "core/metrics.hpp"
#include "core/objective.hpp"
#include "core/predict.hpp"
#include "test_util.hpp"

namespace vbagg::binomial_test {

const Index kD = 2;

double sigmoid(double f) { return 1 / (1 + std::exp(-f)); }

double binomial_logp(double y, double n, double p) {
  return std::lgamma(n + 1) - std::lgamma(y + 1) - std::lgamma(n - y + 1) + y * std::log(p) + (n - y) * std::log1p(-p);
}

ModelSpec binomial_spec(int samples) {
  ModelSpec s = test::spec_of(LikelihoodKind::binomial, Link::logit, CovarianceMode::nystrom, Expectation::sample);
  s.samples = samples;
  return s;
}

// Mean and covariance of f over bag a's pixels (q's nystrom form, or its exact within-bag
// covariance), and the bag's normalised weights.
struct BagMoments {
  Vector m, w;
  Matrix C;
};

BagMoments bag_moments(const Model& model, const Dataset& data, Index a, CovarianceMode cov = CovarianceMode::nystrom) {
  const Posterior post = compute_posterior(model);
  const auto X = data.inputs.middleCols(data.bag_begin(a), data.bag_size(a));
  Matrix Kwa, Kaa;
  model.kernel.cross(model.inducing, X, Kwa);
  model.kernel.cross(X, X, Kaa);
  BagMoments b;
  b.m = (Kwa.transpose() * post.alpha).array() + model.mean;
  const Matrix T = post.B * Kwa;
  b.C = T.transpose() * T;
  b.C.diagonal() = (Kaa - Kwa.transpose() * post.Q * Kwa).diagonal();
  if (cov == CovarianceMode::exact) b.C = Kaa - Kwa.transpose() * post.Q * Kwa;
  b.w = data.weights().segment(data.bag_begin(a), X.cols());
  b.w /= b.w.sum();
  return b;
}

struct MonteCarlo {
  double mean, se, prevalence;  // E log p, its standard error, E pi
};

// E_q[log Binomial(y | n, sum_i w_i sigma(f_i))] over 10^5 joint draws of f.
MonteCarlo monte_carlo(const BagMoments& b, double y, double n) {
  const Index size = b.m.size();
  const Matrix L = (b.C + 1e-10 * Matrix::Identity(size, size)).llt().matrixL();
  std::mt19937_64 rng(17);
  std::normal_distribution<double> normal;
  double mc = 0, mc2 = 0, pi_sum = 0;
  const int draws = 100000;
  Vector z(size);
  for (int s = 0; s < draws; ++s) {
    for (Index i = 0; i < size; ++i) z[i] = normal(rng);
    const Vector f = b.m + L * z;
    double pi = 0;
    for (Index i = 0; i < size; ++i) pi += b.w[i] * sigmoid(f[i]);
    const double v = binomial_logp(y, n, pi);
    mc += v;
    mc2 += v * v;
    pi_sum += pi;
  }
  mc /= draws;
  return {mc, std::sqrt((mc2 / draws - mc * mc) / draws), pi_sum / draws};
}

// The sampled term's mean over many steps' fresh draws matches a 10^5-draw Monte Carlo of
// E_q[log Binomial(y | n, sum_i w_i sigma(f_i) / sum_i w_i)], with f drawn from q's nystrom form.
TEST(Binomial, SampledTermIsUnbiased) {
  const Dataset data = test::random_dataset(3, 3, 10, kD, LikelihoodKind::binomial, 5);
  Model model = test::random_model(binomial_spec(40), make_kernel("ard", "none", kD, 0), 5, kD, 6);
  model.mean = -0.8;
  for (Index a = 0; a < data.num_bags(); ++a) {
    const MonteCarlo mc = monte_carlo(bag_moments(model, data, a), data.response[a], data.trials[a]);
    const test::StepAverage s = test::sampled_term_over_steps(model, data, a, 1500, 8);
    EXPECT_NEAR(s.mean, mc.mean, 4 * std::hypot(s.se, mc.se)) << "bag " << a;
  }
}

double delta_term(const Model& base, const Dataset& data, Index a, CovarianceMode cov) {
  Model model = base;
  model.spec = test::spec_of(LikelihoodKind::binomial, Link::logit, cov, Expectation::delta);
  return elbo(model, data, std::vector<Index>{a}, 1.0, nullptr).data_term;
}

// The deterministic term (the bag's prevalence as a logit-normal with its mean and variance under
// q) against brute-force Monte Carlo, in both covariance forms, at latent sds from a fit's (0.2) to
// the prior's (1): it closes all but a tenth of the gap between the Monte Carlo and the plug-in
// log p(y | E pi), which ignores q's variance.
TEST(Binomial, DeltaTermTracksMonteCarlo) {
  const Dataset data = test::random_dataset(8, 1, 15, kD, LikelihoodKind::binomial, 31);
  for (double scale : {0.2, 1.0}) {
    Model model = test::random_model(binomial_spec(4), make_kernel("ard", "none", kD, 0), 5, kD, 32);
    model.kernel.parts()[0].log_variance = 2 * std::log(scale);
    model.mean = -1.2;
    for (Index a = 0; a < data.num_bags(); ++a)
      for (CovarianceMode cov : {CovarianceMode::exact, CovarianceMode::nystrom}) {
        const double y = data.response[a], n = data.trials[a];
        const MonteCarlo mc = monte_carlo(bag_moments(model, data, a, cov), y, n);
        const double plug_in = binomial_logp(y, n, mc.prevalence), gap = std::abs(mc.mean - plug_in);
        const double delta = delta_term(model, data, a, cov);
        EXPECT_LT(std::abs(delta - mc.mean), 0.1 * gap + 4 * mc.se)
            << "sd " << scale << ", bag " << a << " of " << data.bag_size(a) << " pixels, " << to_string(cov)
            << ": delta " << delta << " MC " << mc.mean << " plug-in " << plug_in;
      }
  }
}

// For one pixel logit pi = f is Normal, and the term is exact but for its 32-node rule over f:
// against a fine trapezoid rule, at a fit's latent variance and at a latent sd of 2 with 1,000
// tested (2e-8 relative there; 0.1 nats when it matched moments from the per-pixel rule).
TEST(Binomial, DeltaTermIsExactForOnePixel) {
  for (auto [m0, s2, y, n] : {std::tuple{-1.4, 0.8, 9.0, 40.0}, {-0.9, 4.0, 260.0, 1000.0}}) {
    const Vector m = Vector::Constant(1, m0), v = Vector::Constant(1, s2), w = Vector::Constant(1, 3.0);
    const Matrix C = Matrix::Constant(1, 1, s2);
    BagPosterior bag(m, v, w, y, n);
    bag.C = &C;
    const ModelSpec spec =
        test::spec_of(LikelihoodKind::binomial, Link::logit, CovarianceMode::exact, Expectation::delta);
    double expected = 0;
    const double h = 1e-3, s = std::sqrt(s2);
    for (double z = -12; z <= 12; z += h) {
      const double pdf = std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI);
      const double p = sigmoid(m0 + s * z);
      expected += h * pdf * (y * std::log(p) + (n - y) * std::log1p(-p));
    }
    expected += binomial_logp(y, n, 0.5) - n * std::log(0.5);  // log C(n, y)
    EXPECT_NEAR(bag_term(spec, Vector(), bag, nullptr), expected, 1e-7 * (1 + std::abs(expected))) << "s2 " << s2;
  }
}

// Survey points (bags of one pixel) take the term at q's own mean and variance: its gradient,
// with and without the unit effect and in both covariance forms, against finite differences.
TEST(Binomial, OnePixelBagsGradientMatchesFiniteDifferences) {
  const Dataset data = test::random_dataset(6, 1, 1, kD, LikelihoodKind::binomial, 51);
  const std::vector<Index> bags = {0, 1, 2, 3, 4, 5};
  for (CovarianceMode cov : {CovarianceMode::nystrom, CovarianceMode::exact})
    for (bool unit_effect : {false, true}) {
      ModelSpec spec = test::spec_of(LikelihoodKind::binomial, Link::logit, cov, Expectation::delta);
      spec.unit_effect = unit_effect;
      spec.learn_inducing = true;
      Model model = test::random_model(spec, make_kernel("ard", "none", kD, 0), 4, kD, 52);
      model.unit_effect.log_sd = std::log(0.5);
      Vector analytic;
      elbo(model, data, bags, 1.0, &analytic);
      const Vector numeric = test::numeric_gradient(model, data, bags, 1.0);
      EXPECT_LE((analytic - numeric).norm() / numeric.norm(), 1e-6)
          << to_string(cov) << (unit_effect ? ", unit effect" : "");
    }
}

// The predictive density of a bag's positives is a distribution over 0..n: beta-binomial with the
// prevalence's spread, the binomial itself when the latent values are certain. Nearly certain ones
// give concentrations of 1e6 to 1e12, where differenced lgammas would lose the normalisation.
TEST(Binomial, PredictiveDensityIsADistribution) {
  Model model;
  model.spec = binomial_spec(4);
  const BagLikelihood& lik = likelihood_of(LikelihoodKind::binomial);
  const Vector w = (Vector(3) << 1.0, 2.0, 0.5).finished();
  const Vector m = (Vector(3) << -1.0, 0.2, 0.8).finished();
  const double n = 25;
  for (double var : {0.0, 1e-12, 1e-9, 1e-6, 0.3, 2.0}) {
    const Vector v = Vector::Constant(3, var);
    double total = 0, mean = 0;
    for (int y = 0; y <= 25; ++y) {
      const double p = std::exp(-lik.predictive_nll(model, {double(y), n}, w, m, v, 0, {}));
      total += p;
      mean += y * p;
    }
    EXPECT_NEAR(total, 1.0, 1e-9) << "latent variance " << var;
    double pi = 0;
    for (Index i = 0; i < 3; ++i) pi += w[i] / w.sum() * link_of(Link::logit).mean(m[i], var);
    EXPECT_NEAR(mean, n * pi, 1e-6) << "latent variance " << var;
    if (var == 0) {
      EXPECT_NEAR(lik.predictive_nll(model, {7, n}, w, m, v, 0, {}), -binomial_logp(7, n, pi), 1e-10);
    }
  }
}

// A unit of many pixels: its predictive density is as wide as its joint draws, which carry the
// covariances of the pixels' latent values (a beta-binomial matches the draws' variance
// n pi (1 - pi) + n (n - 1) Var pi when Var pi is right); with the pixels taken as independent
// it would be far narrower.
TEST(Binomial, PredictiveDensityCarriesTheBagsCovariance) {
  Dataset data = test::random_dataset(1, 300, 300, kD, LikelihoodKind::binomial, 12);
  const double n = 200;
  data.trials = Vector::Constant(1, n);
  const ModelSpec spec =
      test::spec_of(LikelihoodKind::binomial, Link::logit, CovarianceMode::nystrom, Expectation::delta);
  Model model = test::random_model(spec, make_kernel("rbf", "none", kD, 0), 8, kD, 13);
  model.mean = -1.0;
  const BagLikelihood& lik = likelihood_of(LikelihoodKind::binomial);
  Vector m, v;
  predict_latent(model, data.inputs, m, v, 1);
  const Vector w = data.weights();
  double mean = 0, second = 0, mean_alone = 0, second_alone = 0;
  for (int y = 0; y <= n; ++y) {
    data.response[0] = y;
    const double p = std::exp(-bag_predictive_nll(model, data, {0}, 1));
    const double p_alone = std::exp(-lik.predictive_nll(model, {double(y), n}, w, m, v, 0, {}));
    mean += y * p;
    second += y * y * p;
    mean_alone += y * p_alone;
    second_alone += y * y * p_alone;
  }
  const double var = second - mean * mean, var_alone = second_alone - mean_alone * mean_alone;
  const int S = 20000;
  const Vector draws = bag_predictive_draws(model, data.inputs, w, S, 14, {}, n);
  const double draws_mean = draws.mean(), draws_var = (draws.array() - draws_mean).square().sum() / (S - 1);
  EXPECT_NEAR(mean, draws_mean, 5 * std::sqrt(draws_var / S));
  // Var pi to first order in the covariances (0.2 % off here); the sample variance's own relative
  // sd is 1 %. The pixels alone give a sixth of it.
  EXPECT_NEAR(var, draws_var, 0.05 * draws_var);
  EXPECT_LT(var_alone, 0.5 * draws_var);
}

// A known prevalence surface sigma(f(x)) over 2-D inputs, surveyed in 60 clusters of 20 pixels
// (300 tested each): the fit's pixel prevalence tracks the truth far better than the clusters'
// own prevalence spread over their pixels, and the predicted positives match the observed.
TEST(Binomial, FitRecoversAKnownPrevalence) {
  std::mt19937_64 rng(21);
  std::normal_distribution<double> normal;
  const Index bags = 60, size = 20, N = bags * size;
  Matrix X(kD, N);
  std::vector<Index> bag_of(static_cast<size_t>(N));
  Vector truth(N);
  for (Index a = 0; a < bags; ++a) {
    const double cx = 2.5 * normal(rng), cy = 2.5 * normal(rng);  // clusters spread over the plane
    for (Index k = 0; k < size; ++k) {
      const Index i = a * size + k;
      X(0, i) = cx + 0.4 * normal(rng);
      X(1, i) = cy + 0.4 * normal(rng);
      bag_of[static_cast<size_t>(i)] = a;
      truth[i] = sigmoid(1.2 * std::sin(X(0, i)) + 0.6 * std::cos(0.7 * X(1, i)) - 0.6);
    }
  }
  Vector y(bags), trials = Vector::Constant(bags, 300);
  for (Index a = 0; a < bags; ++a) {
    const double pi = truth.segment(a * size, size).mean();
    y[a] = static_cast<double>(std::binomial_distribution<long long>(300, pi)(rng));
  }
  Dataset data = make_dataset(X, Vector::Ones(N), bag_of, y);
  data.trials = trials;
  data.validate();

  std::vector<Index> all(static_cast<size_t>(bags));
  for (Index a = 0; a < bags; ++a) all[static_cast<size_t>(a)] = a;
  Vector cluster(N);
  for (Index i = 0; i < N; ++i) cluster[i] = y[bag_of[static_cast<size_t>(i)]] / 300;
  // Sampled with Adam's steps; deterministic with L-BFGS and with natural-gradient steps (which a
  // fit of more than kFullBatchPixels takes).
  for (Optimizer opt : {Optimizer::adam, Optimizer::lbfgs, Optimizer::natgrad}) {
    const Expectation ex = opt == Optimizer::adam ? Expectation::sample : Expectation::delta;
    ModelSpec spec = binomial_spec(8);
    spec.expectation = ex;
    InitOptions init;
    init.inducing = 40;
    init.seed = 2;
    Model model = init_model(spec, make_kernel("rbf", "none", kD, 0), data, init);
    FitOptions fo;
    fo.optimizer = opt;
    fo.epochs = opt == Optimizer::natgrad ? 60 : 300;  // natural-gradient steps settle q in few epochs
    fo.learning_rate = 0.02;
    fo.batch_bags = 20;
    fo.threads = 2;
    fit(model, data, all, {}, fo);

    PredictOptions po;
    po.threads = 2;
    const Prediction p = predict(model, data.inputs, po);
    EXPECT_GT(correlation(p.mean, truth), 0.9) << to_string(opt);
    EXPECT_LT(mean_squared_error(p.mean, truth), 0.7 * mean_squared_error(cluster, truth)) << to_string(opt);
    const Vector totals = predicted_bag_totals(model, data, all, 2, false);
    EXPECT_LT(bag_log_mse(y, totals), 0.05) << to_string(opt);
  }
}

}  // namespace vbagg::binomial_test
