#include "folds.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "inducing.hpp"

namespace vbagg {

namespace {

struct FoldBlocksPlaced {
  std::vector<Index> fold;
  Matrix centres;  // 2 x folds
};

Index nearest_centre(const Matrix& centres, const Eigen::Ref<const Vector>& point) {
  Index best = 0;
  (centres.colwise() - point).colwise().squaredNorm().minCoeff(&best);
  return best;
}

FoldBlocksPlaced place_fold_blocks(const Matrix& centroids, Index folds, unsigned long long seed) {
  const Index n = centroids.cols();
  if (folds < 2) throw ConfigError("cross-validation needs at least 2 folds");
  if (folds > n)
    throw ConfigError("cross-validation with " + std::to_string(folds) +
                      " folds needs at least as many units; there are " + std::to_string(n));
  KMeansOptions km;
  km.seed = seed;
  km.iterations = 50;
  FoldBlocksPlaced b;
  b.centres = kmeans_plus_plus(centroids, folds, km);
  if (b.centres.cols() < folds)
    throw ConfigError("only " + std::to_string(b.centres.cols()) +
                      " distinct unit centroids: " + std::to_string(folds) + " spatial folds are not possible");
  std::vector<Index>& fold = b.fold;
  fold.resize(static_cast<size_t>(n));
  std::vector<Index> size(static_cast<size_t>(folds), 0);
  for (Index a = 0; a < n; ++a) {
    fold[static_cast<size_t>(a)] = nearest_centre(b.centres, centroids.col(a));
    ++size[static_cast<size_t>(fold[static_cast<size_t>(a)])];
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
      const double d = (centroids.col(a) - b.centres.col(f)).squaredNorm();
      if (pick < 0 || d < best) pick = a, best = d;
    }
    fold[static_cast<size_t>(pick)] = f;
    --size[static_cast<size_t>(largest)];
    ++size[static_cast<size_t>(f)];
  }
  return b;
}

}  // namespace

std::vector<Index> spatial_folds(const Matrix& centroids, Index folds, unsigned long long seed) {
  return place_fold_blocks(centroids, folds, seed).fold;
}

std::vector<Index> spatial_folds(const Matrix& centroids, Index folds, unsigned long long seed,
                                 const std::vector<Index>& placing) {
  Matrix chosen(centroids.rows(), static_cast<Index>(placing.size()));
  for (size_t i = 0; i < placing.size(); ++i) {
    if (placing[i] < 0 || placing[i] >= centroids.cols())
      throw std::invalid_argument("spatial_folds: placing unit " + std::to_string(placing[i]) + " of " +
                                  std::to_string(centroids.cols()));
    chosen.col(static_cast<Index>(i)) = centroids.col(placing[i]);
  }
  const FoldBlocksPlaced b = place_fold_blocks(chosen, folds, seed);
  std::vector<Index> fold(static_cast<size_t>(centroids.cols()));
  for (Index a = 0; a < centroids.cols(); ++a)
    fold[static_cast<size_t>(a)] = nearest_centre(b.centres, centroids.col(a));
  for (size_t i = 0; i < placing.size(); ++i) fold[static_cast<size_t>(placing[i])] = b.fold[i];
  return fold;
}

}  // namespace vbagg
