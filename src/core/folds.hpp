// Spatially blocked folds for cross-validation (MODEL.md section 8): units grouped by k-means on
// their centroids, so a held-out unit's neighbours are held out with it.
#pragma once

#include <vector>

#include "types.hpp"

namespace vbagg {

// The fold (0 .. k-1) of every unit, from k-means (k-means++ seeding, Lloyd iterations) on the
// unit centroids, one column per unit. Every fold is non-empty: k is the number of folds asked
// for unless fewer distinct centroids exist, which is a ConfigError, as is folds < 2.
std::vector<Index> spatial_folds(const Matrix& centroids, Index folds, unsigned long long seed);

}  // namespace vbagg
