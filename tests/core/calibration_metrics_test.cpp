// The empirical quantile and the randomised PIT that unit-count intervals and eval's calibration
// rest on, against their definitions and against calibrated and miscalibrated predictive draws.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "core/metrics.hpp"

namespace vbagg {
namespace {

TEST(CalibrationMetrics, EmpiricalQuantileInvertsTheEmpiricalCdf) {
  Vector s(10);
  for (Index i = 0; i < 10; ++i) s[i] = static_cast<double>(i + 1);
  EXPECT_EQ(empirical_quantile(s, 0.05), 1);
  EXPECT_EQ(empirical_quantile(s, 0.1), 1);
  EXPECT_EQ(empirical_quantile(s, 0.11), 2);
  EXPECT_EQ(empirical_quantile(s, 0.5), 5);
  EXPECT_EQ(empirical_quantile(s, 0.975), 10);
}

TEST(CalibrationMetrics, PitSplitsTiesByTheRandomNumber) {
  const Vector s = (Vector(5) << 1, 2, 2, 2, 3).finished();
  EXPECT_DOUBLE_EQ(randomized_pit(s, 2, 0.0), 0.2);  // F(1)
  EXPECT_DOUBLE_EQ(randomized_pit(s, 2, 1.0), 0.8);  // F(2)
  EXPECT_DOUBLE_EQ(randomized_pit(s, 0, 0.5), 0.0);
  EXPECT_DOUBLE_EQ(randomized_pit(s, 7, 0.5), 1.0);
}

// Counts drawn from the predictive distribution give a flat histogram; counts more spread than
// the predictive one (a model whose intervals are too narrow) pile up in the outer bins.
TEST(CalibrationMetrics, PitHistogramIsFlatOnlyWhenCalibrated) {
  std::mt19937_64 rng(3);
  const double mean = 40;
  Vector draws(20000);
  std::poisson_distribution<long long> poisson(mean);
  for (Index i = 0; i < draws.size(); ++i) draws[i] = static_cast<double>(poisson(rng));
  std::sort(draws.data(), draws.data() + draws.size());
  std::uniform_real_distribution<double> unif(0, 1);
  std::gamma_distribution<double> spread(2.0, mean / 2.0);  // negative binomial with r = 2
  std::vector<double> calibrated, overdispersed;
  for (int k = 0; k < 4000; ++k) {
    calibrated.push_back(randomized_pit(draws, static_cast<double>(poisson(rng)), unif(rng)));
    const double y = static_cast<double>(std::poisson_distribution<long long>(spread(rng))(rng));
    overdispersed.push_back(randomized_pit(draws, y, unif(rng)));
  }
  const std::vector<double> flat = unit_histogram(calibrated, 10), u = unit_histogram(overdispersed, 10);
  for (double f : flat) EXPECT_NEAR(f, 0.1, 0.02);
  EXPECT_GT(u.front() + u.back(), 0.6);
}

// The band of a calibrated model's coverage: per level the 5th and 95th percentiles of the draws'
// coverage, and the draws' calibration error (mean absolute distance from the levels).
TEST(CalibrationMetrics, CoverageBandOfDraws) {
  const std::vector<double> levels = {0.5, 0.9};
  Matrix c(20, 2);
  for (Index s = 0; s < 20; ++s) {
    c(s, 0) = 0.5 + 0.01 * static_cast<double>(s - 10);  // 0.40 ... 0.59
    c(s, 1) = 0.9;
  }
  const CoverageBand b = coverage_band(c, levels);
  ASSERT_EQ(b.low.size(), 2u);
  EXPECT_NEAR(b.low[0], 0.40, 1e-12);   // the 1st of 20 sorted (ceil(0.05 * 20) = 1)
  EXPECT_NEAR(b.high[0], 0.58, 1e-12);  // the 19th
  EXPECT_NEAR(b.low[1], 0.9, 1e-12);
  EXPECT_NEAR(b.high[1], 0.9, 1e-12);
  // Errors |0.01 (s - 10)| / 2: mean 0.01 * (10 + 9 + ... + 1 + 0 + 1 + ... + 9) / 2 / 20.
  EXPECT_NEAR(b.error_mean, 0.01 * 100.0 / 2.0 / 20.0, 1e-12);
  EXPECT_NEAR(b.error_p90, 0.01 * 9 / 2.0, 1e-12);  // the 18th of the sorted errors (0, 1, 1, 2, 2, ...)
  EXPECT_TRUE(coverage_band(Matrix(0, 2), levels).low.empty());
}

}  // namespace
}  // namespace vbagg
