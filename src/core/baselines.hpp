// Baselines of MODEL.md section 9 that need no fitting.
#pragma once

#include "dataset.hpp"

namespace vbagg {

// Constant within-bag rate: lambda_i = y_a / P_a for every pixel of bag a (dataset order).
Vector constant_rate(const Dataset& data);
// The rate outside training bags: sum y / sum P.
double overall_rate(const Dataset& data);

}  // namespace vbagg
