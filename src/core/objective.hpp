// The ELBO over a set of bags and its analytic gradient (MODEL.md sections 4 and 5).
#pragma once

#include <vector>

#include "collective.hpp"
#include "dataset.hpp"
#include "model.hpp"

namespace vbagg {

class FeatureStore;

struct ObjectiveOptions {
  int threads = 1;
  // Bags are spread over max(slots, threads) accumulators, each filled in a fixed order, so
  // results are bit-identical for any thread count up to `slots`.
  int slots = 8;
  // Pixels per block of the bag pass (except in exact mode, which takes each bag whole).
  Index block = 2048;
  // Per thread, the blocks of a bag keep their kernel matrices for the backward pass while they
  // fit in this many MiB; larger bags recompute them instead (at M = 576 this keeps bags of up
  // to about 14,000 pixels). Bags sharing their unit's effect keep their forward passes from
  // their moments to their way back within this many MiB in all (elbo).
  double cache_mb = 256;
  // Also return the gradient of the data term with respect to q's mean and covariance (for
  // natural-gradient steps). Ignored for a MAP estimate, which has no covariance.
  bool q_moments_gradient = false;
  // Only those gradients: the way back into the kernel, the inducing inputs, the mean and the
  // noise model is skipped (the kernel's backward pass, and in the residual form a rank update
  // per pixel), and the gradient vector comes back empty. A natural-gradient step on q alone
  // (the polish's steps before it reads the objective) needs no more.
  bool q_moments_only = false;
  // With q_moments_only: the pixels' features kept between such passes at one kernel (the polish's
  // and the spread's steps on q), filled by the first and read by the next ones. Null: computed.
  FeatureStore* features = nullptr;
  // The most MiB such a store holds (the polish and the spread make one): the features of every
  // pixel, num_q x pixels. A space-time fit of 24 months at M = 200 needs about 290; a national
  // fit of 10^6 pixels would need 1,600, and computes its features as before.
  double feature_store_mb = 1024;
  // The sampled expectation's draws: bag a of this evaluation uses the stream (draw_seed,
  // draw_step, Dataset::global_bag_of(a)). An optimiser advances draw_step every step.
  unsigned long long draw_seed = 0, draw_step = 0;
  // A data-parallel run: the given bags are this process's share of the step's bags, and the
  // returned value and gradients are sums over every process's share (null: one process).
  const Collective* processes = nullptr;
};

struct ObjectiveValue {
  double elbo = 0;       // scale * sum_a l_a - KL
  double data_term = 0;  // sum_a l_a over the given bags (unscaled)
  double kl = 0;
  double jitter_used = 0;
  // With ObjectiveOptions::q_moments_gradient: d(scale * data_term)/dm_v and the symmetric
  // d(scale * data_term)/dS_v, S_v = L_v L_v^T (the KL is not included).
  Vector grad_q_mean;
  Matrix grad_q_cov;
};

// ELBO estimate from the given bags: (scale) * sum_{a in bags} l_a - KL, where scale is
// n / |bags| for a minibatch and 1 for the full data. Gradient w.r.t. Model::pack() into *grad.
// With ObjectiveOptions::processes, every process must call it (with its own bags, possibly none)
// and all receive the same result; a bag that fails on one process throws on every process.
ObjectiveValue elbo(const Model& model, const Dataset& data, const std::vector<Index>& bags, double scale, Vector* grad,
                    const ObjectiveOptions& options = {});

// The listed bags as a unit effect shared by a unit's periods couples them
// (ModelSpec::unit_effect_shared): positions into `bags`, each unit's in listed order, units in
// order of their first bag; a bag without a shared effect is a group of its own.
std::vector<std::vector<size_t>> unit_groups(const ModelSpec& spec, const Dataset& data,
                                             const std::vector<Index>& bags);

// All bags of the dataset, scale 1.
ObjectiveValue elbo(const Model& model, const Dataset& data, Vector* grad, const ObjectiveOptions& options = {});

}  // namespace vbagg
