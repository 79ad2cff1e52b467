// log sum_i w_i e^{z_i} over the pixels of positive weight, evaluated without overflow.
#pragma once

#include <algorithm>
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
// the weight is zero). z already contains log w. Templated so that fixed-size node vectors and
// expressions pass without a temporary.
template <class Z, class W, class Soft>
double log_sum_exp(const Eigen::MatrixBase<Z>& z, const Eigen::MatrixBase<W>& weight, Soft* soft) {
  const Index n = z.size();
  double mx = -INFINITY;
  for (Index i = 0; i < n; ++i)
    if (weight[i] > 0) mx = std::max(mx, z[i]);
  if (!std::isfinite(mx)) {
    if (soft) soft->setZero(n);
    return mx;
  }
  double s = 0;
  if (soft) {
    soft->resize(n);
    for (Index i = 0; i < n; ++i) (*soft)[i] = weight[i] > 0 ? std::exp(z[i] - mx) : 0.0;
    s = soft->sum();
    *soft /= s;
  } else {
    for (Index i = 0; i < n; ++i) s += weight[i] > 0 ? std::exp(z[i] - mx) : 0.0;
  }
  return mx + std::log(s);
}

}  // namespace vbagg
