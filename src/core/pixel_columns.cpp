#include "pixel_columns.hpp"

#include <algorithm>
#include <unordered_map>

namespace vbagg {

std::vector<Index> sample_columns(Index N, Index n, std::mt19937_64& rng) {
  // The shuffle of an identity array, keeping only the entries it moved: entry i is final once
  // step i is done, and the steps after it only touch entries beyond i.
  std::unordered_map<Index, Index> moved;
  auto at = [&](Index i) {
    const auto it = moved.find(i);
    return it == moved.end() ? i : it->second;
  };
  std::vector<Index> out(static_cast<size_t>(std::min(n, N)));
  for (Index i = 0; i < static_cast<Index>(out.size()); ++i) {
    const Index j = i + static_cast<Index>(rng() % static_cast<unsigned long long>(N - i));
    const Index vi = at(i);
    out[static_cast<size_t>(i)] = at(j);
    moved[j] = vi;
    moved.erase(i);
  }
  return out;
}

PixelColumns::PixelColumns(const Matrix& inputs) : matrix_(&inputs), count_(inputs.cols()), rows_(inputs.rows()) {}

PixelColumns::PixelColumns(const Dataset& local, const Shard& shard)
    : local_(&local), shard_(&shard), rows_(local.num_inputs()) {
  for (Index pixels : shard.pixels) {
    begin_.push_back(count_);
    count_ += pixels;
  }
}

Matrix PixelColumns::gather(const std::vector<Index>& columns) const {
  const auto k = static_cast<Index>(columns.size());
  if (matrix_) {
    Matrix X(rows_, k);
    for (Index i = 0; i < k; ++i) X.col(i) = matrix_->col(columns[static_cast<size_t>(i)]);
    return X;
  }
  // Each process fills the columns of its bags; the others stay zero, so the sum is exact.
  Matrix X = Matrix::Zero(rows_, k);
  for (Index i = 0; i < k; ++i) {
    const Index c = columns[static_cast<size_t>(i)];
    const auto bag = static_cast<size_t>(std::upper_bound(begin_.begin(), begin_.end(), c) - begin_.begin() - 1);
    const Index a = shard_->local[bag];
    if (a >= 0) X.col(i) = local_->inputs.col(local_->bag_begin(a) + c - begin_[bag]);
  }
  shard_->processes->sum(X);
  return X;
}

}  // namespace vbagg
