#include "gamma_ratio.hpp"

#include <boost/math/special_functions/digamma.hpp>
#include <cmath>

namespace vbagg {

namespace {

// Where the series takes over: below it the direct difference loses at most 2e-12, above it the
// terms the series leaves out are under 1e-17.
constexpr double kStirlingFrom = 1e3;

}  // namespace

double gamma_ratio(double y, double r, double* d_log_r) {
  if (y == 0) {
    if (d_log_r) *d_log_r = 0;
    return 0;
  }
  if (r < kStirlingFrom) {
    if (d_log_r) *d_log_r = r * (boost::math::digamma(y + r) - boost::math::digamma(r)) - y;
    return std::lgamma(y + r) - std::lgamma(r) - y * std::log(r);
  }
  // lgamma(z) = (z - 1/2) log z - z + log(2 pi) / 2 + 1 / (12 z) - 1 / (360 z^3) + O(z^-5) and
  // digamma(z) = log z - 1 / (2z) - 1 / (12 z^2) + 1 / (120 z^4) + O(z^-6), differenced at z = r + y
  // and r, each difference of powers written with its factor y.
  const double l = std::log1p(y / r), z = r + y, r2 = r * r, z2 = z * z;
  if (d_log_r)
    *d_log_r =
        r * l - y + y / (2 * z) + y * (z + r) / (12 * r * z2) - y * (z + r) * (z2 + r2) / (120 * r2 * r * z2 * z2);
  return (z - 0.5) * l - y - y / (12 * r * z) + y * (r2 + r * z + z2) / (360 * r2 * r * z2 * z);
}

}  // namespace vbagg
