// The logistic function sigma(x) = 1 / (1 + e^-x), without overflow or cancellation in either tail,
// and its inverse.
#pragma once

#include <cmath>

namespace vbagg {

inline double logistic(double x) {
  if (x >= 0) return 1 / (1 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1 + e);
}

// log(p / (1 - p)) for p in (0, 1).
inline double logit(double p) { return std::log(p) - std::log1p(-p); }

}  // namespace vbagg
