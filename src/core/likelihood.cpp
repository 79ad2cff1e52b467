#include "likelihood.hpp"

#include <cmath>

namespace vbagg {

namespace {

const double kLog2Pi = std::log(2.0 * M_PI);

// log sum_i exp(z_i) over entries with positive weight, and softmax into *soft.
double log_sum_exp(const Vector& z, const Vector& weight, Vector* soft) {
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

Vector log_weight(const Vector& w) {
  Vector lw(w.size());
  for (Index i = 0; i < w.size(); ++i) lw[i] = w[i] > 0 ? std::log(w[i]) : -INFINITY;
  return lw;
}

// 4a: y log sum p e^m - sum p e^{m + s2/2} - log y!
double poisson_exp(const BagPosterior& b, BagGradient* g) {
  const Vector p = b.weight;
  const Vector expected = p.array() * (b.m.array() + 0.5 * b.s2.array()).exp();
  double value = -expected.sum() - std::lgamma(b.y + 1);
  Vector soft;
  if (b.y != 0) value += b.y * log_sum_exp(log_weight(p) + b.m, p, g ? &soft : nullptr);
  if (g) {
    g->gm = -expected;
    if (b.y != 0) g->gm += b.y * soft;
    g->gs2 = -0.5 * expected;
  }
  return value;
}

// 4b: y (log E - V/(2E^2)) - E - log y!, with q = m'PCPm and t = tr((CP)^2) so that V/2 = 2q + t.
double poisson_square(CovarianceMode mode, const BagPosterior& b, BagGradient* g) {
  const Vector p = b.weight;
  const Vector u = p.cwiseProduct(b.m);
  const double E = (p.array() * (b.m.array().square() + b.s2.array())).sum();
  double q, t;
  Vector Cu;         // exact: C u
  Vector n, h, Tth;  // nystrom: n_i = |t_i|^2, h = T u, T^T h
  Matrix G;          // nystrom: T P T^T
  if (mode == CovarianceMode::exact) {
    const Matrix& C = *b.C;
    Cu = C * u;
    q = u.dot(Cu);
    t = (p.asDiagonal() * C * p.asDiagonal()).cwiseProduct(C).sum();
  } else {
    const Matrix& T = *b.T;
    n = T.colwise().squaredNorm().transpose();
    h = T * u;
    G = T * p.asDiagonal() * T.transpose();
    q = ((b.s2 - n).array() * u.array().square()).sum() + h.squaredNorm();
    t = (p.array().square() * (b.s2.array().square() - n.array().square())).sum() + G.squaredNorm();
  }
  const double half_var = 2 * q + t;
  const double value = b.y * (std::log(E) - half_var / (E * E)) - E - std::lgamma(b.y + 1);
  if (g) {
    const double dE = b.y * (1 / E + 2 * half_var / (E * E * E)) - 1;
    const double dV = -b.y / (E * E);  // d value / d half_var
    g->gm = dE * 2.0 * u;              // dE/dm_i = 2 p_i m_i
    g->gs2 = dE * p;
    if (mode == CovarianceMode::exact) {
      const Matrix& C = *b.C;
      g->gm += dV * 2.0 * 2.0 * p.cwiseProduct(Cu);  // dq/dm = 2 P C u
      g->gC = dV * (2.0 * u * u.transpose() + 2.0 * p.asDiagonal() * C * p.asDiagonal());
    } else {
      const Matrix& T = *b.T;
      Tth = T.transpose() * h;
      // dq/dm_i = 2 p_i ((s2_i - n_i) u_i + (T^T h)_i); dq/ds2_i = u_i^2; dt/ds2_i = 2 p_i^2 s2_i
      g->gm += dV * 2.0 * 2.0 * p.cwiseProduct((b.s2 - n).cwiseProduct(u) + Tth);
      g->gs2 += dV * (2.0 * u.array().square() + 2.0 * p.array().square() * b.s2.array()).matrix();
      // dq/dT = 2 h u^T - 2 T diag(u^2); dt/dT = 4 G T P - 4 T diag(p^2 n)
      g->gT = dV * (2.0 * (2.0 * h * u.transpose() - 2.0 * T * u.array().square().matrix().asDiagonal()) +
                    4.0 * G * T * p.asDiagonal() - 4.0 * T * (p.array().square() * n.array()).matrix().asDiagonal());
    }
  }
  return value;
}

// 4c: -1/2 log(2 pi v) - ((y - w'm)^2 + w'Cw) / (2v), v = tau sum w^2.
double normal(const ModelSpec& spec, double log_noise, const BagPosterior& b, BagGradient* g) {
  Vector w = b.weight;
  if (spec.aggregation == Aggregation::mean) w /= w.sum();
  const double tau = std::exp(log_noise);
  const double v = tau * w.squaredNorm();
  const double e = b.y - w.dot(b.m);
  double wCw;
  Vector Tw;
  if (spec.covariance == CovarianceMode::exact) {
    wCw = w.dot(*b.C * w);
  } else {
    const Matrix& T = *b.T;
    Tw = T * w;
    wCw = ((b.s2 - T.colwise().squaredNorm().transpose()).array() * w.array().square()).sum() + Tw.squaredNorm();
  }
  const double quad = e * e + wCw;
  const double value = -0.5 * (kLog2Pi + std::log(v)) - quad / (2 * v);
  if (g) {
    const double dq = -1 / (2 * v);  // d value / d wCw
    g->gm = (e / v) * w;
    g->g_log_noise = -0.5 + quad / (2 * v);
    if (spec.covariance == CovarianceMode::exact) {
      g->gs2 = Vector::Zero(w.size());
      g->gC = dq * w * w.transpose();
    } else {
      const Matrix& T = *b.T;
      g->gs2 = dq * w.array().square().matrix();
      g->gT = dq * (2.0 * Tw * w.transpose() - 2.0 * T * w.array().square().matrix().asDiagonal());
    }
  }
  return value;
}

// 4d: -y / sum w e^{m - s2/2} - log sum w e^{m + s2/2}.
double exponential(const BagPosterior& b, BagGradient* g) {
  const Vector& w = b.weight;
  const Vector lw = log_weight(w);
  Vector soft1, soft2;
  const double lse1 = log_sum_exp(lw + b.m - 0.5 * b.s2, w, g ? &soft1 : nullptr);
  const double lse2 = log_sum_exp(lw + b.m + 0.5 * b.s2, w, g ? &soft2 : nullptr);
  const double r = b.y * std::exp(-lse1);  // y / A1
  if (g) {
    g->gm = r * soft1 - soft2;
    g->gs2 = -0.5 * r * soft1 - 0.5 * soft2;
  }
  return -r - lse2;
}

}  // namespace

BagNeeds bag_needs(const ModelSpec& spec) {
  const bool needs_cov = (spec.likelihood == LikelihoodKind::poisson && spec.link == Link::square) ||
                         spec.likelihood == LikelihoodKind::normal;
  if (!needs_cov) return BagNeeds::marginals;
  return spec.covariance == CovarianceMode::exact ? BagNeeds::exact : BagNeeds::nystrom;
}

double bag_term(const ModelSpec& spec, double log_noise, const BagPosterior& bag, BagGradient* grad) {
  switch (spec.likelihood) {
    case LikelihoodKind::poisson:
      return spec.link == Link::exp ? poisson_exp(bag, grad) : poisson_square(spec.covariance, bag, grad);
    case LikelihoodKind::normal:
      return normal(spec, log_noise, bag, grad);
    case LikelihoodKind::exponential:
      return exponential(bag, grad);
  }
  return 0;
}

}  // namespace vbagg
