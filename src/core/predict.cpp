#include "predict.hpp"

#include <boost/math/distributions/normal.hpp>
#include <boost/math/tools/roots.hpp>
#include <cmath>

namespace vbagg {

namespace {

const boost::math::normal_distribution<double> kStdNormal;

double Phi(double x) { return boost::math::cdf(kStdNormal, x); }
double Phi_upper(double x) { return boost::math::cdf(boost::math::complement(kStdNormal, x)); }
double Phi_inv(double q) { return boost::math::quantile(kStdNormal, q); }

void check_level(double q) {
  if (!(q > 0 && q < 1)) throw ConfigError("quantile level " + std::to_string(q) + " is not in (0, 1)");
}

// lambda = f^2: P(lambda <= t) = Phi((sqrt t - m)/s) - Phi((-sqrt t - m)/s).
double square_cdf(double m, double s, double t) {
  if (t <= 0) return 0.0;
  const double r = std::sqrt(t);
  return Phi((r - m) / s) - Phi((-r - m) / s);
}

}  // namespace

double intensity_mean(Link link, double m, double s2) {
  switch (link) {
    case Link::exp:
      return std::exp(m + 0.5 * s2);
    case Link::square:
      return m * m + s2;
    case Link::identity:
      return m;
  }
  return NAN;
}

double intensity_variance(Link link, double m, double s2) {
  switch (link) {
    case Link::exp:
      return std::expm1(s2) * std::exp(2 * m + s2);
    case Link::square:
      return 2 * s2 * s2 + 4 * m * m * s2;
    case Link::identity:
      return s2;
  }
  return NAN;
}

double intensity_quantile(Link link, double m, double s2, double q) {
  check_level(q);
  if (!std::isfinite(m) || !std::isfinite(s2)) return NAN;
  const double s = std::sqrt(s2);
  switch (link) {
    case Link::exp:
      return std::exp(m + s * Phi_inv(q));
    case Link::identity:
      return m + s * Phi_inv(q);
    case Link::square: {
      if (s == 0) return m * m;
      // F is continuous and increasing on [0, (|m| + 9s)^2]; TOMS 748 brackets the root.
      auto f = [&](double t) { return square_cdf(m, s, t) - q; };
      double lo = 0, hi = (std::abs(m) + 9 * s) * (std::abs(m) + 9 * s);
      if (f(lo) >= 0) return 0.0;
      boost::uintmax_t iters = 200;
      const auto tol = [](double a, double b) { return std::abs(b - a) <= 1e-14 * std::max(1e-300, std::abs(b)); };
      const auto root = boost::math::tools::toms748_solve(f, lo, hi, tol, iters);
      return 0.5 * (root.first + root.second);
    }
  }
  return NAN;
}

double intensity_exceedance(Link link, double m, double s2, double t) {
  const double s = std::sqrt(s2);
  switch (link) {
    case Link::exp:
      if (t <= 0) return 1.0;
      return s > 0 ? Phi_upper((std::log(t) - m) / s) : (std::exp(m) > t ? 1.0 : 0.0);
    case Link::identity:
      return s > 0 ? Phi_upper((t - m) / s) : (m > t ? 1.0 : 0.0);
    case Link::square: {
      if (t <= 0) return 1.0;
      const double r = std::sqrt(t);
      if (s == 0) return m * m > t ? 1.0 : 0.0;
      // Upper tail written as a sum of upper tails, accurate when the probability is tiny.
      return Phi_upper((r - m) / s) + Phi((-r - m) / s);
    }
  }
  return NAN;
}

void predict_latent(const Model& model, const Matrix& X, Vector& mean, Vector& var, int threads, Index block) {
  const Posterior post = compute_posterior(model);
  const Index N = X.cols();
  mean.resize(N);
  var.resize(N);
  const Index blocks = (N + block - 1) / block;
#pragma omp parallel num_threads(std::max(1, threads))
  {
    LatentScratch scratch;
#pragma omp for schedule(static)
    for (Index b = 0; b < blocks; ++b) {
      const Index begin = b * block, len = std::min(block, N - begin);
      latent_marginals_into(model, post, X.middleCols(begin, len), mean.segment(begin, len), var.segment(begin, len),
                            scratch);
    }
  }
}

Prediction predict(const Model& model, const Matrix& X, const PredictOptions& o) {
  for (double q : o.quantiles) check_level(q);
  Prediction p;
  predict_latent(model, X, p.latent_mean, p.latent_var, o.threads, o.block);
  const Index N = X.cols();
  const Link link = model.spec.link;
  p.mean.resize(N);
  p.sd.resize(N);
  p.quantiles.resize(N, static_cast<Index>(o.quantiles.size()));
  p.exceedance.resize(N, static_cast<Index>(o.exceedance.size()));
#pragma omp parallel for schedule(static, 1024) num_threads(std::max(1, o.threads))
  for (Index i = 0; i < N; ++i) {
    const double m = p.latent_mean[i], s2 = p.latent_var[i];
    p.mean[i] = intensity_mean(link, m, s2);
    p.sd[i] = std::sqrt(intensity_variance(link, m, s2));
    for (size_t k = 0; k < o.quantiles.size(); ++k)
      p.quantiles(i, static_cast<Index>(k)) = intensity_quantile(link, m, s2, o.quantiles[k]);
    for (size_t k = 0; k < o.exceedance.size(); ++k)
      p.exceedance(i, static_cast<Index>(k)) = intensity_exceedance(link, m, s2, o.exceedance[k]);
  }
  return p;
}

}  // namespace vbagg

#include "dataset.hpp"
#include "metrics.hpp"

