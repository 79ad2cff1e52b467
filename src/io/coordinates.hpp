// Pixel-centre coordinates in kilometres for the spatial kernel.
#pragma once

#include "grid.hpp"

namespace vbagg::io {

// Projected CRS: map units scaled to km (2 values). Geographic CRS: 3-D chordal coordinates on a
// 6371 km sphere (3 values), which keep Matérn kernels positive definite. No CRS: map units as
// they are (2 values).
class CoordinateMapper {
 public:
  explicit CoordinateMapper(const Grid& grid);
  int count() const { return geographic_ ? 3 : 2; }
  bool crs_known() const { return known_; }
  void operator()(int col, int row, double* out) const;

 private:
  Grid grid_;
  bool geographic_ = false, known_ = false;
  double km_per_unit_ = 1;
};

}  // namespace vbagg::io
