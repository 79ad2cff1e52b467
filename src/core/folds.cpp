#include "folds.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "inducing.hpp"

namespace vbagg {

std::vector<Index> spatial_folds(const Matrix& centroids, Index folds, unsigned long long seed) {
  return spatial_folds(centroids, folds, seed, centroids.cols());
}

std::vector<Index> spatial_folds(const Matrix& all, Index folds, unsigned long long seed, Index placing) {
  if (placing < 0 || placing > all.cols())
    throw std::invalid_argument("spatial_folds: " + std::to_string(placing) + " placing units of " +
                                std::to_string(all.cols()));
  const auto centroids = all.leftCols(placing);
  const Index n = placing;
  if (folds < 2) throw ConfigError("cross-validation needs at least 2 folds");
  if (folds > n)
    throw ConfigError("cross-validation with " + std::to_string(folds) +
                      " folds needs at least as many units; there are " + std::to_string(n));
  KMeansOptions km;
  km.seed = seed;
  km.iterations = 50;
  const Matrix centres = kmeans_plus_plus(centroids, folds, km);
  if (centres.cols() < folds)
    throw ConfigError("only " + std::to_string(centres.cols()) + " distinct unit centroids: " + std::to_string(folds) +
                      " spatial folds are not possible");
  std::vector<Index> fold(static_cast<size_t>(n));
  std::vector<Index> size(static_cast<size_t>(folds), 0);
  for (Index a = 0; a < n; ++a) {
    Index best = 0;
    (centres.colwise() - centroids.col(a)).colwise().squaredNorm().minCoeff(&best);
    fold[static_cast<size_t>(a)] = best;
    ++size[static_cast<size_t>(best)];
  }
  // A centre nobody is nearest to (possible after Lloyd's last move) takes the unit nearest to it
  // from the largest fold, so every fold holds units out.
  for (Index f = 0; f < folds; ++f) {
    if (size[static_cast<size_t>(f)] > 0) continue;
    const Index largest = static_cast<Index>(std::max_element(size.begin(), size.end()) - size.begin());
    Index pick = -1;
    double best = 0;
    for (Index a = 0; a < n; ++a) {
      if (fold[static_cast<size_t>(a)] != largest) continue;
      const double d = (centroids.col(a) - centres.col(f)).squaredNorm();
      if (pick < 0 || d < best) pick = a, best = d;
    }
    fold[static_cast<size_t>(pick)] = f;
    --size[static_cast<size_t>(largest)];
    ++size[static_cast<size_t>(f)];
  }
  for (Index a = n; a < all.cols(); ++a) {
    Index best = 0;
    (centres.colwise() - all.col(a)).colwise().squaredNorm().minCoeff(&best);
    fold.push_back(best);
  }
  return fold;
}

}  // namespace vbagg