namespace vbagg {

namespace {

// Latent marginals of the listed bags' pixels, concatenated in bag order.
void bag_latents(const Model& model, const Dataset& data, const std::vector<Index>& bags, int threads, Matrix& X,
                 Vector& w, Vector& m, Vector& v) {
  Index total = 0;
  for (Index a : bags) total += data.bag_size(a);
  X.resize(data.num_inputs(), total);
  w.resize(total);
  Index pos = 0;
  for (Index a : bags) {
    const Index b = data.bag_begin(a), n = data.bag_size(a);
    X.middleCols(pos, n) = data.inputs.middleCols(b, n);
    w.segment(pos, n) = data.coverage.segment(b, n).cwiseProduct(data.population.segment(b, n));
    pos += n;
  }
  predict_latent(model, X, m, v, threads);
}

}  // namespace

Vector predicted_bag_totals(const Model& model, const Dataset& data, const std::vector<Index>& bags, int threads) {
  Matrix X;
  Vector w, m, v;
  bag_latents(model, data, bags, threads, X, w, m, v);
  Vector totals(static_cast<Index>(bags.size()));
  Index pos = 0;
  for (size_t k = 0; k < bags.size(); ++k) {
    const Index n = data.bag_size(bags[k]);
    double s = 0;
    for (Index i = pos; i < pos + n; ++i) s += w[i] * intensity_mean(model.spec.link, m[i], v[i]);
    totals[static_cast<Index>(k)] = s;
    pos += n;
  }
  return totals;
}

double bag_predictive_nll(const Model& model, const Dataset& data, const std::vector<Index>& bags, int threads) {
  if (bags.empty()) return NAN;
  Vector y(static_cast<Index>(bags.size()));
  for (size_t k = 0; k < bags.size(); ++k) y[static_cast<Index>(k)] = data.response[bags[k]];
  switch (model.spec.likelihood) {
    case LikelihoodKind::poisson:
      return bag_poisson_nll(y, predicted_bag_totals(model, data, bags, threads)).mean;
    case LikelihoodKind::exponential: {
      const Vector eta = predicted_bag_totals(model, data, bags, threads);
      return (eta.array().log() + y.array() / eta.array()).mean();
    }
    case LikelihoodKind::normal: {
      Matrix X;
      Vector w, m, v;
      bag_latents(model, data, bags, threads, X, w, m, v);
      double nll = 0;
      Index pos = 0;
      for (size_t k = 0; k < bags.size(); ++k) {
        const Index n = data.bag_size(bags[k]);
        Vector wk = w.segment(pos, n);
        if (model.spec.aggregation == Aggregation::mean) wk /= wk.sum();
        const double mu = wk.dot(m.segment(pos, n));
        const double var =
            std::exp(model.log_noise) * wk.squaredNorm() + wk.array().square().matrix().dot(v.segment(pos, n));
        const double e = y[static_cast<Index>(k)] - mu;
        nll += 0.5 * (std::log(2 * M_PI * var) + e * e / var);
        pos += n;
      }
      return nll / static_cast<double>(bags.size());
    }
  }
  return NAN;
}

}  // namespace vbagg

#include <random>

namespace vbagg {

Vector bag_predictive_draws(const Model& model, const Matrix& X, const Vector& w_in, int samples,
                            unsigned long long seed) {
  const Posterior post = compute_posterior(model);
  const Index n = X.cols(), M = model.num_inducing();
  Vector w = w_in;
  if (model.spec.likelihood == LikelihoodKind::normal && model.spec.aggregation == Aggregation::mean) w /= w.sum();
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  // f = m + T^T z + r e with z ~ N(0, I_M) shared by the unit's pixels and e independent per
  // pixel; the unit's total is accumulated block by block so memory does not grow with its size.
  Matrix Z(M, samples);
  for (Index i = 0; i < Z.size(); ++i) Z.data()[i] = normal(rng);
  Vector eta = Vector::Zero(samples);
  const Index block = 4096;
  LatentScratch scratch;
  Vector m, s2;
  Matrix T, F;
  for (Index begin = 0; begin < n; begin += block) {
    const Index len = std::min(block, n - begin);
    m.resize(len);
    s2.resize(len);
    latent_marginals_into(model, post, X.middleCols(begin, len), m, s2, scratch);
    T.noalias() = post.B * scratch.K.view();
    // A MAP estimate has no latent uncertainty: only the observation noise remains.
    const Vector resid_sd = model.spec.map_estimate
                                ? Vector::Zero(len)
                                : Vector((s2 - T.colwise().squaredNorm().transpose()).cwiseMax(0.0).cwiseSqrt());
    if (model.spec.map_estimate)
      F.setZero(len, samples);
    else
      F.noalias() = T.transpose() * Z;
    for (int s = 0; s < samples; ++s)
      for (Index i = 0; i < len; ++i) {
        const double f = F(i, s) + m[i] + resid_sd[i] * normal(rng);
        eta[s] += w[begin + i] * (model.spec.link == Link::exp      ? std::exp(f)
                                  : model.spec.link == Link::square ? f * f
                                                                    : f);
      }
  }
  Vector draws(samples);
  const double noise_sd = std::sqrt(std::exp(model.log_noise) * w.squaredNorm());
  for (int s = 0; s < samples; ++s) {
    switch (model.spec.likelihood) {
      case LikelihoodKind::poisson:
        draws[s] = eta[s] > 0 ? static_cast<double>(std::poisson_distribution<long long>(eta[s])(rng)) : 0.0;
        break;
      case LikelihoodKind::normal:
        draws[s] = eta[s] + noise_sd * normal(rng);
        break;
      case LikelihoodKind::exponential:
        draws[s] = std::exponential_distribution<double>(1.0 / eta[s])(rng);
        break;
    }
  }
  return draws;
}

}  // namespace vbagg
