// lambda = e^f: log-normal intensities; the count bag's mean by the Jensen bound (4a) or the
// delta method (4e i).
#include <cmath>

#include "core/link.hpp"
#include "core/log_sum_exp.hpp"
#include "normal_cdf.hpp"

namespace vbagg {

namespace {

using namespace normal_cdf;

class ExpLink final : public LinkFunction {
 public:
  Link id() const override { return Link::exp; }
  const char* name() const override { return "exp"; }
  const char* latent_meaning() const override { return "log intensity"; }
  double psi(double f) const override { return std::exp(f); }
  double psi_derivative(double f) const override { return std::exp(f); }
  double mean(double m, double s2) const override { return std::exp(m + 0.5 * s2); }
  double variance(double m, double s2) const override { return std::expm1(s2) * std::exp(2 * m + s2); }
  double mean_slope(double m, double s2) const override { return mean(m, s2); }
  double quantile(double m, double s2, double q) const override { return std::exp(m + std::sqrt(s2) * Phi_inv(q)); }
  double exceedance(double m, double s2, double t) const override {
    if (t <= 0) return 1.0;
    const double s = std::sqrt(s2);
    return s > 0 ? Phi_upper((std::log(t) - m) / s) : (std::exp(m) > t ? 1.0 : 0.0);
  }

  BagNeeds count_needs(const ModelSpec& spec) const override {
    if (spec.expectation == Expectation::bound) return BagNeeds::marginals;
    // rho reads T only through T r: the residual form, without T itself.
    return spec.covariance == CovarianceMode::exact ? BagNeeds::exact : BagNeeds::residual;
  }

  // mean = sum_i w_i e^{m_i + s2_i/2} = e^{lse}, r = softmax: the share of each pixel in the mean.
  // bound: E log mu >= log sum_i w_i e^{m_i} (log-sum-exp is convex).
  // delta: E log mu ~ log mean - rho/2, rho = r^T C r (nystrom: sum_i d_i r_i^2 + |T r|^2).
  void count_moments(const ModelSpec& spec, const BagPosterior& b, CountMoments& o) const override {
    const Vector w = b.weight;
    const Vector lw = log_weight(w);
    const double log_mean = log_sum_exp(lw + b.m + 0.5 * b.s2, w, &o.r);
    o.mean = std::exp(log_mean);
    if (spec.expectation == Expectation::bound) {
      o.elog = log_sum_exp(lw + b.m, w, &o.soft);
      o.rho = 0;
      return;
    }
    if (spec.covariance == CovarianceMode::exact) {
      o.Cu = *b.C * o.r;
      o.rho = o.r.dot(o.Cu);
    } else {
      o.h = b.t->times(o.r);
      o.rho = (b.d->array() * o.r.array().square()).sum() + o.h.squaredNorm();
    }
    o.elog = log_mean - 0.5 * o.rho;
  }

  void count_moments_backward(const ModelSpec& spec, const BagPosterior& b, const CountMoments& o,
                              const CountMomentsGradient& d, BagGradient& g) const override {
    const Vector e = o.mean * o.r;  // w_i e^{m_i + s2_i/2}
    if (spec.expectation == Expectation::bound) {
      g.gm = d.mean * e + d.elog * o.soft;
      g.gs2 = (0.5 * d.mean) * e;
      return;
    }
    // l depends on log mean (through mean and elog) and on rho (directly and through elog).
    const double d_log_mean = d.elog + d.mean * o.mean;
    const double d_rho = d.rho - 0.5 * d.elog;
    // With an incoming d l / d h (h = T r), the factor on T is 2 d_rho h + d l / d h.
    const bool exact = spec.covariance == CovarianceMode::exact;
    const Vector gh = exact ? Vector() : d.h.size() ? Vector(2.0 * d_rho * o.h + d.h) : Vector(2.0 * d_rho * o.h);
    // d l / d r, then r = softmax(z), z_i = log w_i + m_i + s2_i/2.
    const Vector g_r =
        exact ? Vector(2.0 * d_rho * o.Cu) : Vector(2.0 * d_rho * b.d->cwiseProduct(o.r) + b.t->transpose_times(gh));
    const double c = g_r.dot(o.r);
    const Vector dz = d_log_mean * o.r + o.r.cwiseProduct((g_r.array() - c).matrix());
    g.gm = dz;
    g.gs2 = 0.5 * dz;
    if (exact) {
      g.gC = d_rho * o.r * o.r.transpose();
    } else {
      g.gd = d_rho * o.r.array().square().matrix();
      g.gT_factors.push_back({gh, o.r});
    }
  }
};

}  // namespace

const LinkFunction& exp_link() {
  static const ExpLink link;
  return link;
}

}  // namespace vbagg
