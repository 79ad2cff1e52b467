// The ELBO against independent computations: Monte Carlo expectations of the bag log-likelihood,
// the dense (unwhitened) posterior, a direct KL, and exact vs nystrom covariance.
#include "core/objective.hpp"

#include <gtest/gtest.h>

#include <Eigen/Cholesky>
#include <Eigen/LU>
#include <random>

#include "core/likelihood.hpp"
#include "test_util.hpp"

namespace vbagg {
namespace {

// Dense posterior of f over the pixels of one bag, computed from the unwhitened formulas
// q(u) = N(mu + L_W m_v, L_W S_v L_W^T): mean mu + K_aW K_WW^{-1}(eta_u - mu),
// cov K_aa - K_aW K_WW^{-1} K_Wa + K_aW K_WW^{-1} Sigma_u K_WW^{-1} K_Wa.
// With nystrom_cov, also the nystrom covariance diag(K_aa - Q_aa) + K_aW K_WW^{-1} Sigma_u K_WW^{-1} K_Wa.
void dense_posterior(const Model& model, const Matrix& Xa, Vector& mean, Matrix& cov, Matrix* nystrom_cov = nullptr) {
  Matrix Kww, Kwa, Kaa;
  model.kernel.cross(model.inducing, model.inducing, Kww);
  Kww.diagonal().array() += model.jitter * model.kernel.diag_value();
  model.kernel.cross(model.inducing, Xa, Kwa);
  model.kernel.cross(Xa, Xa, Kaa);
  const Eigen::LLT<Matrix> llt(Kww);
  const Matrix L = llt.matrixL();
  const Matrix Sv = model.q_chol * model.q_chol.transpose();
  const Matrix Sigma_u = L * Sv * L.transpose();
  const Vector eta_minus_mu = L * model.q_mean;
  const Matrix KinvKwa = llt.solve(Kwa);
  mean = KinvKwa.transpose() * eta_minus_mu;
  mean.array() += model.mean;
  const Matrix Qaa = Kwa.transpose() * KinvKwa;
  cov = Kaa - Qaa + KinvKwa.transpose() * Sigma_u * KinvKwa;
  if (nystrom_cov) {
    *nystrom_cov = KinvKwa.transpose() * Sigma_u * KinvKwa;
    nystrom_cov->diagonal() += (Kaa - Qaa).diagonal();
  }
}

// Monte Carlo estimate of E_q log Poisson(y | sum_i p_i Psi(f_i)) for one bag.
double mc_expected_loglik(const Vector& mean, const Matrix& cov, const Vector& p, double y, Link link, int samples,
                          double* stderr_out) {
  Matrix C = cov;
  C.diagonal().array() += 1e-10;
  const Matrix L = Eigen::LLT<Matrix>(C).matrixL();
  std::mt19937_64 rng(5);
  std::normal_distribution<double> normal;
  double sum = 0, sum2 = 0;
  Vector z(mean.size());
  for (int s = 0; s < samples; ++s) {
    for (Index i = 0; i < z.size(); ++i) z[i] = normal(rng);
    const Vector f = mean + L * z;
    const Vector lam = link == Link::exp ? Vector(f.array().exp()) : Vector(f.array().square());
    const double eta = p.dot(lam);
    const double ll = y * std::log(eta) - eta - std::lgamma(y + 1);
    sum += ll;
    sum2 += ll * ll;
  }
  const double m = sum / samples;
  *stderr_out = std::sqrt((sum2 / samples - m * m) / samples);
  return m;
}

TEST(Objective, MarginalsMatchDensePosterior) {
  const Index D = 3;
  const Dataset data = test::random_dataset(3, 5, 12, D, LikelihoodKind::poisson, 11);
  const Model model = test::random_model(test::spec_of(LikelihoodKind::poisson, Link::exp, CovarianceMode::exact),
                                         make_kernel("ard", "none", D, 0), 6, D, 12);
  const Posterior post = compute_posterior(model);
  Vector m, v, mean;
  Matrix cov;
  latent_marginals(model, post, data.inputs, m, v);
  dense_posterior(model, data.inputs, mean, cov);
  EXPECT_LT((m - mean).cwiseAbs().maxCoeff(), 1e-9);
  EXPECT_LT((v - cov.diagonal()).cwiseAbs().maxCoeff(), 1e-9);
}

TEST(Objective, KlMatchesDirectGaussianKl) {
  const Index D = 2, M = 7;
  const Model model = test::random_model(test::spec_of(LikelihoodKind::poisson, Link::exp, CovarianceMode::exact),
                                         make_kernel("rbf", "none", D, 0), M, D, 3);
  // KL(N(eta_u, Sigma_u) || N(mu, K_WW)) computed with dense inverses and log-determinants: the
  // whitening must leave it unchanged.
  Matrix Kww;
  model.kernel.cross(model.inducing, model.inducing, Kww);
  Kww.diagonal().array() += model.jitter * model.kernel.diag_value();
  const Matrix Lw = Eigen::LLT<Matrix>(Kww).matrixL();
  const Matrix Sigma = Lw * model.q_chol * model.q_chol.transpose() * Lw.transpose();
  const Vector diff = Lw * model.q_mean;
  const Matrix Kinv = Kww.inverse();
  const double direct = 0.5 * ((Kinv * Sigma).trace() + diff.dot(Kinv * diff) - M + std::log(Kww.determinant()) -
                               std::log(Sigma.determinant()));
  EXPECT_NEAR(kl_divergence(model, nullptr), direct, 1e-8 * std::abs(direct));
  Model prior = model;
  prior.q_mean.setZero();
  prior.q_chol.setIdentity();
  EXPECT_NEAR(kl_divergence(prior, nullptr), 0.0, 1e-12);
}

TEST(Objective, JensenBoundIsBelowMonteCarlo) {
  const Index D = 3;
  Dataset data = test::random_dataset(5, 3, 20, D, LikelihoodKind::poisson, 21);
  const Model model = test::random_model(test::spec_of(LikelihoodKind::poisson, Link::exp, CovarianceMode::exact),
                                         make_kernel("rbf", "none", D, 0), 6, D, 22);
  for (Index a = 0; a < data.num_bags(); ++a) {
    const Index b = data.bag_begin(a), n = data.bag_size(a);
    const Matrix Xa = data.inputs.middleCols(b, n);
    Vector mean;
    Matrix cov;
    dense_posterior(model, Xa, mean, cov);
    const Vector p = data.weights().segment(b, n);
    double se;
    const double mc = mc_expected_loglik(mean, cov, p, data.response[a], Link::exp, 200000, &se);
    const double bound = elbo(model, data, {a}, 1.0, nullptr).data_term;
    EXPECT_LE(bound, mc + 4 * se) << "bag " << a;
  }
}

TEST(Objective, ExponentialBoundIsBelowMonteCarlo) {
  const Index D = 2;
  Dataset data = test::random_dataset(4, 3, 12, D, LikelihoodKind::exponential, 25);
  ModelSpec spec = test::spec_of(LikelihoodKind::exponential, Link::exp, CovarianceMode::exact);
  const Model model = test::random_model(spec, make_kernel("matern32", "none", D, 0), 5, D, 26);
  std::mt19937_64 rng(8);
  std::normal_distribution<double> normal;
  for (Index a = 0; a < data.num_bags(); ++a) {
    const Index b = data.bag_begin(a), n = data.bag_size(a);
    Vector mean;
    Matrix cov;
    dense_posterior(model, data.inputs.middleCols(b, n), mean, cov);
    cov.diagonal().array() += 1e-10;
    const Matrix L = Eigen::LLT<Matrix>(cov).matrixL();
    const Vector w = data.weights().segment(b, n);
    const double y = data.response[a];
    // E log p(y | eta) with eta = sum w e^f, log p = -log eta - y / eta.
    double sum = 0, sum2 = 0;
    const int S = 200000;
    Vector z(n);
    for (int s = 0; s < S; ++s) {
      for (Index i = 0; i < n; ++i) z[i] = normal(rng);
      const double eta = w.dot((mean + L * z).array().exp().matrix());
      const double ll = -std::log(eta) - y / eta;
      sum += ll;
      sum2 += ll * ll;
    }
    const double mc = sum / S, se = std::sqrt((sum2 / S - mc * mc) / S);
    EXPECT_LE(elbo(model, data, {a}, 1.0, nullptr).data_term, mc + 4 * se) << "bag " << a;
  }
}

TEST(Objective, TaylorIsCloseToMonteCarloOnLargeCounts) {
  const Index D = 3;
  Dataset data = test::random_dataset(4, 20, 40, D, LikelihoodKind::poisson, 31);
  Model model = test::random_model(test::spec_of(LikelihoodKind::poisson, Link::square, CovarianceMode::exact),
                                   make_kernel("rbf", "none", D, 0), 6, D, 32);
  model.mean = 6.0;  // rates around 36 per pixel: bag totals in the thousands
  model.q_chol *= 0.3;
  for (Index a = 0; a < data.num_bags(); ++a) {
    const Index b = data.bag_begin(a), n = data.bag_size(a);
    Vector mean;
    Matrix cov, nystrom_cov;
    dense_posterior(model, data.inputs.middleCols(b, n), mean, cov, &nystrom_cov);
    const Vector p = data.weights().segment(b, n);
    // A count near the expected total, as in a well-fitted model.
    data.response[a] = std::round(p.dot(mean.array().square().matrix() + cov.diagonal()));
    // Each mode approximates the expectation under its own covariance of f.
    for (auto mode : {CovarianceMode::exact, CovarianceMode::nystrom}) {
      double se;
      const double mc = mc_expected_loglik(mean, mode == CovarianceMode::exact ? cov : nystrom_cov, p, data.response[a],
                                           Link::square, 100000, &se);
      model.spec.covariance = mode;
      const double taylor = elbo(model, data, {a}, 1.0, nullptr).data_term;
      EXPECT_NEAR(taylor, mc, 0.05 + 4 * se) << "bag " << a << " y " << data.response[a] << " mode " << to_string(mode);
    }
  }
}

TEST(Objective, ExactAndNystromAgreeWhenInducingPointsArePixels) {
  const Index D = 2;
  for (auto lik : {LikelihoodKind::poisson, LikelihoodKind::normal}) {
    const Link link = lik == LikelihoodKind::poisson ? Link::square : Link::identity;
    const Dataset data = test::random_dataset(4, 3, 8, D, lik, 41);
    Model model = test::random_model(test::spec_of(lik, link, CovarianceMode::exact),
                                     make_kernel("matern52", "none", D, 0), 4, D, 42);
    // Replace W by the pixels themselves (M = N) with a fresh q of the right size.
    const Index N = data.num_pixels();
    model.inducing = data.inputs;
    model.jitter = 1e-10;
    std::mt19937_64 rng(1);
    std::normal_distribution<double> normal;
    model.q_mean = Vector::NullaryExpr(N, [&](Index) { return 0.3 * normal(rng); });
    model.q_chol = 0.5 * Matrix::Identity(N, N);
    for (Index j = 0; j < N; ++j)
      for (Index i = j + 1; i < N; ++i) model.q_chol(i, j) = 0.05 * normal(rng);
    model.spec.covariance = CovarianceMode::exact;
    const double exact = elbo(model, data, nullptr).data_term;
    model.spec.covariance = CovarianceMode::nystrom;
    const double nystrom = elbo(model, data, nullptr).data_term;
    EXPECT_NEAR(exact, nystrom, 1e-6 * std::abs(exact)) << to_string(lik);
  }
}

TEST(Objective, NystromDiffersFromExactWithFewInducingPoints) {
  // The two modes are distinct computations: with M << N they must not coincide.
  const Index D = 2;
  const Dataset data = test::random_dataset(4, 10, 20, D, LikelihoodKind::poisson, 51);
  Model model = test::random_model(test::spec_of(LikelihoodKind::poisson, Link::square, CovarianceMode::exact),
                                   make_kernel("rbf", "none", D, 0), 3, D, 52);
  const double exact = elbo(model, data, nullptr).data_term;
  model.spec.covariance = CovarianceMode::nystrom;
  const double nystrom = elbo(model, data, nullptr).data_term;
  EXPECT_GT(std::abs(exact - nystrom), 1e-6 * std::abs(exact));
}

TEST(Objective, MinibatchEstimateIsUnbiased) {
  // Averaging the scaled estimate over every single-bag minibatch gives the full-data ELBO.
  const Index D = 3;
  const Dataset data = test::random_dataset(7, 2, 9, D, LikelihoodKind::poisson, 61);
  const Model model = test::random_model(test::spec_of(LikelihoodKind::poisson, Link::exp, CovarianceMode::exact),
                                         make_kernel("rbf", "none", D, 0), 4, D, 62);
  const double full = elbo(model, data, nullptr).elbo;
  double avg = 0;
  for (Index a = 0; a < data.num_bags(); ++a) avg += elbo(model, data, {a}, 7.0, nullptr).elbo / 7.0;
  EXPECT_NEAR(avg, full, 1e-9 * std::abs(full));
}

TEST(Objective, NormalBagTermMatchesClosedForm) {
  // One pixel per bag, q at a point mass: l = log N(y; m, tau) exactly.
  const Index D = 1;
  Matrix X(1, 2);
  X << 0.0, 1.0;
  const Dataset data = make_dataset(X, Vector::Ones(2), {0, 1}, (Vector(2) << 0.7, -0.4).finished());
  ModelSpec spec = test::spec_of(LikelihoodKind::normal, Link::identity, CovarianceMode::exact);
  Model model = test::random_model(spec, make_kernel("rbf", "none", D, 0), 2, D, 1);
  model.inducing = X;
  model.jitter = 1e-12;
  const Posterior post = compute_posterior(model);
  Vector m, v;
  latent_marginals(model, post, X, m, v);
  const double tau = std::exp(model.likelihood_params[0]);
  double expect = 0;
  for (int a = 0; a < 2; ++a) {
    const double e = data.response[a] - m[a];
    expect += -0.5 * std::log(2 * M_PI * tau) - (e * e + v[a]) / (2 * tau);
  }
  EXPECT_NEAR(elbo(model, data, nullptr).data_term, expect, 1e-9);
}

}  // namespace
}  // namespace vbagg
