// The binomial bag term's deterministic expectation (model.expectation: delta), binomial_delta.cpp.
#pragma once

#include "core/bag.hpp"
#include "core/model.hpp"

namespace vbagg {

// E_q[y log pi_a + (n - y) log(1 - pi_a)] with pi_a = sum_i w_i sigma(f_i), the weights w summing
// to 1 (the bag term without its constant log C(n, y)), and its derivatives into *grad when
// non-null. Reads bag.C (covariance mode exact) or bag.d and bag.t (nystrom).
// With a unit effect (bag.has_unit_effect) the term is that of the mixture over the effect
// (binomial_effect.hpp), and its derivative in the effect's log sd goes into grad->g_unit_log_sd.
double binomial_delta_term(const ModelSpec& spec, const BagPosterior& bag, const Vector& w, BagGradient* grad);

// The (c, tau) whose logit-normal sigma(N(c, tau)) has mean `mean` (in (0, 1); mean_c = 1 - mean,
// passed apart so that neither loses digits to the other) and variance `var`
// (0 <= var < mean (1 - mean)); tau = 0 when var is 0.
void logit_normal_with(double mean, double mean_c, double var, double& c, double& tau);

}  // namespace vbagg
