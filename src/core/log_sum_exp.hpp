// log sum_i w_i e^{z_i} over the pixels of positive weight, evaluated without overflow.
#pragma once

#include <cmath>

#include "types.hpp"

namespace vbagg {

// log w_i, and -inf where w_i = 0.
inline Vector log_weight(const Vector& w) {
  Vector lw(w.size());
  for (Index i = 0; i < w.size(); ++i) lw[i] = w[i] > 0 ? std::log(w[i]) : -INFINITY;
  return lw;
}

// log sum_i exp(z_i) over entries with positive weight, and the softmax into *soft (zero where
// the weight is zero). z already contains log w.
inline double log_sum_exp(const Vector& z, const Vector& weight, Vector* soft) {
  double mx = -INFINITY;
  for (Index i = 0; i < z.size(); ++i)
    if (weight[i] > 0) mx = std::max(mx, z[i]);
  if (!std::isfinite(mx)) {
    if (soft) soft->setZero(z.size());
    return mx;
  }
  Vector e(z.size());
  for (Index i = 0; i < z.size(); ++i) e[i] = weight[i] > 0 ? std::exp(z[i] - mx) : 0.0;
  const double s = e.sum();
  if (soft) *soft = e / s;
  return mx + std::log(s);
}

}  // namespace vbagg
