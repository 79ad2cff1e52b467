// y_a ~ Binomial(n_a, pi_a): y_a positives among n_a tested (a survey cluster or a unit), with the
// bag's prevalence the population-weighted mean pi_a = sum_i w_i sigma(f_i) / sum_i w_i (the
// logit link). There is no closed-form or bounded expectation of log pi_a and log(1 - pi_a)
// worth having. The term is either sampled (MODEL.md 4e ii), which needs log p(y | pi) and its
// derivative from this file, or deterministic (expectation delta: pi_a taken as logit-normal with
// its mean and variance under q, binomial_delta.cpp). Either may carry a unit effect on the logit
// (binomial_effect.hpp) for surveys more varied than the field and binomial noise allow.
#include <algorithm>
#include <cmath>

#include "binomial_delta.hpp"
#include "binomial_effect.hpp"
#include "core/likelihood.hpp"
#include "core/link.hpp"
#include "core/logistic.hpp"

namespace vbagg {

namespace {

// log C(n, y).
double log_choose(double n, double y) { return std::lgamma(n + 1) - std::lgamma(y + 1) - std::lgamma(n - y + 1); }

class Binomial final : public BagLikelihood {
 public:
  LikelihoodKind id() const override { return LikelihoodKind::binomial; }
  const char* name() const override { return "binomial"; }
  std::vector<Link> links() const override { return {Link::logit}; }
  bool has_bound() const override { return false; }
  bool needs_trials() const override { return true; }
  bool allows_map(const ModelSpec&) const override { return false; }
  const char* intensity_unit() const override { return "prevalence (proportion positive)"; }
  const char* total_unit() const override { return "people infected"; }
  // Both expectations read T through products and the residual; the delta method's exact form
  // reads C.
  BagNeeds needs(const ModelSpec& spec) const override {
    return spec.expectation == Expectation::delta && spec.covariance == CovarianceMode::exact ? BagNeeds::exact
                                                                                              : BagNeeds::residual;
  }
  Vector aggregate_weights(const ModelSpec&, const Vector& w) const override { return w / w.sum(); }
  double expected_observation(double prevalence, double trials) const override { return trials * prevalence; }

  double term(const ModelSpec& spec, const Vector&, const BagPosterior& b, BagGradient* grad) const override {
    if (spec.expectation != Expectation::delta)
      throw ConfigError("the binomial likelihood has no bound: its expectation is delta or sample");
    return log_choose(b.trials, b.y) + binomial_delta_term(spec, b, aggregate_weights(spec, b.weight), grad);
  }

  // log C(n, y) + y log pi + (n - y) log(1 - pi), with pi kept inside (0, 1) by its floor; with a
  // unit effect the mixture over it at the logit of pi.
  double aggregate_log_p(const Vector&, const BagPosterior& b, const Vector&, double pi,
                         AggregateGradient* g) const override {
    const double p = std::clamp(pi, kFloor, 1 - kFloor), n = b.trials, y = b.y;
    if (b.has_unit_effect) {
      const EffectMixture m = binomial_mixture(y, n, logit(p), b.unit_log_sd);
      if (g) {
        g->d_eta = pi == p ? m.d1[0] / (p * (1 - p)) : 0.0;
        g->d_unit_log_sd = m.d_log_sd;
      }
      return log_choose(n, y) + m.value;
    }
    if (g) g->d_eta = pi == p ? y / p - (n - y) / (1 - p) : 0.0;
    return log_choose(n, y) + y * std::log(p) + (n - y) * std::log1p(-p);
  }

  // The unit effect on the logit, of mean 0 (binomial_effect.hpp). `expected` is the expected
  // number positive without it.
  bool defines_unit_effect() const override { return true; }
  UnitEffectMoments unit_effect_prior(double log_sd) const override { return {0.0, std::exp(2 * log_sd)}; }
  UnitEffectMoments unit_effect_given(const Observation& obs, double expected, const Vector&,
                                      double log_sd) const override {
    const double p = std::clamp(expected / obs.trials, kFloor, 1 - kFloor);
    const EffectMixture m = binomial_mixture(obs.y, obs.trials, logit(p), log_sd);
    return {m.u_mean, m.u_var};
  }
  // n E sigma(logit pi + u): the logit link's mean at the field's prevalence moved by the effect.
  double expected_with_unit_effect(double expected, double trials, const UnitEffectMoments& unit) const override {
    const double p = std::clamp(expected / trials, kFloor, 1 - kFloor);
    return trials * link_of(Link::logit).mean(logit(p) + unit.mean, unit.var);
  }
  double aggregate_with_unit_effect(double pi, double u) const override {
    return logistic(logit(std::clamp(pi, kFloor, 1 - kFloor)) + u);
  }

