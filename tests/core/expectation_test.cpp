// The expectations of the count bag terms (MODEL.md 4a, 4e, 4f) against brute-force Monte Carlo
// of E_q[log p(y_a | sum_i w_i e^{f_i})] with f drawn jointly from q's exact within-bag covariance.
#include <gtest/gtest.h>

#include <Eigen/Cholesky>
#include <cmath>
#include <limits>
#include <random>

#include "core/likelihood.hpp"
#include "core/likelihoods/count.hpp"
#include "core/objective.hpp"
#include "core/predict.hpp"
#include "test_util.hpp"

namespace vbagg::expectation_test {

const Index kD = 3;

// Mean and exact covariance of f over bag a's pixels.
void bag_moments(const Model& model, const Dataset& data, Index a, Vector& m, Matrix& C) {
  const Posterior post = compute_posterior(model);
  const auto X = data.inputs.middleCols(data.bag_begin(a), data.bag_size(a));
  Matrix Kwa, Kaa;
  model.kernel.cross(model.inducing, X, Kwa);
  model.kernel.cross(X, X, Kaa);
  m = (Kwa.transpose() * post.alpha).array() + model.mean;
  C = Kaa - Kwa.transpose() * post.Q * Kwa;
}

struct MonteCarlo {
  double mean, se;
};

// E[log p(y | mu)] over f ~ N(m, C), mu = sum w e^f, with `logp` the observation model.
template <class LogP>
MonteCarlo monte_carlo(const Vector& m, const Matrix& C, const Vector& w, int draws, LogP logp) {
  const Index n = m.size();
  const Matrix L = (C + 1e-10 * Matrix::Identity(n, n)).llt().matrixL();
  std::mt19937_64 rng(99);
  std::normal_distribution<double> normal;
  double sum = 0, sum2 = 0;
  Vector z(n);
  for (int s = 0; s < draws; ++s) {
    for (Index i = 0; i < n; ++i) z[i] = normal(rng);
    const Vector f = m + L * z;
    const double v = logp(w.dot(f.array().exp().matrix()));
    sum += v;
    sum2 += v * v;
  }
  const double mean = sum / draws;
  return {mean, std::sqrt((sum2 / draws - mean * mean) / draws)};
}

// log p(y | mu) of Poisson, or of the negative binomial with dispersion r.
double count_logp(LikelihoodKind lik, double y, double r, double mu) {
  if (lik == LikelihoodKind::poisson) return y * std::log(mu) - mu - std::lgamma(y + 1);
  return std::lgamma(y + r) - std::lgamma(r) - std::lgamma(y + 1) + r * std::log(r / (r + mu)) +
         y * std::log(mu / (r + mu));
}

double term_of(const ModelSpec& spec, const Model& base, const Dataset& data, Index a) {
  Model model = base;
  model.spec = spec;
  return elbo(model, data, std::vector<Index>{a}, 1.0, nullptr).data_term;
}

ModelSpec count_spec(LikelihoodKind lik, Expectation ex, CovarianceMode cov) {
  return test::spec_of(lik, Link::exp, cov, ex);
}

// The delta method sits far closer to the true expectation than the Jensen bound, in both
// covariance forms, for Poisson and for the negative binomial.
TEST(Expectation, DeltaMethodTracksMonteCarloFarBetterThanTheBound) {
  for (LikelihoodKind lik : {LikelihoodKind::poisson, LikelihoodKind::negative_binomial}) {
    const Dataset data = test::random_dataset(6, 3, 12, kD, lik, 41);
    Model model = test::random_model(count_spec(lik, Expectation::delta, CovarianceMode::exact),
                                     make_kernel("ard", "none", kD, 0), 6, kD, 42);
    model.mean = 2.0;  // expected counts of tens to hundreds, where the Jensen gap matters
    if (lik == LikelihoodKind::negative_binomial) model.likelihood_params[0] = std::log(20.0);
    const double r = lik == LikelihoodKind::negative_binomial ? std::exp(model.likelihood_params[0]) : 0;
    for (Index a = 0; a < data.num_bags(); ++a) {
      const double y = data.response[a];
      Vector m, w = data.weights().segment(data.bag_begin(a), data.bag_size(a));
      Matrix C;
      bag_moments(model, data, a, m, C);
      const MonteCarlo mc = monte_carlo(m, C, w, 100000, [&](double mu) { return count_logp(lik, y, r, mu); });
      const double bound = term_of(count_spec(lik, Expectation::bound, CovarianceMode::nystrom), model, data, a);
      const double exact = term_of(count_spec(lik, Expectation::delta, CovarianceMode::exact), model, data, a);
      const double nystrom = term_of(count_spec(lik, Expectation::delta, CovarianceMode::nystrom), model, data, a);
      const double gap = mc.mean - bound;
      EXPECT_GT(gap, 5 * mc.se) << "the bound is a lower bound, and here a loose one";
      EXPECT_LT(std::abs(exact - mc.mean), 0.25 * gap + 4 * mc.se)
          << to_string(lik) << " bag " << a << ": delta " << exact << " MC " << mc.mean << " bound " << bound;
      EXPECT_LT(std::abs(nystrom - mc.mean), 0.35 * gap + 4 * mc.se)
          << to_string(lik) << " bag " << a << ": delta (nystrom) " << nystrom << " MC " << mc.mean;
    }
  }
}

// For one pixel, E[log mu] = log w + m exactly, and the delta method reproduces it.
TEST(Expectation, DeltaMethodIsExactForOnePixel) {
  const Vector m = Vector::Constant(1, 1.3), s2 = Vector::Constant(1, 0.7), w = Vector::Constant(1, 2.5);
  const Matrix C = Matrix::Constant(1, 1, 0.7);
  const double y = 17;
  BagPosterior bag(m, s2, w, y);
  bag.C = &C;
  const ModelSpec spec = count_spec(LikelihoodKind::poisson, Expectation::delta, CovarianceMode::exact);
  const double expected = y * (std::log(2.5) + 1.3) - 2.5 * std::exp(1.3 + 0.35) - std::lgamma(y + 1);
  EXPECT_NEAR(bag_term(spec, Vector(), bag, nullptr), expected, 1e-12);
}

// As r grows the negative binomial tends to the Poisson term, under either expectation.
TEST(Expectation, NegativeBinomialTendsToPoisson) {
  const Dataset data = test::random_dataset(4, 3, 9, kD, LikelihoodKind::poisson, 7);
  for (Expectation ex : {Expectation::bound, Expectation::delta}) {
    Model nb = test::random_model(count_spec(LikelihoodKind::negative_binomial, ex, CovarianceMode::nystrom),
                                  make_kernel("rbf", "none", kD, 0), 5, kD, 8);
    Model poisson = nb;
    poisson.spec.likelihood = LikelihoodKind::poisson;
    poisson.likelihood_params.resize(0);
    const double b = elbo(poisson, data, nullptr).data_term;
    // Up to the dispersions a fit reaches on counts without overdispersion, where r log r is 1e17.
    for (double r : {1e9, 1e15}) {
      nb.likelihood_params[0] = std::log(r);
      EXPECT_NEAR(elbo(nb, data, nullptr).data_term, b, 1e-5 * std::abs(b)) << to_string(ex) << " r " << r;
    }
  }
}

// The negative binomial's log pmf, whole (count_nll) and split for the unit effect (constant +
// kernel), with its derivative in log r, against lgamma(y + r) / lgamma(r) summed as
// prod_k (r + k) for integer y: log p = sum_k log1p(k / r) - log y! + y log mu - (r + y) log1p(mu / r).
// Differencing lgamma(y + r) and lgamma(r) directly keeps no digit of it at r = 1e16.
TEST(Expectation, NegativeBinomialKeepsItsDigitsAtAnyDispersion) {
  const auto& nb = dynamic_cast<const CountLikelihood&>(likelihood_of(LikelihoodKind::negative_binomial));
  for (double r : {0.5, 37.5, 9.9e4, 1.01e5, 3e7, 1e12, 1e16})
    for (double y : {0.0, 1.0, 7.0, 250.0, 30000.0})
      for (double mu : {0.3, 40.0, 5000.0}) {
        double sum = 0, d_sum = 0;  // sum_k log1p(k / r) and its derivative in log r
        for (int k = 0; k < static_cast<int>(y); ++k) {
          sum += std::log1p(k / r);
          d_sum -= k / (r + k);
        }
        const double want = sum - std::lgamma(y + 1) + y * std::log(mu) - (r + y) * std::log1p(mu / r);
        const double d_want = d_sum - r * std::log1p(mu / r) + (r + y) * mu / (r + mu);
        const Vector params = Vector::Constant(1, std::log(r));
        const double tol = 1e-10 * std::max(1.0, std::abs(want));
        EXPECT_NEAR(-nb.count_nll(y, mu, params), want, tol) << "r " << r << " y " << y << " mu " << mu;
        Vector dc, dk;
        double d1 = 0, d2 = 0;
        const double split =
            nb.log_pmf_constant(y, params, &dc) + nb.log_pmf_kernel(y, std::log(mu), params, &d1, &d2, &dk);
        EXPECT_NEAR(split, want, tol) << "r " << r << " y " << y << " mu " << mu;
        EXPECT_NEAR(dc[0] + dk[0], d_want, 1e-8 * std::max(1.0, std::abs(d_want)))
            << "r " << r << " y " << y << " mu " << mu;
        EXPECT_NEAR(d1, y - (r + y) * mu / (r + mu), 1e-10 * std::max(1.0, y + mu));
      }
}

// The negative binomial's probabilities sum to one and have its mean and variance.
TEST(Expectation, NegativeBinomialPmfIsNormalised) {
  const auto& nb = dynamic_cast<const CountLikelihood&>(likelihood_of(LikelihoodKind::negative_binomial));
  const double mean = 37.5, r = 4.2;
  const Vector params = Vector::Constant(1, std::log(r));
  double total = 0, first = 0, second = 0;
  for (int y = 0; y < 5000; ++y) {
    const double p = std::exp(-nb.count_nll(y, mean, params));
    total += p;
    first += y * p;
    second += static_cast<double>(y) * y * p;
  }
  EXPECT_NEAR(total, 1.0, 1e-10);
  EXPECT_NEAR(first, mean, 1e-8);
  EXPECT_NEAR(second - first * first, mean + mean * mean / r, 1e-6);
}

// l_a approximates E_q[log p(y_a | mu_a)], and no expectation of log p(y | mu) exceeds its largest
// value, log p(y | mu = y): a term above it is an objective a fit can climb without limit. Checked
// for both count likelihoods, both expectations, with and without a unit effect, over posteriors
// from tight to wide whose expected count sits below, at and above the observed one, and for a bag
// of zero weight (a unit without population in its period), which adds exactly nothing.
TEST(Expectation, NoBagTermExceedsTheCountsLargestLikelihood) {
  std::mt19937_64 rng(61);
  std::normal_distribution<double> normal;
  const double none = std::numeric_limits<double>::quiet_NaN();
  for (LikelihoodKind lik : {LikelihoodKind::poisson, LikelihoodKind::negative_binomial})
    for (Expectation ex : {Expectation::bound, Expectation::delta})
      for (double log_sd : {none, -4.0, -0.5, 1.0})  // none: no unit effect
        for (double log_r : {-2.0, 2.0, 10.0}) {
          if (lik == LikelihoodKind::poisson && log_r != 2.0) continue;
          ModelSpec spec = count_spec(lik, ex, CovarianceMode::exact);
          spec.unit_effect = !std::isnan(log_sd);
          const Vector params = lik == LikelihoodKind::poisson ? Vector() : Vector::Constant(1, log_r);
          const double r = std::exp(log_r);
          for (double y : {0.0, 1.0, 30.0, 5000.0}) {
            const double largest = y == 0 ? 0.0 : count_logp(lik, y, r, y);
            for (Index n : {1, 3, 12})
              for (double scale : {1e-4, 0.01, 1.0, 10.0})
                for (double shift : {-5.0, 0.0, 5.0, none}) {  // none: zero weights
                  const Matrix A = Matrix::NullaryExpr(n, n, [&] { return normal(rng); });
                  const Matrix C = scale * (A * A.transpose() / static_cast<double>(n) + 0.1 * Matrix::Identity(n, n));
                  const Vector s2 = C.diagonal();
                  Vector w = Vector::NullaryExpr(n, [&] { return std::exp(normal(rng)); });
                  Vector m = Vector::NullaryExpr(n, [&] { return 0.3 * normal(rng); });
                  // E[mu] = e^shift max(y, 1).
                  m.array() +=
                      std::log(std::max(y, 1.0)) + shift - std::log((w.array() * (m + 0.5 * s2).array().exp()).sum());
                  if (std::isnan(shift)) w.setZero();
                  BagPosterior bag(m, s2, w, y);
                  bag.C = &C;
                  bag.has_unit_effect = spec.unit_effect;
                  bag.unit_log_sd = spec.unit_effect ? log_sd : 0.0;
                  const double term = bag_term(spec, params, bag, nullptr);
                  SCOPED_TRACE(to_string(lik) + " " + to_string(ex) + " log sd " + std::to_string(log_sd) + " log r " +
                               std::to_string(log_r) + " y " + std::to_string(y) + " n " + std::to_string(n) +
                               " scale " + std::to_string(scale) + " shift " + std::to_string(shift));
                  if (std::isnan(shift)) {
                    EXPECT_EQ(term, y == 0 ? 0.0 : -INFINITY);
                  } else {
                    EXPECT_LE(term, largest + 1e-9 * std::max(1.0, std::abs(largest)));
                  }
                }
          }
        }
}

// A model whose intensity overflows (here e^{1000}) cannot predict counts: the draws say so at
// once instead of looping inside the Poisson sampler.
TEST(Expectation, DrawsRefuseANonFiniteMean) {
  for (LikelihoodKind lik : {LikelihoodKind::poisson, LikelihoodKind::negative_binomial}) {
    const Dataset data = test::random_dataset(2, 3, 5, kD, lik, 3);
    Model model = test::random_model(count_spec(lik, Expectation::delta, CovarianceMode::nystrom),
                                     make_kernel("rbf", "none", kD, 0), 4, kD, 4);
    model.mean = 1000;
    const Vector w = data.weights().head(data.bag_size(0));
    EXPECT_THROW(bag_predictive_draws(model, data.inputs.leftCols(data.bag_size(0)), w, 10, 1), NumericalError)
        << to_string(lik);
  }
}

// q's within-bag covariance in the nystrom form the sampled expectation draws from: the exact
// posterior covariance with the prior residual K_aa - A^T A reduced to its diagonal.
Matrix nystrom_covariance(const Model& model, const Dataset& data, Index a) {
  const Posterior post = compute_posterior(model);
  const auto X = data.inputs.middleCols(data.bag_begin(a), data.bag_size(a));
  Matrix Kwa, Kaa;
  model.kernel.cross(model.inducing, X, Kwa);
  model.kernel.cross(X, X, Kaa);
  const Matrix C = Kaa - Kwa.transpose() * post.Q * Kwa;
  const Matrix T = post.B * Kwa;
  const Matrix TT = T.transpose() * T;
  Matrix out = TT;
  out.diagonal() = C.diagonal();  // residual d_i = s_i^2 - |t_i|^2 on the diagonal
  return out;
}

// The sampled expectation (MODEL.md 4e ii) is unbiased: its mean over many steps' fresh draws
// matches a 10^5-draw brute-force Monte Carlo of each bag's expected log likelihood (drawn with
// another generator from the same nystrom covariance), for Poisson and the negative binomial.
TEST(Expectation, SampledTermIsUnbiased) {
  for (LikelihoodKind lik : {LikelihoodKind::poisson, LikelihoodKind::negative_binomial}) {
    const Dataset data = test::random_dataset(3, 3, 10, kD, lik, 51);
    ModelSpec spec = count_spec(lik, Expectation::sample, CovarianceMode::nystrom);
    spec.samples = 50;
    Model model = test::random_model(spec, make_kernel("ard", "none", kD, 0), 6, kD, 52);
    model.mean = 1.0;
    const double r = lik == LikelihoodKind::negative_binomial ? std::exp(model.likelihood_params[0]) : 0;
    for (Index a = 0; a < data.num_bags(); ++a) {
      const double y = data.response[a];
      Vector m, w = data.weights().segment(data.bag_begin(a), data.bag_size(a));
      Matrix C;
      bag_moments(model, data, a, m, C);
      C = nystrom_covariance(model, data, a);
      const MonteCarlo mc = monte_carlo(m, C, w, 100000, [&](double mu) { return count_logp(lik, y, r, mu); });
      const test::StepAverage s = test::sampled_term_over_steps(model, data, a, 2000, 3);  // 2000 steps x 50 draws
      EXPECT_NEAR(s.mean, mc.mean, 4 * std::hypot(s.se, mc.se)) << to_string(lik) << " bag " << a;
    }
  }
}

// For the Normal bag model the expected log likelihood is exact in closed form: the sampled
// term's value and its q-moment gradient (used by natural-gradient steps, exact only in
// expectation) average to the closed form's.
TEST(Expectation, SampledNormalTermAveragesToTheClosedForm) {
  const Dataset data = test::random_dataset(4, 3, 8, kD, LikelihoodKind::normal, 61);
  ModelSpec exact = test::spec_of(LikelihoodKind::normal, Link::identity, CovarianceMode::nystrom);
  Model model = test::random_model(exact, make_kernel("ard", "none", kD, 0), 5, kD, 62);
  Model sampled = model;
  sampled.spec.expectation = Expectation::sample;
  sampled.spec.samples = 20;
  ObjectiveOptions opt;
  opt.q_moments_gradient = true;
  Vector g;
  const ObjectiveValue ref = elbo(model, data, &g, opt);
  const int steps = 3000;
  double value = 0;
  Matrix cov = Matrix::Zero(5, 5);
  Vector mean = Vector::Zero(5);
  for (int t = 0; t < steps; ++t) {
    opt.draw_step = static_cast<unsigned long long>(t);
    const ObjectiveValue v = elbo(sampled, data, &g, opt);
    value += v.data_term / steps;
    cov += v.grad_q_cov / steps;
    mean += v.grad_q_mean / steps;
  }
  EXPECT_NEAR(value, ref.data_term, 0.01 * std::abs(ref.data_term));
  EXPECT_LE((mean - ref.grad_q_mean).norm(), 0.03 * ref.grad_q_mean.norm());
  EXPECT_LE((cov - ref.grad_q_cov).norm(), 0.05 * ref.grad_q_cov.norm());
}

// Fresh draws every step, the same draws for the same step whatever the thread count.
TEST(Expectation, SampledDrawsDependOnTheStepOnly) {
  const Dataset data = test::random_dataset(6, 3, 10, kD, LikelihoodKind::poisson, 71);
  const Model model =
      test::random_model(count_spec(LikelihoodKind::poisson, Expectation::sample, CovarianceMode::nystrom),
                         make_kernel("ard", "none", kD, 0), 5, kD, 72);
  ObjectiveOptions one, two;
  two.threads = 2;
  one.draw_step = two.draw_step = 7;
  Vector g1, g2;
  const double v1 = elbo(model, data, &g1, one).elbo, v2 = elbo(model, data, &g2, two).elbo;
  EXPECT_EQ(v1, v2);
  EXPECT_TRUE(g1 == g2);
  one.draw_step = 8;
  EXPECT_NE(elbo(model, data, nullptr, one).elbo, v1);
}

}  // namespace vbagg::expectation_test
