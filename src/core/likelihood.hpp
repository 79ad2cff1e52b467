// Bag likelihoods: the term l_a of the ELBO (MODEL.md section 4) with its derivatives, the
// likelihood's own parameters, its initialisation, its predictive NLL and its observation draws.
// A new likelihood is one file in likelihoods/ plus one line in likelihood_registry() (and its
// value in the LikelihoodKind enum); the gradient, determinism and cross-check tests iterate
// over the registry.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "bag.hpp"
#include "dataset.hpp"
#include "model.hpp"

namespace vbagg {

// A bag's observation: the response y and, for the binomial model, the number tested.
struct Observation {
  double y = 0;
  double trials = 0;
};

class BagLikelihood {
 public:
  virtual ~BagLikelihood() = default;
  virtual LikelihoodKind id() const = 0;
  virtual const char* name() const = 0;
  // The links it is defined for; the first is the default.
  virtual std::vector<Link> links() const = 0;
  // Names of its own parameters (stored in Model::likelihood_params, learned with the rest).
  virtual std::vector<std::string> param_names() const { return {}; }
  // Whether a fit first holds the likelihood's parameters at their start and frees them in a
  // second stage (FitOptions::staged): for a dispersion that could otherwise explain the data as
  // noise before the field does.
  virtual bool fit_parameters_later() const { return false; }
  // Counts (Poisson, negative binomial): y_a is a non-negative count of cases.
  virtual bool is_count() const { return false; }
  virtual bool has_delta_method() const { return true; }
  // Whether the bound expectation (term() under Expectation::bound) exists; without it the
  // likelihood takes the delta method (if it has one) or the sampled expectation.
  virtual bool has_bound() const { return true; }
  // Whether each bag carries a number of trials (Dataset::trials): the binomial model.
  virtual bool needs_trials() const { return false; }
  virtual bool allows_map(const ModelSpec& spec) const = 0;
  // Unit of the intensity maps, for band metadata.
  virtual const char* intensity_unit() const { return "value per unit weight"; }
  // Unit of population x intensity (the cases map).
  virtual const char* total_unit() const { return "cases"; }

  // Which of T and C the term reads.
  virtual BagNeeds needs(const ModelSpec& spec) const = 0;
  // l_a with constants; derivatives into *grad when non-null.
  virtual double term(const ModelSpec& spec, const Vector& params, const BagPosterior& bag,
                      BagGradient* grad) const = 0;

  // The constant prior mean and the likelihood's parameters at the start of a fit.
  virtual void initialise(const Dataset& train, Model& model) const = 0;

  // Weights of the bag's aggregate from the pixels' effective weights (the Normal model's mean
  // aggregation and the binomial's prevalence divide them by their sum).
  virtual Vector aggregate_weights(const ModelSpec&, const Vector& w) const { return w; }
  // E[y_a] from the expected aggregate E[eta_a] (the binomial's expected positives: trials x
  // prevalence).
  virtual double expected_observation(double expected_aggregate, double /*trials*/) const { return expected_aggregate; }
  // Negative log predictive density of a bag's observation y, from the latent marginals m, v of
  // its pixels (weights w as stored in the data), their covariances' share of the bag's variance
  // `cross` (bag_cross_covariances with g_i = w_i E[Psi'(f_i)]; 0 unless
  // predictive_reads_covariance()) and its unit effect (where the likelihood defines one).
  virtual double predictive_nll(const Model& model, const Observation& obs, const Vector& w, const Vector& m,
                                const Vector& v, double cross, const UnitEffectMoments& unit) const = 0;
  // The unit effect (MODEL.md 4g): u_a ~ N(prior mean, sigma_u^2) added to the bag's linear
  // predictor (a count's log rate, the binomial's logit) and integrated out of its observation
  // model. The rest of this block is only called on a likelihood that defines one.
  virtual bool defines_unit_effect() const { return false; }
  // The effect's prior at sigma_u = e^{log_sd}.
  virtual UnitEffectMoments unit_effect_prior(double log_sd) const;
  // A fitted unit's effect given its observation and its expected observation without the effect.
  virtual UnitEffectMoments unit_effect_given(const Observation& obs, double expected, const Vector& params,
                                              double log_sd) const;
  // The expected observation with an effect u ~ N(unit.mean, unit.var), from that without it.
  virtual double expected_with_unit_effect(double expected, double trials, const UnitEffectMoments& unit) const;
  // The aggregate eta of a draw of the field moved by a draw u of the effect.
  virtual double aggregate_with_unit_effect(double eta, double u) const;

  // Whether predictive_nll reads `cross`. The count and Normal models score bags as the papers do
  // (MODEL.md section 8: the Poisson NLL of the expected total; the Normal with marginal
  // variances), so their figures compare with the papers'.
  virtual bool predictive_reads_covariance() const { return false; }
  // The same density with the field's uncertainty integrated (`cross` always computed; the count
  // likelihoods take the bag's total as lognormal with its mean and variance): a proper score of
  // the predictive distribution whose intervals vbagg-eval reports. The count likelihoods override
  // it; elsewhere it is predictive_nll, which for the binomial already integrates the field, for
  // the Normal its marginal variances, and for the exponential nothing.
  virtual double predictive_nll_integrated(const Model& model, const Observation& obs, const Vector& w, const Vector& m,
                                           const Vector& v, double cross, const UnitEffectMoments& unit) const {
    return predictive_nll(model, obs, w, m, v, cross, unit);
  }
  // log p(y | eta) of the bag's observation given its aggregate eta = sum_i w_i Psi(f_i) (aggregate
  // weights w), with d/d eta, d/d params and (count likelihoods with a unit effect, which this
  // integrates out) d/d unit_log_sd: the sampled expectation (MODEL.md 4e ii) averages it over
  // draws of f.
  struct AggregateGradient {
    double d_eta = 0;
    Vector d_params;
    double d_unit_log_sd = 0;
  };
  virtual double aggregate_log_p(const Vector& params, const BagPosterior& bag, const Vector& w, double eta,
                                 AggregateGradient* g) const = 0;
  // One draw of the observation given eta = sum_i w_i Psi(f_i) of a joint draw of f, with the
  // aggregate weights w (and the bag's trials, for the binomial model).
  virtual double draw(const Model& model, double eta, double trials, const Vector& w, std::mt19937_64& rng) const = 0;
};

// Every likelihood, in the order of the LikelihoodKind enum.
const std::vector<const BagLikelihood*>& likelihood_registry();
const BagLikelihood& likelihood_of(LikelihoodKind kind);

// Which of T and C the model's bag term reads.
BagNeeds bag_needs(const ModelSpec& spec);

// The sampled expectation (MODEL.md 4e ii, sampled_expectation.cpp): (1/S) sum_s log p(y | eta(f_s))
// over S draws of f from q keyed by BagPosterior::draws, with pathwise derivatives.
double sampled_bag_term(const ModelSpec& spec, const BagLikelihood& lik, const Vector& params, const BagPosterior& bag,
                        BagGradient* grad);

// l_a, with constants; gradients into *grad when non-null.
double bag_term(const ModelSpec& spec, const Vector& params, const BagPosterior& bag, BagGradient* grad);

}  // namespace vbagg
