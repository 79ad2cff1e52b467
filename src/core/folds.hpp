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

// The same with the blocks placed by the listed units alone: they get exactly the folds
// spatial_folds gives them without the rest, and every other unit joins the fold of the nearest
// block centre. A joint fit's source is then held out fold by fold as in its fit alone, so the two
// can be compared on the same held-out units, and the other sources' units (a province, a survey
// cluster) go with the block they lie in.
std::vector<Index> spatial_folds(const Matrix& centroids, Index folds, unsigned long long seed,
                                 const std::vector<Index>& placing);

}  // namespace vbagg
