// The model a fit starts from: q at the prior, the inducing inputs, the kernel, mean and
// likelihood parameters from the data (MODEL.md sections 3 and 6).
#pragma once

#include <vector>

#include "dataset.hpp"
#include "model.hpp"
#include "pixel_columns.hpp"
#include "shard.hpp"

namespace vbagg {

struct InitOptions {
  Index inducing = 200;  // M (capped at the number of distinct training inputs)
  double jitter = 1e-6;
  unsigned long long seed = 1;
  // Inputs (D x N) over which the inducing points are spread; null: the training pixels. Give
  // every pixel the model will predict (all units, with or without counts): the low-rank part
  // of q is what carries correlated uncertainty into a unit's total, and a region without
  // inducing points would keep only independent per-pixel residuals, which cancel in the sum.
  const PixelColumns* placement = nullptr;
  // A data-parallel run: `train` is this process's share of the training bags, whose whole the
  // shard describes; every process gets the same model (null: one process holds them all).
  const Shard* shard = nullptr;
};

// q equal to the prior (m_v = 0, L_v = I), inducing inputs by k-means++ on the training pixels
// (or options.placement), kernel by the median heuristic, constant mean matched to the overall
// rate for the link, a linear mean from a Poisson regression of the bag totals.
Model init_model(const ModelSpec& spec, const Kernel& kernel, const Dataset& train, const InitOptions& options);

// Records the listed bags of data (by Dataset::bag_id) as the training units of the model's unit
// effect, whose own effects predictions then condition on their counts. No-op without a unit
// effect. init_model records every bag of its data; fit() the bags it trains on.
void attach_unit_effects(Model& model, const Dataset& data, const std::vector<Index>& bags);

}  // namespace vbagg
