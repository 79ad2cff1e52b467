// The linear mean's start (core/linear_start.hpp): a Poisson regression of bag counts, checked
// where its answer is known.
#include "core/linear_start.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/init.hpp"
#include "core/kernel.hpp"
#include "test_util.hpp"

namespace vbagg {
namespace {

const Index kInputs = 3;

// Bags of 1 to 30 pixels with random covariates, people and coverage; each bag's count is its
// expected count under (c, beta) exactly, which makes (c, beta) the regression's unique optimum.
Dataset counts_of(double c, const Vector& beta, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::uniform_int_distribution<int> size(1, 30);
  std::uniform_real_distribution<double> unif(0.2, 1.0);
  std::vector<Index> bag_of;
  for (Index a = 0; a < 60; ++a)
    for (int k = size(rng); k > 0; --k) bag_of.push_back(a);
  const Index n = static_cast<Index>(bag_of.size());
  const Matrix X = Matrix::NullaryExpr(kInputs + 2, n, [&](Index, Index) { return normal(rng); });
  const Vector people = Vector::NullaryExpr(n, [&](Index) { return 1000 * unif(rng); });
  Vector y = Vector::Zero(60);
  Dataset data = make_dataset(X, people, bag_of, y);
  data.coverage = Vector::NullaryExpr(n, [&](Index) { return unif(rng); });
  for (Index a = 0; a < data.num_bags(); ++a)
    for (Index i = data.bag_begin(a); i < data.bag_begin(a) + data.bag_size(a); ++i)
      data.response[a] +=
          data.coverage[i] * data.population[i] * std::exp(c + data.inputs.col(i).head(kInputs).dot(beta));
  return data;
}

using test::all_bags;

TEST(LinearStart, RecoversTheRateWhoseExpectedCountsItIsGiven) {
  const Vector truth = (Vector(kInputs) << 0.6, -0.4, 0.25).finished();
  const Dataset data = counts_of(-3.0, truth, 7);
  double c = 0;
  Vector beta;
  ASSERT_TRUE(poisson_regression(data, all_bags(data), kInputs, 0.0, nullptr, c, beta));
  EXPECT_NEAR(c, -3.0, 1e-8);
  EXPECT_LT((beta - truth).cwiseAbs().maxCoeff(), 1e-8);
}

TEST(LinearStart, ThePriorShrinksTheCoefficients) {
  const Vector truth = (Vector(kInputs) << 0.6, -0.4, 0.25).finished();
  const Dataset data = counts_of(-3.0, truth, 7);
  double c = 0, c_loose = 0;
  Vector tight, loose;
  ASSERT_TRUE(poisson_regression(data, all_bags(data), kInputs, 1e-3, nullptr, c, tight));
  ASSERT_TRUE(poisson_regression(data, all_bags(data), kInputs, 1.0, nullptr, c_loose, loose));
  EXPECT_LT(tight.cwiseAbs().maxCoeff(), 0.01);
  EXPECT_LT((loose - truth).cwiseAbs().maxCoeff(), 0.01);  // 10^6 expected cases outweigh N(0, 1)
}

TEST(LinearStart, CountsWithoutCasesLeaveTheStartAlone) {
  Dataset data = counts_of(-3.0, Vector::Zero(kInputs), 3);
  data.response.setZero();
  double c = 5;
  Vector beta = Vector::Constant(kInputs, 2.0);
  EXPECT_FALSE(poisson_regression(data, all_bags(data), kInputs, 1.0, nullptr, c, beta));
  EXPECT_EQ(c, 5);
  EXPECT_EQ(beta, Vector::Constant(kInputs, 2.0));
}

TEST(LinearStart, InitModelStartsTheLinearMeanFromTheRegression) {
  const Vector truth = (Vector(kInputs) << 0.6, -0.4, 0.25).finished();
  const Dataset data = counts_of(-3.0, truth, 11);
  ModelSpec spec = test::spec_of(LikelihoodKind::poisson, Link::exp, CovarianceMode::nystrom);
  spec.linear_inputs = kInputs;
  spec.linear_prior_sd = 1e6;
  InitOptions init;
  init.inducing = 10;
  const Kernel kernel = make_kernel("ard", "matern32", kInputs, 2);
  const Model m = init_model(spec, kernel, data, init);
  // The likelihood's offset of the mean from the log rate (the prior variance's 1/2) is kept.
  const double rate = data.response.sum() / data.bag_weights().sum();
  double c = 0;
  Vector beta;
  ASSERT_TRUE(poisson_regression(data, all_bags(data), kInputs, 1e6, nullptr, c, beta));
  EXPECT_NEAR(m.mean, c - 0.5, 1e-12);
  EXPECT_EQ(m.linear_of(0), beta);
  EXPECT_LT((beta - truth).cwiseAbs().maxCoeff(), 1e-6);
  EXPECT_NE(std::log(rate) - 0.5, m.mean);

  // Variational fixed effects keep their start: q holds them.
  spec.fixed_effects = FixedEffects::variational;
  EXPECT_EQ(init_model(spec, kernel, data, init).mean, std::log(rate) - 0.5);
}

}  // namespace
}  // namespace vbagg
