#include "coordinates.hpp"

#include <ogr_spatialref.h>

#include <cmath>

namespace vbagg::io {

CoordinateMapper::CoordinateMapper(const Grid& grid) : grid_(grid) {
  if (grid.crs_wkt.empty()) return;
  OGRSpatialReference srs;
  if (srs.importFromWkt(grid.crs_wkt.c_str()) != OGRERR_NONE) return;
  known_ = true;
  geographic_ = srs.IsGeographic();
  if (!geographic_) km_per_unit_ = srs.GetLinearUnits() / 1000.0;
}

void CoordinateMapper::operator()(int col, int row, double* out) const {
  const double x = grid_.centre_x(col), y = grid_.centre_y(row);
  if (geographic_) {
    const double R = 6371.0, lon = x * M_PI / 180, lat = y * M_PI / 180;
    out[0] = R * std::cos(lat) * std::cos(lon);
    out[1] = R * std::cos(lat) * std::sin(lon);
    out[2] = R * std::sin(lat);
    return;
  }
  out[0] = x * km_per_unit_;
  out[1] = y * km_per_unit_;
}

}  // namespace vbagg::io
