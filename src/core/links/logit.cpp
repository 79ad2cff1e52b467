// pi = sigma(f) = 1 / (1 + e^{-f}): prevalence, a proportion in (0, 1), for the binomial bag model.
// Its mean and variance under f ~ N(m, s^2) have no closed form: 32-point Gauss-Hermite
// quadrature, exact to ~1e-12 for the latent sds a fit produces; quantiles and exceedances are exact
// because sigma is monotone.
#include <cmath>

#include "core/gauss_hermite.hpp"
#include "core/link.hpp"
#include "core/logistic.hpp"
#include "normal_cdf.hpp"

namespace vbagg {

namespace {

using namespace normal_cdf;

class LogitLink final : public LinkFunction {
 public:
  Link id() const override { return Link::logit; }
  const char* name() const override { return "logit"; }
  const char* latent_meaning() const override { return "log odds of prevalence"; }
  double psi(double f) const override { return logistic(f); }
  double psi_derivative(double f) const override {
    const double p = logistic(f);
    return p * (1 - p);
  }
  double mean(double m, double s2) const override { return moment(m, s2, 1); }
  double variance(double m, double s2) const override {
    const double mu = moment(m, s2, 1);
    return std::max(0.0, moment(m, s2, 2) - mu * mu);
  }
  double quantile(double m, double s2, double q) const override { return logistic(m + std::sqrt(s2) * Phi_inv(q)); }
  double exceedance(double m, double s2, double t) const override {
    if (t <= 0) return 1.0;
    if (t >= 1) return 0.0;
    const double s = std::sqrt(s2), logit_t = std::log(t / (1 - t));
    return s > 0 ? Phi_upper((logit_t - m) / s) : (m > logit_t ? 1.0 : 0.0);
  }

 private:
  // E[sigma(f)^k], f ~ N(m, s2).
  static double moment(double m, double s2, int k) {
    const NormalQuadrature& q = normal_quadrature(32);
    const double s = std::sqrt(s2);
    double e = 0;
    for (Index j = 0; j < q.nodes.size(); ++j) e += q.weights[j] * std::pow(logistic(m + s * q.nodes[j]), k);
    return e;
  }
};

}  // namespace

const LinkFunction& logit_link() {
  static const LogitLink link;
  return link;
}

}  // namespace vbagg
