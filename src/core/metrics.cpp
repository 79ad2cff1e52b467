#include "metrics.hpp"

#include <algorithm>
#include <cmath>

namespace vbagg {

BagNll bag_poisson_nll(const Vector& y, const Vector& yhat) {
  BagNll r;
  for (Index a = 0; a < y.size(); ++a)
    r.sum += yhat[a] - (y[a] > 0 ? y[a] * std::log(yhat[a]) : 0.0) + std::lgamma(y[a] + 1);
  r.mean = y.size() ? r.sum / static_cast<double>(y.size()) : NAN;
  return r;
}

BagNll bag_binomial_nll(const Vector& y, const Vector& n, const Vector& p) {
  BagNll r;
  for (Index a = 0; a < y.size(); ++a) {
    // 0 log 0 = 0: a prevalence of 0 or 1 scores the counts that agree with it by log C(n, y) alone.
    const double log_p = y[a] > 0 ? y[a] * std::log(p[a]) : 0.0;
    const double log_q = n[a] > y[a] ? (n[a] - y[a]) * std::log1p(-p[a]) : 0.0;
    r.sum -= std::lgamma(n[a] + 1) - std::lgamma(y[a] + 1) - std::lgamma(n[a] - y[a] + 1) + log_p + log_q;
  }
  r.mean = y.size() ? r.sum / static_cast<double>(y.size()) : NAN;
  return r;
}

double bag_log_mse(const Vector& y, const Vector& yhat) {
  double s = 0;
  Index n = 0;
  for (Index a = 0; a < y.size(); ++a)
    if (y[a] > 0 && yhat[a] > 0) {
      const double d = std::log(y[a]) - std::log(yhat[a]);
      s += d * d;
      ++n;
    }
  return n ? s / static_cast<double>(n) : NAN;
}

double mean_squared_error(const Vector& a, const Vector& b) {
  return (a - b).squaredNorm() / static_cast<double>(a.size());
}

double correlation(const Vector& a, const Vector& b) {
  const Vector da = a.array() - a.mean(), db = b.array() - b.mean();
  return da.dot(db) / std::sqrt(da.squaredNorm() * db.squaredNorm());
}

double pixel_poisson_nll(const Vector& counts, const Vector& rate) {
  double s = 0;
  for (Index i = 0; i < counts.size(); ++i)
    s += rate[i] - (counts[i] > 0 ? counts[i] * std::log(rate[i]) : 0.0) + std::lgamma(counts[i] + 1);
  return s / static_cast<double>(counts.size());
}

Vector interval_coverage(const Vector& truth, const Matrix& lower, const Matrix& upper) {
  Vector cov(lower.cols());
  for (Index k = 0; k < lower.cols(); ++k)
    cov[k] = ((truth.array() >= lower.col(k).array()) && (truth.array() <= upper.col(k).array())).cast<double>().mean();
  return cov;
}

double empirical_quantile(const Vector& sorted, double p) {
  if (sorted.size() == 0) return NAN;
  const double n = static_cast<double>(sorted.size());
  const Index k = static_cast<Index>(std::ceil(p * n)) - 1;
  return sorted[std::clamp<Index>(k, 0, sorted.size() - 1)];
}

CoverageBand coverage_band(const Matrix& draw_coverage, const std::vector<double>& levels) {
  CoverageBand b;
  const Index S = draw_coverage.rows(), L = static_cast<Index>(levels.size());
  if (S == 0 || draw_coverage.cols() != L) return b;
  for (Index l = 0; l < L; ++l) {
    Vector c = draw_coverage.col(l);
    std::sort(c.data(), c.data() + S);
    b.low.push_back(empirical_quantile(c, 0.05));
    b.high.push_back(empirical_quantile(c, 0.95));
  }
  Vector err(S);
  for (Index s = 0; s < S; ++s) {
    double e = 0;
    for (Index l = 0; l < L; ++l) e += std::abs(draw_coverage(s, l) - levels[static_cast<size_t>(l)]);
    err[s] = e / static_cast<double>(L);
  }
  b.error_mean = err.mean();
  std::sort(err.data(), err.data() + S);
  b.error_p90 = empirical_quantile(err, 0.9);
  return b;
}

double randomized_pit(const Vector& sorted, double y, double v) {
  const double* b = sorted.data();
  const double* e = b + sorted.size();
  const double n = static_cast<double>(sorted.size());
  const double below = static_cast<double>(std::lower_bound(b, e, y) - b) / n;
  const double at_or_below = static_cast<double>(std::upper_bound(b, e, y) - b) / n;
  return below + v * (at_or_below - below);
}

std::vector<double> unit_histogram(const std::vector<double>& values, int bins) {
  std::vector<double> h(static_cast<size_t>(bins), 0.0);
  for (double u : values)
    h[static_cast<size_t>(std::clamp(static_cast<int>(u * bins), 0, bins - 1))] +=
        1.0 / static_cast<double>(values.size());
  return h;
}

const std::vector<double>& calibration_levels() {
  static const std::vector<double> levels = {0.5, 0.6, 0.7, 0.8, 0.9, 0.95};
  return levels;
}

std::vector<double> central_interval_quantiles(const std::vector<double>& levels) {
  std::vector<double> q;
  for (double l : levels) {
    q.push_back(0.5 - l / 2);
    q.push_back(0.5 + l / 2);
  }
  return q;
}

}  // namespace vbagg
