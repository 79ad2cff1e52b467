#include "inducing.hpp"

#include <algorithm>
#include <random>

#include "pixel_columns.hpp"

namespace vbagg {

namespace {

// Squared distance of every column of X to its nearest centre, and that centre's index. The
// distances go through one buffer of k x 2048, not a k x n matrix per call: at 576 centres and
// 10^5 sampled pixels that matrix is 460 MB, and allocating and zeroing it every Lloyd iteration
// cost more than the products.
void nearest(const Matrix& X, const Matrix& C, Vector& d2, std::vector<Index>& which) {
  const Index n = X.cols(), block = 2048;
  const Vector c2 = C.colwise().squaredNorm().transpose();
  d2.resize(n);
  which.resize(static_cast<size_t>(n));
  Matrix D(C.cols(), std::min(block, n));
  for (Index b = 0; b < n; b += block) {
    const Index len = std::min(block, n - b);
    auto Db = D.leftCols(len);
    Db.noalias() = -2.0 * C.transpose() * X.middleCols(b, len);
    Db.colwise() += c2;
    Db.rowwise() += X.middleCols(b, len).colwise().squaredNorm();
    for (Index i = 0; i < len; ++i) d2[b + i] = std::max(0.0, Db.col(i).minCoeff(&which[static_cast<size_t>(b + i)]));
  }
}

}  // namespace

std::vector<Index> kmeans_sample(Index N, const KMeansOptions& options) {
  std::mt19937_64 rng(options.seed);
  return sample_columns(N, options.max_points, rng);
}

Matrix kmeans_plus_plus(const Matrix& X_all, Index count, const KMeansOptions& options) {
  return kmeans_on_sample(PixelColumns(X_all).gather(kmeans_sample(X_all.cols(), options)), count, options);
}

Matrix kmeans_on_sample(const Matrix& X, Index count, const KMeansOptions& options) {
  // The generator goes on from where kmeans_sample left it: one draw per sampled column.
  std::mt19937_64 rng(options.seed);
  rng.discard(static_cast<unsigned long long>(X.cols()));
  auto uniform = [&](double hi) { return std::uniform_real_distribution<double>(0.0, hi)(rng); };
  const Index n = X.cols();
  std::vector<Index> chosen{static_cast<Index>(rng() % n)};
  Vector d2 = (X.colwise() - X.col(chosen[0])).colwise().squaredNorm().transpose();
  while (static_cast<Index>(chosen.size()) < count) {
    const double total = d2.sum();
    if (!(total > 0)) break;  // every remaining point coincides with a centre
    double r = uniform(total);
    Index pick = 0;
    while (pick < n - 1 && (r -= d2[pick]) > 0) ++pick;
    while (d2[pick] <= 0) pick = (pick + 1) % n;  // never re-pick a centre
    chosen.push_back(pick);
    d2 = d2.cwiseMin((X.colwise() - X.col(pick)).colwise().squaredNorm().transpose());
  }
  const Index k = static_cast<Index>(chosen.size());
  Matrix C(X.rows(), k);
  for (Index j = 0; j < k; ++j) C.col(j) = X.col(chosen[j]);

  std::vector<Index> which;
  for (int it = 0; it < options.iterations; ++it) {
    nearest(X, C, d2, which);
    Matrix sum = Matrix::Zero(X.rows(), k);
    Vector cnt = Vector::Zero(k);
    for (Index i = 0; i < n; ++i) {
      sum.col(which[i]) += X.col(i);
      cnt[which[i]] += 1;
    }
    for (Index j = 0; j < k; ++j)
      if (cnt[j] > 0) C.col(j) = sum.col(j) / cnt[j];  // an empty cluster keeps its centre
  }
  return C;
}

}  // namespace vbagg
