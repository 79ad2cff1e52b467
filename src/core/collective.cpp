#include "collective.hpp"

#include <cmath>

namespace vbagg {

namespace {

class OneProcess final : public Collective {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void reduce_sum(double*, Index) const override {}
  void reduce_max(double*, Index) const override {}
};

}  // namespace

Matrix Collective::row_ranges(const Eigen::Ref<const Matrix>& rows) const {
  const Index k = rows.rows();
  // Each row's largest value and the negative of its smallest, so one maximum pools both.
  Vector extremes = Vector::Constant(2 * k, -INFINITY);
  if (rows.cols() > 0) {
    extremes.head(k) = rows.rowwise().maxCoeff();
    extremes.tail(k) = -rows.rowwise().minCoeff();
  }
  max(extremes);
  Matrix range(k, 2);
  range.col(0) = -extremes.tail(k);
  range.col(1) = extremes.head(k);
  return range;
}

const Collective& one_process() {
  static const OneProcess p;
  return p;
}

}  // namespace vbagg
