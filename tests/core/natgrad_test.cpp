// The data term's gradient with respect to q's moments, and the natural-gradient step built on it.
#include "core/natgrad.hpp"

#include <gtest/gtest.h>

#include <Eigen/Cholesky>

#include "core/fit.hpp"
#include "core/init.hpp"
#include "core/objective.hpp"
#include "core/param_layout.hpp"
#include "test_util.hpp"

namespace vbagg::natgrad_test {

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

// q's moments alone (ObjectiveOptions::q_moments_only, the polish's steps before its reading)
// skip the way back into the kernel: the same objective and bit for bit the same moment
// gradients as the full pass, for every variational spec (the sampled ones at the same draws),
// with blocks kept and recomputed, on two threads.
TEST(QMomentsGradient, AloneIsTheFullPassesMomentGradient) {
  std::vector<ModelSpec> all;
  for (const auto& c : test::all_specs())
    if (!c.spec.map_estimate) all.push_back(c.spec);
  for (const ModelSpec& spec : all) {
    const Dataset data = test::random_dataset(7, 2, 12, kD, spec.likelihood, 41);
    const Model model = test::random_model(spec, make_kernel("ard", "none", kD, 0), kM, kD, 42);
    const std::vector<Index> bags = {0, 2, 3, 5, 6};
    for (double cache_mb : {256.0, 0.0}) {
      ObjectiveOptions full;
      full.threads = 2;
      full.block = 4;
      full.cache_mb = cache_mb;
      full.draw_seed = 9;
      test::expect_q_moments_alone_as_full(model, data, bags, full,
                                           to_string(spec.likelihood) + "/" + to_string(spec.link) + "/" +
                                               to_string(spec.expectation) + "/" + to_string(spec.covariance));
    }
  }
}

// Without q_moments_gradient, or for a MAP estimate (no covariance), q's moments alone are refused.
TEST(QMomentsGradient, AloneNeedsAVariationalQ) {
  const ModelSpec spec = test::spec_of(LikelihoodKind::poisson, Link::exp, CovarianceMode::nystrom);
  const Dataset data = test::random_dataset(4, 2, 6, kD, spec.likelihood, 43);
  const Model model = test::random_model(spec, make_kernel("ard", "none", kD, 0), kM, kD, 44);
  ObjectiveOptions opt;
  opt.q_moments_only = true;
  Vector g;
  EXPECT_THROW(elbo(model, data, &g, opt), std::invalid_argument);
  ModelSpec map = spec;
  map.map_estimate = true;
  map.prior_precision = 2.0;
  const Model point = test::random_model(map, make_kernel("ard", "none", kD, 0), kM, kD, 44);
  opt.q_moments_gradient = true;
  EXPECT_THROW(elbo(point, data, &g, opt), std::invalid_argument);
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

// The parameters after q's (mean and kernel) after every epoch of a natgrad fit.
std::vector<Vector> hyperparameters_by_epoch(Model& model, const Dataset& data, int epochs) {
  FitOptions o;
  o.optimizer = Optimizer::natgrad;
  o.epochs = epochs;
  o.batch_bags = 4;
  o.natgrad_step = 0.3;
  o.learning_rate = 0.05;
  const ParamSlice q = param_slice(model, ParamBlockId::q_chol);
  const Index after_q = q.offset + q.size;
  std::vector<Vector> out{model.pack().tail(model.num_params() - after_q)};
  o.on_epoch = [&](const EpochInfo&) {
    out.push_back(model.pack().tail(model.num_params() - after_q));
    return true;
  };
  std::vector<Index> all(static_cast<size_t>(data.num_bags()));
  for (Index a = 0; a < data.num_bags(); ++a) all[static_cast<size_t>(a)] = a;
  fit(model, data, all, {}, o);
  return out;
}

// From the prior, the kernel and mean wait two epochs while q reaches the data (their gradients
// there would set Adam's scale for the rest of the fit); from a fitted q they move at once.
TEST(NaturalGradientFit, HoldsTheKernelWhileQLeavesThePrior) {
  const ModelSpec spec = test::spec_of(LikelihoodKind::poisson, Link::exp, CovarianceMode::nystrom);
  const Dataset data = test::random_dataset(12, 3, 10, kD, spec.likelihood, 31);
  Model model = test::random_model(spec, make_kernel("ard", "none", kD, 0), kM, kD, 32);
  const Model fitted_q = model;
  model.q_mean.setZero();
  model.q_chol.setIdentity();
  const std::vector<Vector> from_prior = hyperparameters_by_epoch(model, data, 20);
  EXPECT_EQ(from_prior[1], from_prior[0]);
  EXPECT_EQ(from_prior[2], from_prior[0]);
  EXPECT_GT((from_prior[3] - from_prior[2]).norm(), 1e-4);
  Model resumed = fitted_q;
  const std::vector<Vector> from_fit = hyperparameters_by_epoch(resumed, data, 20);
  EXPECT_GT((from_fit[1] - from_fit[0]).norm(), 1e-4);
  // A fit too short to spare the epochs does not hold them.
  Model short_fit = fitted_q;
  short_fit.q_mean.setZero();
  short_fit.q_chol.setIdentity();
  const std::vector<Vector> brief = hyperparameters_by_epoch(short_fit, data, 5);
  EXPECT_GT((brief[1] - brief[0]).norm(), 1e-4);
}

// Natural-gradient steps on two bags at a time overshoot where the exp link's curvature grows;
// without a guard q's mean ran off and the epoch objective reached -1e266 while staying finite.
// A step that diverges is rolled back with halved steps, so the fit stays near its start's scale.
TEST(NaturalGradientFit, RollsBackDivergedSteps) {
  for (unsigned seed : {2u, 3u, 6u}) {
    Dataset data = test::random_dataset(40, 5, 60, kD, LikelihoodKind::poisson, seed);
    for (Index a = 0; a < data.num_bags(); a += 5) data.response[a] *= 200;  // a few large counts
    InitOptions init;
    init.inducing = 15;
    Model model = init_model(ModelSpec{}, make_kernel("ard", "none", kD, 0), data, init);
    const double start = elbo(model, data, nullptr).elbo;
    FitOptions o;
    o.optimizer = Optimizer::natgrad;
    o.natgrad_step = 0.3;
    o.batch_bags = 2;
    o.epochs = 30;
    o.learning_rate = 0.05;
    double worst = 0;
    o.on_epoch = [&](const EpochInfo& e) {
      worst = std::min(worst, e.elbo);
      return true;
    };
    std::vector<Index> all(static_cast<size_t>(data.num_bags()));
    for (Index a = 0; a < data.num_bags(); ++a) all[static_cast<size_t>(a)] = a;
    const FitResult r = fit(model, data, all, {}, o);
    EXPECT_GT(r.recovered_steps, 0) << "seed " << seed;
    EXPECT_GT(worst, 1e7 * start) << "seed " << seed;
    ASSERT_TRUE(model.pack().allFinite()) << "seed " << seed;
    EXPECT_GT(elbo(model, data, nullptr).elbo, 1e7 * start) << "seed " << seed;
  }
}

// A data term that rewards variance (grad_cov with a positive direction, as a unit effect shared by
// several months gives) would take the precision close to singular. The step is refused unless
// the new precision keeps (1 - step)/2 of the old, so the variance grows at most 2/(1 - step)-fold
// per step; a smaller step is taken, and a term that penalises variance is never refused.
TEST(NaturalGradient, RefusesAStepThatNearlyLosesThePrecision) {
  const ModelSpec spec = test::spec_of(LikelihoodKind::poisson, Link::exp, CovarianceMode::nystrom);
  Model model = test::random_model(spec, make_kernel("ard", "none", kD, 0), kM, kD, 3);
  model.q_mean.setZero();
  model.q_chol = Matrix::Identity(kM, kM);  // S = P = I
  Matrix rewards = Matrix::Zero(kM, kM);
  rewards(0, 0) = 0.9;  // dELBO/dS: P' = I - 1.8 step e0 e0^T (+ the prior's pull, zero at S = I)
  const Model before = model;
  // step 0.5: P'(0,0) = 0.1 is positive, yet under (1 - 0.5)/2 = 0.25: a ten-fold variance, refused.
  EXPECT_FALSE(natural_gradient_step(model, Vector::Zero(kM), rewards, 0.5));
  EXPECT_EQ(model.q_chol, before.q_chol);
  EXPECT_EQ(model.q_mean, before.q_mean);
  // step 0.25: P'(0,0) = 0.55 >= 0.375, taken; the variance is 1/0.55.
  ASSERT_TRUE(natural_gradient_step(model, Vector::Zero(kM), rewards, 0.25));
  const Matrix S = model.q_chol * model.q_chol.transpose();
  EXPECT_NEAR(S(0, 0), 1 / 0.55, 1e-12);
  EXPECT_NEAR(S(1, 1), 1.0, 1e-12);
  // A penalty on the variance however large: the precision only grows, never refused.
  model = before;
  ASSERT_TRUE(natural_gradient_step(model, Vector::Zero(kM), -1e6 * Matrix::Identity(kM, kM), 0.9));
  EXPECT_NEAR((model.q_chol * model.q_chol.transpose())(0, 0), 1 / (0.1 + 0.9 * (1 + 2e6)), 1e-15);
}

TEST(NaturalGradient, RefusesAMapEstimate) {
  ModelSpec spec = test::spec_of(LikelihoodKind::poisson, Link::exp, CovarianceMode::nystrom);
  spec.map_estimate = true;
  Model model = test::random_model(spec, make_kernel("ard", "none", kD, 0), kM, kD, 3);
  EXPECT_THROW(natural_gradient_step(model, Vector::Zero(kM), Matrix::Zero(kM, kM), 0.5), ConfigError);
}

}  // namespace vbagg::natgrad_test