  // The prior mean: the logit of the training bags' pooled prevalence.
  void initialise(const Dataset& train, Model& model) const override {
    const double positives = train.response.sum(), tested = train.trials.sum();
    if (!(tested > 0)) throw DataError("the training units have no one tested: the binomial model cannot start");
    const double p = std::clamp((positives + 0.5) / (tested + 1), 1e-4, 1 - 1e-4);
    model.mean = std::log(p / (1 - p));
    model.likelihood_params.resize(0);
  }

  // The bag's prevalence is taken as Beta with the mean and variance of pi_a under q, which makes
  // the count beta-binomial (its variance is then the predictive draws' n pi (1 - pi) + n (n - 1)
  // Var pi exactly); with no latent variance it is the binomial. Var pi as the delta term takes it:
  // the pixels' own variances plus their covariances to first order (`cross`). Without those a
  // unit of many pixels on a smooth field would have about 1/N of its variance. A unit effect
  // u ~ N(unit) moves the logit-normal with pi_a's moments to sigma(N(c + unit.mean, tau +
  // unit.var)), whose moments the Beta then takes.
  bool predictive_reads_covariance() const override { return true; }
  double predictive_nll(const Model& model, const Observation& obs, const Vector& w_in, const Vector& m,
                        const Vector& v, double cross, const UnitEffectMoments& unit) const override {
    const LinkFunction& link = link_of(model.spec.link);
    const double total = w_in.sum();
    const Vector w = w_in / total;
    double mean = 0, var = cross / (total * total);
    for (Index i = 0; i < w.size(); ++i) {
      mean += w[i] * link.mean(m[i], v[i]);
      var += w[i] * w[i] * link.variance(m[i], v[i]);
    }
    mean = std::clamp(mean, kFloor, 1 - kFloor);
    if (unit.var > 0 || unit.mean != 0) {
      double c = 0, tau = 0;
      logit_normal_with(mean, 1 - mean, std::clamp(var, 0.0, 0.999 * mean * (1 - mean)), c, tau);
      mean = link.mean(c + unit.mean, tau + unit.var);
      var = link.variance(c + unit.mean, tau + unit.var);
      mean = std::clamp(mean, kFloor, 1 - kFloor);
    }
    const double n = obs.trials, y = obs.y;
    const double concentration = mean * (1 - mean) / std::max(var, 1e-300) - 1;
    const double binomial = log_choose(n, y) + y * std::log(mean) + (n - y) * std::log1p(-mean);
    if (!(concentration > 0)) return -binomial;
    const double a = mean * concentration, b = (1 - mean) * concentration;
    // log BetaBinomial(y | n, a, b) = log C(n, y) + log B(y + a, n - y + b) - log B(a, b), as the
    // binomial's log pmf and three gamma ratios, which vanish as the concentration grows.
    return -(binomial + gamma_ratio(y, a) + gamma_ratio(n - y, b) - gamma_ratio(n, a + b));
  }

  double draw(const Model&, double pi, double trials, const Vector&, std::mt19937_64& rng) const override {
    const double p = std::clamp(pi, 0.0, 1.0);
    return static_cast<double>(std::binomial_distribution<long long>(static_cast<long long>(trials), p)(rng));
  }

 private:
  // A prevalence of exactly 0 or 1 (sigma saturating in double precision) would make log p
  // infinite for any survey that disagrees with it.
  static constexpr double kFloor = 1e-12;
};

}  // namespace

const BagLikelihood& binomial_likelihood() {
  static const Binomial b;
  return b;
}

}  // namespace vbagg
