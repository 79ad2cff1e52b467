// Inducing-input initialisation.
#pragma once

#include <vector>

#include "types.hpp"

namespace vbagg {

struct KMeansOptions {
  Index max_points = 100000;  // k-means runs on a seeded subsample of at most this many pixels
  int iterations = 10;        // Lloyd iterations after k-means++ seeding
  unsigned long long seed = 1;
};

// k-means++ seeding followed by Lloyd iterations on the columns of X (D x N). Returns D x k
// centres, k = min(count, number of distinct columns), so no two inducing inputs coincide.
Matrix kmeans_plus_plus(const Matrix& X, Index count, const KMeansOptions& options = {});

// The same in two steps, for inputs spread over processes (PixelColumns::gather in between): the
// column indices of the subsample of N columns, then k-means++ and Lloyd on those columns.
std::vector<Index> kmeans_sample(Index N, const KMeansOptions& options);
Matrix kmeans_on_sample(const Matrix& sample, Index count, const KMeansOptions& options);

}  // namespace vbagg
