// The standard normal distribution, as the links' intensity distributions use it.
#pragma once

#include <boost/math/distributions/normal.hpp>

namespace vbagg::normal_cdf {

inline const boost::math::normal_distribution<double>& standard() {
  static const boost::math::normal_distribution<double> n;
  return n;
}
inline double Phi(double x) { return boost::math::cdf(standard(), x); }
inline double Phi_upper(double x) { return boost::math::cdf(boost::math::complement(standard(), x)); }
inline double Phi_inv(double q) { return boost::math::quantile(standard(), q); }

}  // namespace vbagg::normal_cdf
