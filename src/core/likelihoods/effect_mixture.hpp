// An effect u ~ N(0, sigma^2) added to a bag's linear predictor (the count's log rate, the
// binomial's logit) and integrated out of its observation model (MODEL.md 4g): the mixture
// log int exp(sum_j k_j(t_j + u)) N(u; 0, sigma^2) du over one or more bags j that share u, by an
// adaptive Gauss-Hermite rule centred on the mode of the log-concave integrand (unit_effect.cpp).
#pragma once

#include "core/types.hpp"

namespace vbagg {

// The part of bag j's log likelihood that depends on its linear predictor x, concave in x, with
// d/dx and d^2/dx^2 into *d1 and *d2, and d/d params into *dparams when non-null (sized by the
// callee).
class PredictorKernel {
 public:
  virtual ~PredictorKernel() = default;
  virtual double at(Index j, double x, double* d1, double* d2, Vector* dparams) const = 0;
  // d/dx and d^2/dx^2 alone, for the search for the mode: a kernel may spare the value's cost.
  virtual void slopes(Index j, double x, double* d1, double* d2) const { at(j, x, d1, d2, nullptr); }
};

struct EffectMixture {
  double value = 0;  // log int exp(sum_j k_j(t_j + u)) N(u; 0, sigma^2) du
  Vector d1;         // d/dt_j
  Vector d2;         // d^2/dt_j^2
  double d_log_sd = 0;
  Vector dparams;
  double mode = 0;               // of the integrand in u
  double u_mean = 0, u_var = 0;  // moments of u under the normalised integrand: u's conditional
  // d u_mean / d t_j = Cov(u, k_j'(t_j + u)) under the normalised integrand: how u's conditional
  // mean moves when bag j's linear predictor does (a higher rate leaves less for the effect). Only
  // `with_slopes`: predictions need it, the fit's terms do not.
  Vector du_mean;
};

// The mixture at the linear predictors t[0..n-1]; `start` is where the search for the mode begins
// (a nearby mixture's mode saves Newton steps), `num_params` the size of the kernel's dparams.
EffectMixture effect_mixture(const PredictorKernel& kernel, const double* t, Index n, double log_sd, double start,
                             Index num_params, bool with_params, bool with_slopes = false);

}  // namespace vbagg
