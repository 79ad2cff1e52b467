// The logistic function sigma(x) = 1 / (1 + e^-x), without overflow or cancellation in either tail.
#pragma once

#include <cmath>

namespace vbagg {

inline double logistic(double x) {
  if (x >= 0) return 1 / (1 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1 + e);
}

}  // namespace vbagg
