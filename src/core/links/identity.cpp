// lambda = f: Normal intensities, for the Normal bag model (no count summary).
#include <cmath>

#include "core/link.hpp"
#include "normal_cdf.hpp"

namespace vbagg {

namespace {

using namespace normal_cdf;

class IdentityLink final : public LinkFunction {
 public:
  Link id() const override { return Link::identity; }
  const char* name() const override { return "identity"; }
  const char* latent_meaning() const override { return "intensity"; }
  double psi(double f) const override { return f; }
  double psi_derivative(double) const override { return 1.0; }
  double mean(double m, double) const override { return m; }
  double variance(double, double s2) const override { return s2; }
  double mean_slope(double, double) const override { return 1.0; }
  double quantile(double m, double s2, double q) const override { return m + std::sqrt(s2) * Phi_inv(q); }
  double exceedance(double m, double s2, double t) const override {
    const double s = std::sqrt(s2);
    return s > 0 ? Phi_upper((t - m) / s) : (m > t ? 1.0 : 0.0);
  }
};

}  // namespace

const LinkFunction& identity_link() {
  static const IdentityLink link;
  return link;
}

}  // namespace vbagg
