// Baselines of MODEL.md section 9 that need no fitting.
#pragma once

#include "dataset.hpp"

namespace vbagg {

// Constant within-bag rate: lambda_i = y_a / P_a for every pixel of bag a (dataset order).
Vector constant_rate(const Dataset& data);
// The rate outside training bags: sum y / sum P.
double overall_rate(const Dataset& data);

// bag-pixel baseline: each bag collapsed to one pseudo-pixel with the weight-averaged inputs
// x_a = sum_i c_i p_i x_i / P_a and weight P_a, so the same model can be fitted with bags of one.
Dataset collapse_bags(const Dataset& data);

}  // namespace vbagg
