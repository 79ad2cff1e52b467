// Storage for matrices whose shape changes from use to use, such as pixel blocks of different
// lengths: it grows but never shrinks, so a loop over blocks allocates only on its largest block
// instead of returning memory to the system and faulting it in again on every block.
#pragma once

#include <vector>

#include "types.hpp"

namespace vbagg {

class Buffer {
 public:
  // A rows x cols view; its values are unspecified until written.
  Eigen::Map<Matrix> shape(Index rows, Index cols) {
    const size_t need = static_cast<size_t>(rows) * static_cast<size_t>(cols);
    if (data_.size() < need) data_.resize(need);
    rows_ = rows;
    cols_ = cols;
    return view();
  }
  // The view of the last shape() call.
  Eigen::Map<Matrix> view() { return {data_.data(), rows_, cols_}; }
  Eigen::Map<const Matrix> view() const { return {data_.data(), rows_, cols_}; }

 private:
  std::vector<double, Eigen::aligned_allocator<double>> data_;
  Index rows_ = 0, cols_ = 0;
};

}  // namespace vbagg
