// The data term's gradient with respect to q's moments, and the natural-gradient step built on it.
#include "core/natgrad.hpp"

#include <gtest/gtest.h>

#include <Eigen/Cholesky>

#include "core/objective.hpp"
#include "test_util.hpp"

namespace vbagg {
namespace {

const Index kD = 3, kM = 5;

// Every registered variational combination (the MAP variants have no q covariance). The sampled
// expectation is left out: at fixed draws it reads L_v, not only S_v = L_v L_v^T, so its q-moment
// gradient is exact only in expectation (checked in expectation_test.cpp).
std::vector<ModelSpec> specs() {
  std::vector<ModelSpec> out;
  for (const auto& c : test::all_specs())
    if (!c.spec.map_estimate && c.spec.expectation != Expectation::sample) {
      out.push_back(c.spec);
      out.back().learn_inducing = false;
    }
  return out;
}

double data_term(const Model& model, const Dataset& data, const std::vector<Index>& bags, double scale) {
  return scale * elbo(model, data, bags, scale, nullptr).data_term;
}

// d(data term)/dm and d/dS against central differences, S moved along symmetric directions.
TEST(QMomentsGradient, MatchesFiniteDifferences) {
  for (const ModelSpec& spec : specs()) {
    const Dataset data = test::random_dataset(6, 2, 12, kD, spec.likelihood, 5);
    const Model model = test::random_model(spec, make_kernel("ard", "none", kD, 0), kM, kD, 6);
    const std::vector<Index> bags = {1, 3, 4};
    const double scale = 2.0;
    ObjectiveOptions opt;
    opt.q_moments_gradient = true;
    Vector g;
    const ObjectiveValue v = elbo(model, data, bags, scale, &g, opt);
    const Index Mq = model.num_q();  // the inducing values, then any variational fixed effects
    ASSERT_EQ(v.grad_q_cov.rows(), Mq);
    const double h = 1e-5;
    for (Index k = 0; k < Mq; ++k) {
      Model plus = model, minus = model;
      plus.q_mean[k] += h;
      minus.q_mean[k] -= h;
      const double fd = (data_term(plus, data, bags, scale) - data_term(minus, data, bags, scale)) / (2 * h);
      EXPECT_NEAR(v.grad_q_mean[k], fd, 1e-6 * (1 + std::abs(fd))) << to_string(spec.likelihood) << " m[" << k << "]";
    }
    const Matrix S = model.q_chol * model.q_chol.transpose();
    for (Index i = 0; i < Mq; ++i)
      for (Index j = 0; j <= i; ++j) {
        Matrix E = Matrix::Zero(Mq, Mq);
        E(i, j) = E(j, i) = 1;
        auto at = [&](double t) {
          Model m = model;
          m.q_chol = Eigen::LLT<Matrix>(S + t * E).matrixL();
          return data_term(m, data, bags, scale);
        };
        const double fd = (at(h) - at(-h)) / (2 * h);
        const double analytic = (v.grad_q_cov.cwiseProduct(E)).sum();
        EXPECT_NEAR(analytic, fd, 1e-6 * (1 + std::abs(fd)))
            << to_string(spec.likelihood) << "/" << to_string(spec.link) << "/" << to_string(spec.covariance) << " S("
            << i << "," << j << ")";
      }
  }
}

// A Gaussian bag model is conjugate: one natural-gradient step of size 1 lands on the optimal q,
// where the gradient with respect to m_v and L_v vanishes.
TEST(NaturalGradient, UnitStepIsExactForTheGaussianBagModel) {
  for (const auto cov : {CovarianceMode::nystrom, CovarianceMode::exact}) {
    const ModelSpec spec = test::spec_of(LikelihoodKind::normal, Link::identity, cov);
    const Dataset data = test::random_dataset(8, 2, 10, kD, spec.likelihood, 11);
    Model model = test::random_model(spec, make_kernel("ard", "none", kD, 0), kM, kD, 12);
    ObjectiveOptions opt;
    opt.q_moments_gradient = true;
    Vector g0, g1;
    const ObjectiveValue v0 = elbo(model, data, &g0, opt);
    ASSERT_TRUE(natural_gradient_step(model, v0.grad_q_mean, v0.grad_q_cov, 1.0));
    const ObjectiveValue v1 = elbo(model, data, &g1, opt);
    const Index q = kM + kM * (kM + 1) / 2;
    EXPECT_GT(v1.elbo, v0.elbo);
    EXPECT_LE(g1.head(q).norm(), 1e-8 * g0.head(q).norm()) << to_string(cov);
  }
}

// For the Poisson bag model, steps on the full data increase the ELBO every time and drive the q
// gradient down (linearly: the curvature of the y log sum p e^m term is not in the step).
TEST(NaturalGradient, ConvergesForThePoissonBagModel) {
  const ModelSpec spec = test::spec_of(LikelihoodKind::poisson, Link::exp, CovarianceMode::nystrom);
  const Dataset data = test::random_dataset(10, 5, 20, kD, spec.likelihood, 21);
  Model model = test::random_model(spec, make_kernel("ard", "none", kD, 0), kM, kD, 22);
  ObjectiveOptions opt;
  opt.q_moments_gradient = true;
  Vector g;
  ObjectiveValue v = elbo(model, data, &g, opt);
  const Index q = kM + kM * (kM + 1) / 2;
  const double g_start = g.head(q).norm();
  double prev = v.elbo;
  for (int it = 0; it < 30; ++it) {
    ASSERT_TRUE(natural_gradient_step(model, v.grad_q_mean, v.grad_q_cov, it == 0 ? 0.01 : 1.0));
    v = elbo(model, data, &g, opt);
    EXPECT_GE(v.elbo, prev - 1e-9 * std::abs(prev)) << "step " << it;
    prev = v.elbo;
  }
  EXPECT_LE(g.head(q).norm(), 0.05 * g_start);
}

TEST(NaturalGradient, RefusesAMapEstimate) {
  ModelSpec spec = test::spec_of(LikelihoodKind::poisson, Link::exp, CovarianceMode::nystrom);
  spec.map_estimate = true;
  Model model = test::random_model(spec, make_kernel("ard", "none", kD, 0), kM, kD, 3);
  EXPECT_THROW(natural_gradient_step(model, Vector::Zero(kM), Matrix::Zero(kM, kM), 0.5), ConfigError);
}

}  // namespace
}  // namespace vbagg
