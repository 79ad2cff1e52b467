// Finite-difference checks of the analytic ELBO gradient for every likelihood x link x kernel x
// covariance-mode combination, on random problems with uneven bag sizes.
#include <gtest/gtest.h>

#include "core/objective.hpp"
#include "test_util.hpp"

namespace vbagg::gradient_test {

std::vector<test::SpecCase> likelihood_cases() { return test::all_specs(); }

const Index kCov = 2, kCoords = 2, kD = kCov + kCoords;

std::vector<std::pair<std::string, Kernel>> kernel_cases() {
  return {
      {"rbf", make_kernel("rbf", "none", kD, 0)},
      {"ard", make_kernel("ard", "none", kD, 0)},
      {"matern12", make_kernel("matern12", "none", kD, 0)},
      {"matern32", make_kernel("matern32", "none", kD, 0)},
      {"matern52", make_kernel("matern52", "none", kD, 0)},
      {"sum_ard_matern32", make_kernel("ard", "matern32", kCov, kCoords)},
      // An rbf on each covariate beside the ard over both, and the space part.
      {"ard_additive_matern32", make_kernel("ard+additive", "matern32", kCov, kCoords)},
      // Space x (seasonal + trend) on one coordinate and the time inputs: a product term alone.
      {"space_time", make_kernel("none", "matern32", 0, kD - kTimeInputs, "seasonal+trend")},
      // The same with the cycle as its seasonal part (the inputs are not on the circle: it reads their phase).
      {"space_time_cycle", make_kernel("none", "matern32", 0, kD - kTimeInputs, "seasonal+trend", "cycle")},
      // Each time part with a space kernel of its own: a sum of two product terms.
      {"space_time_separate",
       make_kernel("none", "matern32", 0, kD - kTimeInputs, "seasonal+trend", "cycle", "separate")},
  };
}

using test::numeric_gradient;

class GradientTest : public ::testing::TestWithParam<std::tuple<size_t, size_t>> {};

TEST_P(GradientTest, MatchesFiniteDifferences) {
  const auto lik = likelihood_cases()[std::get<0>(GetParam())];
  const auto ker = kernel_cases()[std::get<1>(GetParam())];
  const unsigned seed = 17 + 31 * static_cast<unsigned>(std::get<0>(GetParam()) * 10 + std::get<1>(GetParam()));
  const Dataset data = test::random_dataset(6, 2, 15, kD, lik.spec.likelihood, seed);
  const Model model = test::random_model(lik.spec, ker.second, 5, kD, seed + 1);

  // A minibatch of four bags exercises the n/|B| scaling as well.
  const std::vector<Index> bags = {4, 0, 5, 2};
  const double scale = 6.0 / 4.0;
  Vector analytic;
  elbo(model, data, bags, scale, &analytic);
  const Vector numeric = numeric_gradient(model, data, bags, scale);
  ASSERT_EQ(analytic.size(), numeric.size());
  ASSERT_TRUE(analytic.allFinite());
  const double rel = (analytic - numeric).norm() / numeric.norm();
  Index worst;
  (analytic - numeric).cwiseAbs().maxCoeff(&worst);
  EXPECT_LE(rel, 1e-6) << lik.name << " x " << ker.first << ": worst parameter " << model.param_names()[worst]
                       << " analytic " << analytic[worst] << " numeric " << numeric[worst];
}

INSTANTIATE_TEST_SUITE_P(AllCombinations, GradientTest,
                         ::testing::Combine(::testing::Range<size_t>(0, likelihood_cases().size()),
                                            ::testing::Range<size_t>(0, kernel_cases().size())),
                         [](const auto& info) {
                           return likelihood_cases()[std::get<0>(info.param)].name + "_" +
                                  kernel_cases()[std::get<1>(info.param)].first;
                         });

// Splitting bags into pixel blocks, with and without keeping the blocks' kernel matrices for the
// backward pass, must not change the objective or its gradient.
TEST(GradientBlocks, BlockingAndRecomputationAgree) {
  for (const auto& lik : likelihood_cases()) {
    const Dataset data = test::random_dataset(5, 10, 40, kD, lik.spec.likelihood, 77);
    const Model model = test::random_model(lik.spec, make_kernel("ard", "matern32", kCov, kCoords), 6, kD, 78);
    ObjectiveOptions whole, small_cached, small_recomputed;
    small_cached.block = 7;
    small_recomputed.block = 7;
    small_recomputed.cache_mb = 0;
    Vector g0, g1, g2;
    const double v0 = elbo(model, data, &g0, whole).elbo;
    const double v1 = elbo(model, data, &g1, small_cached).elbo;
    const double v2 = elbo(model, data, &g2, small_recomputed).elbo;
    EXPECT_NEAR(v1, v0, 1e-12 * std::abs(v0)) << lik.name;
    EXPECT_NEAR(v2, v0, 1e-12 * std::abs(v0)) << lik.name;
    EXPECT_LE((g1 - g0).norm(), 1e-12 * g0.norm()) << lik.name;
    EXPECT_LE((g2 - g0).norm(), 1e-12 * g0.norm()) << lik.name;
  }
}

}  // namespace vbagg::gradient_test
