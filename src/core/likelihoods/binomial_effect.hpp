// The binomial's unit effect (MODEL.md 4g on the logit scale): a survey unit's or cluster's
// prevalence is sigma(ell + u), ell its logit under the field and u ~ N(0, sigma_u^2) its own
// departure from the field (households, clinics, the day of the survey), integrated out:
// log int Binomial(y | n, sigma(ell + u)) N(u; 0, sigma_u^2) du, by the adaptive rule of
// effect_mixture.hpp. The effect has mean 0, so sigma(f) is the prevalence of a typical unit: an
// effect on the logit cannot keep the mean prevalence as the count's -sigma^2/2 keeps the mean rate.
#pragma once

#include "core/model.hpp"
#include "effect_mixture.hpp"

namespace vbagg {

// Below this sd, derivatives in the variance of a Normal take Stein's lemma (d/d s^2 E h = E h'' / 2)
// rather than the quadrature rule's own derivative, sum_k w_k h'(x_k) z_k / (2 s), whose sum cancels.
constexpr double kSteinBelow = 1e-6;

// The mixture at the logit x, without log C(n, y).
EffectMixture binomial_mixture(double y, double n, double x, double log_sd, double start = 0.0);

// E[G(ell)] over ell ~ N(c, s^2) of the mixture G (binomial_mixture), by Gauss-Hermite over ell,
// with its derivatives in c, tau = s^2 and log sd (each only when `derivatives`).
struct LogitExpectation {
  double value = 0, d_centre = 0, d_tau = 0, d_log_sd = 0;
};
LogitExpectation binomial_effect_expectation(double y, double n, double c, double s, double log_sd, bool derivatives);

}  // namespace vbagg
