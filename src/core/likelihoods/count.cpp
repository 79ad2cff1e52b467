#include "count.hpp"

#include <cmath>
#include <limits>

namespace vbagg {

double initial_rate(const Dataset& train) {
  const double rate = train.response.sum() / train.bag_weights().sum();
  if (!(rate > 0)) throw DataError("the training bags have no positive response; the rate cannot be initialised");
  return rate;
}

double poisson_draw(double mean, std::mt19937_64& rng) {
  if (!std::isfinite(mean)) throw NumericalError("a predictive draw has a non-finite mean; the model cannot predict");
  if (!(mean > 0)) return 0.0;
  if (mean > 1e12) return std::max(0.0, std::round(mean + std::sqrt(mean) * std::normal_distribution<double>()(rng)));
  return static_cast<double>(std::poisson_distribution<long long>(mean)(rng));
}

double CountLikelihood::term(const ModelSpec& spec, const Vector& params, const BagPosterior& bag,
                             BagGradient* grad) const {
  const LinkFunction& link = link_of(spec.link);
  CountMoments mo;
  link.count_moments(spec, bag, mo);
  if (bag.shared_unit.record) {
    bag.shared_unit.record->mean = mo.mean;
    bag.shared_unit.record->rho = mo.rho;
    bag.shared_unit.record->h = mo.h;
    return 0.0;
  }
  if (bag.shared_unit.given) {
    if (grad) link.count_moments_backward(spec, bag, mo, *bag.shared_unit.given, *grad);
    return 0.0;
  }
  CountMomentsGradient d;
  Vector g_params;
  double g_log_sd = 0;
  const double value = bag.has_unit_effect
                           ? unit_effect_score(*this, bag.y, mo, params, bag.unit_log_sd, grad ? &d : nullptr,
                                               grad ? &g_params : nullptr, grad ? &g_log_sd : nullptr)
                           : score(bag.y, mo, params, grad ? &d : nullptr, grad ? &g_params : nullptr);
  if (grad) {
    link.count_moments_backward(spec, bag, mo, d, *grad);
    grad->g_params = std::move(g_params);
    grad->g_unit_log_sd = g_log_sd;
  }
  return value;
}

double CountLikelihood::aggregate_log_p(const Vector& params, const BagPosterior& bag, const Vector&, double eta,
                                        AggregateGradient* g) const {
  if (!(eta > 0)) {  // a rate of exactly zero: only y = 0 is possible
    if (g) *g = {};
    return bag.y == 0 ? 0.0 : -std::numeric_limits<double>::infinity();
  }
  const double t = std::log(eta);
  if (bag.has_unit_effect) {
    double d_t = 0;
    const double v = unit_effect_mixture(*this, bag.y, t, params, bag.unit_log_sd, g ? &d_t : nullptr,
                                         g ? &g->d_params : nullptr, g ? &g->d_unit_log_sd : nullptr);
    if (g) g->d_eta = d_t / eta;
    return v;
  }
  double d1 = 0, d2 = 0;
  Vector dk, dc;
  const double v = log_pmf_constant(bag.y, params, g ? &dc : nullptr) +
                   log_pmf_kernel(bag.y, t, params, &d1, &d2, g ? &dk : nullptr);
  if (g) {
    g->d_eta = d1 / eta;
    g->d_params = dc + dk;
  }
  return v;
}

void CountLikelihood::initialise(const Dataset& train, Model& model) const {
  const double rate = initial_rate(train);
  // exp link: E[e^f] = e^{mu + 1/2} under the unit-variance prior; a point estimate has no 1/2.
  model.mean =
      model.spec.link == Link::square ? std::sqrt(rate) : std::log(rate) - (model.spec.map_estimate ? 0.0 : 0.5);
  model.likelihood_params = initial_params(train, rate);
}

double CountLikelihood::predictive_nll(const Model& model, const Observation& obs, const Vector& w, const Vector& m,
                                       const Vector& v, double, const UnitEffectMoments& unit) const {
  const double y = obs.y;
  const double total = link_of(model.spec.link).expected_total(w, m, v);
  if (!(unit.var > 0)) return count_nll(y, std::exp(unit.mean) * total, model.likelihood_params);
  // A unit effect makes the count a mixture over u, much wider than the count model alone.
  return -unit_effect_log_pmf(*this, y, total, model.likelihood_params, unit);
}

double CountLikelihood::predictive_nll_integrated(const Model& model, const Observation& obs, const Vector& w,
                                                  const Vector& m, const Vector& v, double cross,
                                                  const UnitEffectMoments& unit) const {
  const LinkFunction& link = link_of(model.spec.link);
  double total = 0, var = cross;
  for (Index i = 0; i < w.size(); ++i) {
    total += w[i] * link.mean(m[i], v[i]);
    var += w[i] * w[i] * link.variance(m[i], v[i]);
  }
  // log total ~ N(log E - rho / 2, rho), rho = log(1 + Var / E^2): the lognormal with the total's
  // mean and variance (exact for one pixel of the exp link).
  const double rho = std::log1p(std::max(var, 0.0) / (total * total));
  const UnitEffectMoments both{unit.mean - 0.5 * rho, unit.var + rho};
  if (!(both.var > 0)) return count_nll(obs.y, std::exp(both.mean) * total, model.likelihood_params);
  return -unit_effect_log_pmf(*this, obs.y, total, model.likelihood_params, both);
}

UnitEffectMoments CountLikelihood::unit_effect_prior(double log_sd) const {
  const double var = std::exp(2 * log_sd);
  return {-0.5 * var, var};
}

UnitEffectMoments CountLikelihood::unit_effect_given(const Observation& obs, double expected, const Vector& params,
                                                     double log_sd) const {
  return unit_effect_posterior(*this, obs.y, expected, params, log_sd);
}

double CountLikelihood::draw(const Model& model, double eta, double, const Vector&, std::mt19937_64& rng) const {
  return count_draw(eta, model.likelihood_params, rng);
}

}  // namespace vbagg
