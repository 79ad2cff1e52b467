// The binomial bag term's deterministic expectation (model.expectation: delta), binomial_delta.cpp.
#pragma once

#include "core/bag.hpp"
#include "core/model.hpp"

namespace vbagg {

// E_q[y log pi_a + (n - y) log(1 - pi_a)] with pi_a = sum_i w_i sigma(f_i), the weights w summing
// to 1 (the bag term without its constant log C(n, y)), and its derivatives into *grad when
// non-null. Reads bag.C (covariance mode exact) or bag.d and bag.t (nystrom).
double binomial_delta_term(const ModelSpec& spec, const BagPosterior& bag, const Vector& w, BagGradient* grad);

}  // namespace vbagg
