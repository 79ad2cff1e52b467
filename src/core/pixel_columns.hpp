// Pixel inputs as the initialisation samples them: the columns of one matrix, or the pixels of a
// data-parallel run's bags, each process holding its own. Samples are drawn over the whole, so a
// run gets the same inducing inputs and kernel start however its bags are spread.
#pragma once

#include <random>
#include <vector>

#include "shard.hpp"

namespace vbagg {

// The first n entries of a partial Fisher-Yates shuffle of 0..N-1 (one draw of rng each): a
// sample of n of N columns. Memory grows with n, not N.
std::vector<Index> sample_columns(Index N, Index n, std::mt19937_64& rng);

class PixelColumns {
 public:
  // Every column of `inputs`, in this process.
  explicit PixelColumns(const Matrix& inputs);
  // The pixels of the shard's bags in the order of the whole data; this process holds those of
  // `local`, its share.
  PixelColumns(const Dataset& local, const Shard& shard);

  Index count() const { return count_; }
  Index rows() const { return rows_; }
  // The listed columns, on every process (a collective call in a data-parallel run).
  Matrix gather(const std::vector<Index>& columns) const;

 private:
  const Matrix* matrix_ = nullptr;
  const Dataset* local_ = nullptr;
  const Shard* shard_ = nullptr;
  std::vector<Index> begin_;  // the first column of each bag of the whole data
  Index count_ = 0, rows_ = 0;
};

}  // namespace vbagg
