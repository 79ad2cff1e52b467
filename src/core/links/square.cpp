// lambda = f^2: scaled non-central chi-square intensities; the count bag's mean by the
// second-order Taylor expansion of the paper (4b), the delta method for this link.
#include <boost/math/tools/roots.hpp>
#include <cmath>

#include "core/link.hpp"
#include "normal_cdf.hpp"

namespace vbagg {

namespace {

using namespace normal_cdf;

// P(f^2 <= t) = Phi((sqrt t - m)/s) - Phi((-sqrt t - m)/s).
double square_cdf(double m, double s, double t) {
  if (t <= 0) return 0.0;
  const double r = std::sqrt(t);
  return Phi((r - m) / s) - Phi((-r - m) / s);
}

class SquareLink final : public LinkFunction {
 public:
  Link id() const override { return Link::square; }
  const char* name() const override { return "square"; }
  const char* latent_meaning() const override { return "sqrt intensity"; }
  double psi(double f) const override { return f * f; }
  double psi_derivative(double f) const override { return 2 * f; }
  double mean(double m, double s2) const override { return m * m + s2; }
  double variance(double m, double s2) const override { return 2 * s2 * s2 + 4 * m * m * s2; }
  double mean_slope(double m, double) const override { return 2 * m; }
  double quantile(double m, double s2, double q) const override {
    const double s = std::sqrt(s2);
    if (s == 0) return m * m;
    // F is continuous and increasing on [0, (|m| + 9s)^2]; TOMS 748 brackets the root.
    auto f = [&](double t) { return square_cdf(m, s, t) - q; };
    const double lo = 0, hi = (std::abs(m) + 9 * s) * (std::abs(m) + 9 * s);
    if (f(lo) >= 0) return 0.0;
    boost::uintmax_t iters = 200;
    const auto tol = [](double a, double b) { return std::abs(b - a) <= 1e-14 * std::max(1e-300, std::abs(b)); };
    const auto root = boost::math::tools::toms748_solve(f, lo, hi, tol, iters);
    return 0.5 * (root.first + root.second);
  }
  double exceedance(double m, double s2, double t) const override {
    if (t <= 0) return 1.0;
    const double r = std::sqrt(t), s = std::sqrt(s2);
    if (s == 0) return m * m > t ? 1.0 : 0.0;
    // Upper tail written as a sum of upper tails, accurate when the probability is tiny.
    return Phi_upper((r - m) / s) + Phi((-r - m) / s);
  }

  BagNeeds count_needs(const ModelSpec& spec) const override {
    return spec.covariance == CovarianceMode::exact ? BagNeeds::exact : BagNeeds::nystrom;
  }

  // E = sum_i p_i (m_i^2 + s2_i); Var = 4 q + 2 t with q = m'PCPm and t = tr((CP)^2), so
  // rho = Var / E^2 = 2 (2q + t) / E^2 and E log mu ~ log E - rho / 2.
  void count_moments(const ModelSpec& spec, const BagPosterior& b, CountMoments& o) const override {
    const Vector& p = b.weight;
    o.u = p.cwiseProduct(b.m);
    const double E = (p.array() * (b.m.array().square() + b.s2.array())).sum();
    double q, t;
    if (spec.covariance == CovarianceMode::exact) {
      const Matrix& C = *b.C;
      o.Cu = C * o.u;
      q = o.u.dot(o.Cu);
      t = (p.asDiagonal() * C * p.asDiagonal()).cwiseProduct(C).sum();
    } else {
      const Matrix& T = *b.T;
      o.n = T.colwise().squaredNorm().transpose();
      o.h = T * o.u;
      o.G = T * p.asDiagonal() * T.transpose();
      q = ((b.s2 - o.n).array() * o.u.array().square()).sum() + o.h.squaredNorm();
      t = (p.array().square() * (b.s2.array().square() - o.n.array().square())).sum() + o.G.squaredNorm();
    }
    o.half_var = 2 * q + t;
    o.mean = E;
    o.rho = 2 * o.half_var / (E * E);
    o.elog = std::log(E) - 0.5 * o.rho;
  }

  void count_moments_backward(const ModelSpec& spec, const BagPosterior& b, const CountMoments& o,
                              const CountMomentsGradient& d, BagGradient& g) const override {
    const Vector& p = b.weight;
    const double E = o.mean;
    const double d_rho = d.rho - 0.5 * d.elog;
    const double dE = d.mean + d.elog / E - 2.0 * d_rho * o.rho / E;  // d l / dE
    const double dV = 2.0 * d_rho / (E * E);                          // d l / d half_var
    g.gm = dE * 2.0 * o.u;                                            // dE/dm_i = 2 p_i m_i
    g.gs2 = dE * p;
    if (spec.covariance == CovarianceMode::exact) {
      const Matrix& C = *b.C;
      g.gm += dV * 2.0 * 2.0 * p.cwiseProduct(o.Cu);  // dq/dm = 2 P C u
      g.gC = dV * (2.0 * o.u * o.u.transpose() + 2.0 * p.asDiagonal() * C * p.asDiagonal());
    } else {
      const Matrix& T = *b.T;
      const Vector Tth = T.transpose() * o.h;
      // dq/dm_i = 2 p_i ((s2_i - n_i) u_i + (T^T h)_i); dq/ds2_i = u_i^2; dt/ds2_i = 2 p_i^2 s2_i
      g.gm += dV * 2.0 * 2.0 * p.cwiseProduct((b.s2 - o.n).cwiseProduct(o.u) + Tth);
      g.gs2 += dV * (2.0 * o.u.array().square() + 2.0 * p.array().square() * b.s2.array()).matrix();
      // dq/dT = 2 h u^T - 2 T diag(u^2); dt/dT = 4 G T P - 4 T diag(p^2 n)
      g.gT = dV * (2.0 * (2.0 * o.h * o.u.transpose() - 2.0 * T * o.u.array().square().matrix().asDiagonal()) +
                   4.0 * o.G * T * p.asDiagonal() - 4.0 * T * (p.array().square() * o.n.array()).matrix().asDiagonal());
    }
  }
};

}  // namespace

const LinkFunction& square_link() {
  static const SquareLink link;
  return link;
}

}  // namespace vbagg
