// The ELBO over a set of bags and its analytic gradient (MODEL.md sections 4 and 5).
#pragma once

#include <vector>

#include "dataset.hpp"
#include "model.hpp"

namespace vbagg {

struct ObjectiveOptions {
  int threads = 1;
  // Bags are spread over max(slots, threads) accumulators, each filled in a fixed order, so
  // results are bit-identical for any thread count up to `slots`.
  int slots = 8;
  // Pixels per block of the bag pass (except in exact mode, which takes each bag whole).
  Index block = 2048;
  // Per slot, the blocks of a bag keep their kernel matrices for the backward pass while they
  // fit in this many MiB; larger bags recompute them instead.
  double cache_mb = 64;
};

struct ObjectiveValue {
  double elbo = 0;       // scale * sum_a l_a - KL
  double data_term = 0;  // sum_a l_a over the given bags (unscaled)
  double kl = 0;
  double jitter_used = 0;
};

// ELBO estimate from the given bags: (scale) * sum_{a in bags} l_a - KL, where scale is
// n / |bags| for a minibatch and 1 for the full data. Gradient w.r.t. Model::pack() into *grad.
ObjectiveValue elbo(const Model& model, const Dataset& data, const std::vector<Index>& bags, double scale, Vector* grad,
                    const ObjectiveOptions& options = {});

// All bags of the dataset, scale 1.
ObjectiveValue elbo(const Model& model, const Dataset& data, Vector* grad, const ObjectiveOptions& options = {});

}  // namespace vbagg
