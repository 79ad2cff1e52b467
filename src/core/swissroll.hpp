// The swiss-roll bag problem of MODEL.md section 10 (paper section 4.1). Bags are filled along
// the z axis (t sin t) as the paper does; MODEL.md's "sorted by height" would make bags
// independent of the rate.
#pragma once

#include "dataset.hpp"

namespace vbagg {

struct SwissRollOptions {
  Index bags = 100;
  double size_mean = 150;  // bag sizes: negative binomial + 1 with this mean and sd
  double size_sd = 50;
  Index dim = 18;  // ambient dimension after zero-padding and rotation
  unsigned long long seed = 1;
};

struct SwissRoll {
  Dataset data;         // standardised inputs, population 1, y_a ~ Poisson(sum lambda_i)
  Vector rate;          // true lambda_i = 0.5 t_i per pixel (dataset order)
  Vector pixel_counts;  // individual labels y_i ~ Poisson(lambda_i), for pixel-level NLL
};

SwissRoll make_swiss_roll(const SwissRollOptions& options);

}  // namespace vbagg
