// Variational fixed effects against closed forms: with one pixel per bag, a Normal bag model and
// an inducing point at every pixel, the model is GP regression with the kernel
// k(x, x') + s^2 (1 + x_lin^T x'_lin) (the intercept's offset and beta integrated out), whose
// posterior and marginal likelihood are known exactly.
#include <gtest/gtest.h>

#include <Eigen/Cholesky>
#include <algorithm>
#include <cmath>
#include <random>

#include "core/natgrad.hpp"
#include "core/objective.hpp"
#include "test_util.hpp"

namespace vbagg::fixed_effects_test {

const Index kN = 9, kLinear = 2, kD = 3;
const double kPriorSd = 0.8, kNoiseVar = 0.3, kMu = 0.4;

struct Problem {
  Matrix X, Xnew;
  Vector y;
  Model model;
  Dataset data;
};

Problem make_problem() {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> normal;
  Problem p;
  p.X = Matrix::NullaryExpr(kD, kN, [&](Index, Index) { return normal(rng); });
  p.Xnew = Matrix::NullaryExpr(kD, 4, [&](Index, Index) { return 1.5 * normal(rng); });
  p.y = Vector::NullaryExpr(kN, [&](Index) { return 1.0 + normal(rng); });
  std::vector<Index> bag_of(static_cast<size_t>(kN));
  for (Index i = 0; i < kN; ++i) bag_of[static_cast<size_t>(i)] = i;
  p.data = make_dataset(p.X, Vector::Ones(kN), bag_of, p.y);

  ModelSpec spec = test::spec_of(LikelihoodKind::normal, Link::identity, CovarianceMode::exact);
  spec.linear_inputs = kLinear;
  spec.linear_prior_sd = kPriorSd;
  spec.fixed_effects = FixedEffects::variational;
  Model& m = p.model;
  m.spec = spec;
  m.kernel = make_kernel("ard", "none", kD, 0);
  m.kernel.set_params((Vector(4) << -0.3, 0.2, 0.5, -0.1).finished());
  m.inducing = p.X;  // every pixel: the Nystrom form is exact
  m.jitter = 1e-10;
  m.mean = kMu;
  m.q_mean = Vector::Zero(m.num_q());
  m.q_chol = Matrix::Identity(m.num_q(), m.num_q());
  m.likelihood_params = Vector::Constant(1, std::log(kNoiseVar));
  return p;
}

// The prior covariance of f between the columns of A and B, the fixed effects integrated out.
Matrix full_kernel(const Model& m, const Matrix& A, const Matrix& B) {
  Matrix K;
  m.kernel.cross(A, B, K);
  const Matrix Za = A.topRows(kLinear), Zb = B.topRows(kLinear);
  K.array() += kPriorSd * kPriorSd;
  K.noalias() += kPriorSd * kPriorSd * Za.transpose() * Zb;
  return K;
}

// One natural-gradient step of size 1 is exact for the Gaussian model: q is then optimal.
void fit(Problem& p) {
  ObjectiveOptions opt;
  opt.q_moments_gradient = true;
  Vector g;
  const ObjectiveValue v = elbo(p.model, p.data, &g, opt);
  ASSERT_TRUE(natural_gradient_step(p.model, v.grad_q_mean, v.grad_q_cov, 1.0));
}

TEST(VariationalFixedEffects, PosteriorIsGpRegressionWithTheirKernel) {
  Problem p = make_problem();
  fit(p);
  const Matrix K = full_kernel(p.model, p.X, p.X) + kNoiseVar * Matrix::Identity(kN, kN);
  const Matrix Ks = full_kernel(p.model, p.X, p.Xnew), Kss = full_kernel(p.model, p.Xnew, p.Xnew);
  const Eigen::LLT<Matrix> llt(K);
  const Vector mean = kMu + (Ks.transpose() * llt.solve(p.y - Vector::Constant(kN, kMu))).array();
  const Vector var = (Kss - Ks.transpose() * llt.solve(Ks)).diagonal();

  Vector m, v;
  latent_marginals(p.model, compute_posterior(p.model), p.Xnew, m, v);
  for (Index j = 0; j < p.Xnew.cols(); ++j) {
    EXPECT_NEAR(m[j], mean[j], 1e-6 * (1 + std::abs(mean[j]))) << "mean at point " << j;
    EXPECT_NEAR(v[j], var[j], 1e-6 * (1 + var[j])) << "variance at point " << j;
  }
  // The prior variance of the fixed effects reaches points far from the data: more than the
  // kernel's own variance there.
  EXPECT_GT(v.maxCoeff(), std::exp(-0.3));
}

// The ELBO at the optimal q is the log marginal likelihood of that GP (the bound is tight when
// the inducing points are the data): the kernel's hyperparameters are fitted with the fixed
// effects integrated out.
TEST(VariationalFixedEffects, OptimalElboIsTheMarginalLikelihood) {
  Problem p = make_problem();
  fit(p);
  const Matrix K = full_kernel(p.model, p.X, p.X) + kNoiseVar * Matrix::Identity(kN, kN);
  const Eigen::LLT<Matrix> llt(K);
  const Vector r = p.y - Vector::Constant(kN, kMu);
  const double logdet = 2 * llt.matrixLLT().diagonal().array().log().sum();
  const double log_marginal = -0.5 * r.dot(llt.solve(r)) - 0.5 * logdet - 0.5 * kN * std::log(2 * M_PI);
  EXPECT_NEAR(elbo(p.model, p.data, nullptr).elbo, log_marginal, 1e-6 * std::abs(log_marginal));
}

// Point and variational fixed effects differ only in q's size and the parameters they carry.
TEST(VariationalFixedEffects, LayoutHoldsTheEffectsInQ) {
  Problem p = make_problem();
  EXPECT_EQ(p.model.num_q(), kN + 1 + kLinear);
  EXPECT_EQ(p.model.linear_mean.size(), 0);
  const std::vector<std::string> names = p.model.param_names();
  EXPECT_EQ(std::count(names.begin(), names.end(), "q_mean[" + std::to_string(kN + kLinear) + "]"), 1);
  Model point = p.model;
  point.spec.fixed_effects = FixedEffects::point;
  EXPECT_THROW(compute_posterior(point), ConfigError);  // q still holds the effects' entries
  ModelSpec map = p.model.spec;
  map.map_estimate = true;
  EXPECT_THROW(map.validate(), ConfigError);
}

}  // namespace vbagg::fixed_effects_test
