// The shared shape of the count likelihoods (Poisson, negative binomial): each is a scalar
// function of the bag-mean summary of its link (CountMoments), so a count likelihood only writes
// that function, its NLL and its draw; the link does the vector calculus.
#pragma once

#include <cmath>

#include "core/likelihood.hpp"
#include "core/link.hpp"

namespace vbagg {

class CountLikelihood : public BagLikelihood {
 public:
  std::vector<Link> links() const override { return {Link::exp, Link::square}; }
  bool is_count() const override { return true; }
  // At a point estimate the delta method's covariance must vanish: nystrom form only.
  bool allows_map(const ModelSpec& spec) const override {
    return spec.link == Link::exp &&
           (spec.expectation == Expectation::bound || spec.covariance == CovarianceMode::nystrom);
  }
  const char* intensity_unit() const override { return "cases per person"; }
  BagNeeds needs(const ModelSpec& spec) const override { return link_of(spec.link).count_needs(spec); }
  double term(const ModelSpec& spec, const Vector& params, const BagPosterior& bag, BagGradient* grad) const override;
  void initialise(const Dataset& train, Model& model) const override;
  double predictive_nll(const Model& model, const Observation& obs, const Vector& w, const Vector& m, const Vector& v,
                        double, const UnitEffectMoments& unit) const override;
  // The bag's total taken as lognormal with its mean and variance, as the terms take log mu
  // (unit_effect_score) but with the log variance log(1 + Var / E^2) in place of their first-order
  // Var / E^2 (exact for one pixel of the exp link); that variance added to the unit effect's, and the
  // count mixed over both.
  double predictive_nll_integrated(const Model& model, const Observation& obs, const Vector& w, const Vector& m,
                                   const Vector& v, double cross, const UnitEffectMoments& unit) const override;
  double draw(const Model& model, double eta, double trials, const Vector& w, std::mt19937_64& rng) const override;
  double aggregate_log_p(const Vector& params, const BagPosterior& bag, const Vector& w, double eta,
                         AggregateGradient* g) const override;
  // The effect on the log rate has mean -sigma^2/2, so that E[e^u] = 1 (unit_effect.cpp).
  bool defines_unit_effect() const override { return true; }
  UnitEffectMoments unit_effect_prior(double log_sd) const override;
  UnitEffectMoments unit_effect_given(const Observation& obs, double expected, const Vector& params,
                                      double log_sd) const override;
  double expected_with_unit_effect(double expected, double, const UnitEffectMoments& unit) const override {
    return expected * std::exp(unit.mean + 0.5 * unit.var);
  }
  double aggregate_with_unit_effect(double eta, double u) const override { return eta * std::exp(u); }

  // l_a from the summary, with d l_a / d(summary) into *d and d l_a / d params into *g_params.
  virtual double score(double y, const CountMoments& mo, const Vector& params, CountMomentsGradient* d,
                       Vector* g_params) const = 0;
  // -log p(y | mean) of the observation model alone.
  virtual double count_nll(double y, double mean, const Vector& params) const = 0;
  virtual double count_draw(double mean, const Vector& params, std::mt19937_64& rng) const = 0;

  // log p(y | mean = e^s) = log_pmf_constant(y) + log_pmf_kernel(y, s): the part that depends on
  // s with its first two derivatives in s, and the rest; each with d/d params into dparams when
  // non-null (sized by the callee). For the unit effect's integral over the log rate.
  virtual double log_pmf_kernel(double y, double s, const Vector& params, double* d1, double* d2,
                                Vector* dparams) const = 0;
  virtual double log_pmf_constant(double y, const Vector& params, Vector* dparams) const = 0;

 protected:
  // The likelihood's parameters at the start, given the training bags and their overall rate.
  virtual Vector initial_params(const Dataset&, double) const { return Vector(); }
};

// The unit effect u ~ N(-sigma^2/2, sigma^2) (E[e^u] = 1) integrated out of a count likelihood
// (MODEL.md 4g, unit_effect.cpp): l_a = E_q[log int p(y | e^u mu_a) N(u; -sigma^2/2, sigma^2) du],
// with log mu_a taken as Normal with the
// delta method's moments (mean log E[mu] - rho/2, variance rho). Derivatives as in score, and
// d l_a / d log sigma into *g_log_sd.
double unit_effect_score(const CountLikelihood& lik, double y, const CountMoments& mo, const Vector& params,
                         double log_sd, CountMomentsGradient* d, Vector* g_params, double* g_log_sd);

// log int p(y | e^{log_total + u}) N(u; -sigma^2/2, sigma^2) du, sigma = e^{log_sd}, with its
// derivatives in log_total, the likelihood's parameters and log_sd (each when non-null).
double unit_effect_mixture(const CountLikelihood& lik, double y, double log_total, const Vector& params, double log_sd,
                           double* d_log_total, Vector* d_params, double* d_log_sd);

// log of the mixture int p(y | e^u total) N(u; unit.mean, unit.var) du (unit.var > 0): the
// predictive probability of a count given its expected total without the effect.
double unit_effect_log_pmf(const CountLikelihood& lik, double y, double total, const Vector& params,
                           const UnitEffectMoments& unit);

// Mean and variance of a unit's effect given its count y and its expected total without the
// effect (the adaptive Gauss-Hermite rule of unit_effect_score).
UnitEffectMoments unit_effect_posterior(const CountLikelihood& lik, double y, double total, const Vector& params,
                                        double log_sd);

// A unit effect shared by a unit's bags (one per period; MODEL.md 4g): the unit's term is
// E_q[log int prod_j p(y_j | e^u mu_j) N(u; -sigma^2/2, sigma^2) du], with the log mu_j jointly
// Normal: each with its bag's delta-method moments (mean, rho), and covariances h_j . h_k between
// bags whose moments carry h (CountMoments::h). The derivatives with respect to each bag's mean,
// rho and h into (*d)[j], as unit_effect_score gives them for one bag, which it equals for a unit
// of one bag.
double shared_unit_effect_score(const CountLikelihood& lik, const std::vector<double>& y,
                                const std::vector<CountMoments>& mo, const Vector& params, double log_sd,
                                std::vector<CountMomentsGradient>* d, Vector* g_params, double* g_log_sd);

// Mean and variance of a unit's shared effect given the counts y_j of its bags and their expected
// totals without the effect; with `slopes`, d mean / d log total_j into (*slopes)[j] (0 for a bag
// of zero total).
UnitEffectMoments shared_unit_effect_posterior(const CountLikelihood& lik, const std::vector<double>& y,
                                               const std::vector<double>& totals, const Vector& params, double log_sd,
                                               std::vector<double>* slopes = nullptr);

// One Poisson draw. A non-finite mean (a broken model) is a NumericalError rather than the
// endless loop of std::poisson_distribution; beyond 10^12 the normal approximation is exact to
// the count's precision.
double poisson_draw(double mean, std::mt19937_64& rng);

// sum_a y_a / sum_a P_a over the training bags; a DataError when it is not positive.
double initial_rate(const Dataset& train);

}  // namespace vbagg
