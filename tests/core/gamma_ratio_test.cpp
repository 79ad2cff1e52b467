// lgamma(y + r) - lgamma(r) - y log r against sum_k log1p(k / r), its value for integer y by
// another route, across the switch to Stirling's series at r = 1e3.
#include "core/gamma_ratio.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace vbagg::gamma_ratio_test {

TEST(GammaRatio, MatchesTheProductOfItsFactors) {
  for (double r : {1e-3, 0.5, 7.0, 999.0, 1001.0, 1e5, 3e7, 1e12, 1e17})
    for (double y : {0.0, 1.0, 2.0, 13.0, 400.0, 50000.0}) {
      double sum = 0, d_sum = 0;
      for (int k = 0; k < static_cast<int>(y); ++k) {
        sum += std::log1p(k / r);
        d_sum -= k / (r + k);
      }
      double d = 0;
      const double v = gamma_ratio(y, r, &d);
      EXPECT_NEAR(v, sum, 1e-11 * std::max(1.0, std::abs(sum))) << "r " << r << " y " << y;
      EXPECT_NEAR(d, d_sum, 1e-9 * std::max(1.0, std::abs(d_sum))) << "r " << r << " y " << y;
    }
}

// Non-integer counts (a survey's weighted positives) have no product form: the derivative is
// checked against central differences in log r instead, on both sides of the switch.
TEST(GammaRatio, DerivativeMatchesFiniteDifferences) {
  for (double r : {0.3, 40.0, 900.0, 1100.0, 1e9})
    for (double y : {0.5, 3.7, 812.25}) {
      const double h = 1e-4;
      const double fd = (gamma_ratio(y, r * std::exp(h)) - gamma_ratio(y, r * std::exp(-h))) / (2 * h);
      double d = 0;
      gamma_ratio(y, r, &d);
      EXPECT_NEAR(d, fd, 1e-7 * std::max(1.0, std::abs(d))) << "r " << r << " y " << y;
    }
}

}  // namespace vbagg::gamma_ratio_test
