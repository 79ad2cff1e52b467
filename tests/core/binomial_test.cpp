// The binomial bag model (prevalence surveys): its sampled expectation against brute-force Monte
// Carlo, its predictive density, and a fit that recovers a known prevalence surface.
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

// The sampled term's mean over many steps' fresh draws matches a 10^5-draw Monte Carlo of
// E_q[log Binomial(y | n, sum_i w_i sigma(f_i) / sum_i w_i)], with f drawn from q's nystrom form.
TEST(Binomial, SampledTermIsUnbiased) {
  const Dataset data = test::random_dataset(3, 3, 10, kD, LikelihoodKind::binomial, 5);
  Model model = test::random_model(binomial_spec(40), make_kernel("ard", "none", kD, 0), 5, kD, 6);
  model.mean = -0.8;
  const Posterior post = compute_posterior(model);
  for (Index a = 0; a < data.num_bags(); ++a) {
    const auto X = data.inputs.middleCols(data.bag_begin(a), data.bag_size(a));
    const Index n = X.cols();
    Matrix Kwa, Kaa;
    model.kernel.cross(model.inducing, X, Kwa);
    model.kernel.cross(X, X, Kaa);
    const Vector m = (Kwa.transpose() * post.alpha).array() + model.mean;
    const Matrix T = post.B * Kwa;
    Matrix C = T.transpose() * T;
    C.diagonal() = (Kaa - Kwa.transpose() * post.Q * Kwa).diagonal();
    const Matrix L = (C + 1e-10 * Matrix::Identity(n, n)).llt().matrixL();
    Vector w = data.weights().segment(data.bag_begin(a), n);
    w /= w.sum();
    std::mt19937_64 rng(17);
    std::normal_distribution<double> normal;
    double mc = 0, mc2 = 0;
    const int draws = 100000;
    Vector z(n);
    for (int s = 0; s < draws; ++s) {
      for (Index i = 0; i < n; ++i) z[i] = normal(rng);
      const Vector f = m + L * z;
      double pi = 0;
      for (Index i = 0; i < n; ++i) pi += w[i] * sigmoid(f[i]);
      const double v = binomial_logp(data.response[a], data.trials[a], pi);
      mc += v;
      mc2 += v * v;
    }
    mc /= draws;
    const double mc_se = std::sqrt((mc2 / draws - mc * mc) / draws);
    const test::StepAverage s = test::sampled_term_over_steps(model, data, a, 1500, 8);
    EXPECT_NEAR(s.mean, mc, 4 * std::hypot(s.se, mc_se)) << "bag " << a;
  }
}

// The predictive density of a bag's positives is a distribution over 0..n: beta-binomial with the
// prevalence's spread, the binomial itself when the latent values are certain.
TEST(Binomial, PredictiveDensityIsADistribution) {
  Model model;
  model.spec = binomial_spec(4);
  const BagLikelihood& lik = likelihood_of(LikelihoodKind::binomial);
  const Vector w = (Vector(3) << 1.0, 2.0, 0.5).finished();
  const Vector m = (Vector(3) << -1.0, 0.2, 0.8).finished();
  const double n = 25;
  for (double var : {0.0, 0.3, 2.0}) {
    const Vector v = Vector::Constant(3, var);
    double total = 0, mean = 0;
    for (int y = 0; y <= 25; ++y) {
      const double p = std::exp(-lik.predictive_nll(model, {double(y), n}, w, m, v, {}));
      total += p;
      mean += y * p;
    }
    EXPECT_NEAR(total, 1.0, 1e-9) << "latent variance " << var;
    double pi = 0;
    for (Index i = 0; i < 3; ++i) pi += w[i] / w.sum() * link_of(Link::logit).mean(m[i], var);
    EXPECT_NEAR(mean, n * pi, 1e-6) << "latent variance " << var;
    if (var == 0) {
      EXPECT_NEAR(lik.predictive_nll(model, {7, n}, w, m, v, {}), -binomial_logp(7, n, pi), 1e-10);
    }
  }
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

  InitOptions init;
  init.inducing = 40;
  init.seed = 2;
  Model model = init_model(binomial_spec(8), make_kernel("rbf", "none", kD, 0), data, init);
  std::vector<Index> all(static_cast<size_t>(bags));
  for (Index a = 0; a < bags; ++a) all[static_cast<size_t>(a)] = a;
  FitOptions fo;
  fo.optimizer = Optimizer::adam;
  fo.epochs = 300;
  fo.learning_rate = 0.02;
  fo.batch_bags = 20;
  fo.threads = 2;
  fit(model, data, all, {}, fo);

  PredictOptions po;
  po.threads = 2;
  const Prediction p = predict(model, data.inputs, po);
  Vector cluster(N);
  for (Index i = 0; i < N; ++i) cluster[i] = y[bag_of[static_cast<size_t>(i)]] / 300;
  EXPECT_GT(correlation(p.mean, truth), 0.9);
  EXPECT_LT(mean_squared_error(p.mean, truth), 0.7 * mean_squared_error(cluster, truth));
  const Vector totals = predicted_bag_totals(model, data, all, 2, false);
  EXPECT_LT(bag_log_mse(y, totals), 0.05);
}

}  // namespace vbagg::binomial_test
