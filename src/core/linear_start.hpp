// Where the linear mean starts (MODEL.md section 3): a Poisson regression of the bag counts on the
// covariates, so the kernel starts on what the linear part leaves.
#pragma once

#include <vector>

#include "collective.hpp"
#include "dataset.hpp"
#include "model.hpp"

namespace vbagg {

// The intercept c and coefficients beta of a log-linear rate fitted to the listed bags' counts,
// y_a ~ Poisson(sum_{i in a} c_i p_i exp(c + beta^T x_i)) over the first `inputs` rows of the
// inputs, with beta's prior N(0, prior_sd^2 I) (0: none), by Fisher scoring with halved steps
// from the bags' overall rate and beta = 0. With `processes`, the bags are this process's share
// and every process gets the same answer. Returns false, leaving c and beta alone, when the
// counts give no positive rate or the scoring does not stay finite.
bool poisson_regression(const Dataset& data, const std::vector<Index>& bags, Index inputs, double prior_sd,
                        const Collective* processes, double& c, Vector& beta);

// Starts each task's linear mean (point estimates) from poisson_regression on the task's first
// source when that is a count source with the exp link, keeping the offset the likelihood put
// between the mean and the log of the overall rate. Other tasks, variational fixed effects and
// models without a linear mean are left as they are.
void start_linear_mean(Model& model, const Dataset& data, const Collective* processes);

}  // namespace vbagg
