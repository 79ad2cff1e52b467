#include "grid.hpp"

#include <gdal_priv.h>
#include <ogr_spatialref.h>

#include <cmath>
#include <sstream>

#include "core/types.hpp"

namespace vbagg::io {

Grid Grid::of(GDALDataset& ds, const std::string& path) {
  Grid g;
  g.width = ds.GetRasterXSize();
  g.height = ds.GetRasterYSize();
  if (ds.GetGeoTransform(g.transform.data()) != CE_None)
    throw DataError("raster '" + path + "' has no geotransform; it cannot be placed on a map");
  if (!g.is_north_up())
    throw DataError("raster '" + path + "' is rotated or south-up; warp it to a north-up grid first (gdalwarp)");
  if (const OGRSpatialReference* srs = ds.GetSpatialRef()) {
    char* wkt = nullptr;
    const char* opts[] = {"FORMAT=WKT2_2018", nullptr};
    srs->exportToWkt(&wkt, opts);
    g.crs_wkt = wkt ? wkt : "";
    CPLFree(wkt);
  }
  return g;
}

std::array<double, 4> Grid::extent() const {
  return {transform[0], transform[3] + height * transform[5], transform[0] + width * transform[1], transform[3]};
}

bool same_crs(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return a.empty() && b.empty();
  if (a == b) return true;
  OGRSpatialReference sa, sb;
  if (sa.importFromWkt(a.c_str()) != OGRERR_NONE || sb.importFromWkt(b.c_str()) != OGRERR_NONE) return false;
  const char* opts[] = {"IGNORE_DATA_AXIS_TO_SRS_AXIS_MAPPING=YES", "CRITERION=EQUIVALENT", nullptr};
  return sa.IsSame(&sb, opts);
}

bool Grid::aligned_with(const Grid& o) const {
  if (width != o.width || height != o.height || !same_crs(crs_wkt, o.crs_wkt)) return false;
  const double tol_x = 1e-6 * std::abs(transform[1]), tol_y = 1e-6 * std::abs(transform[5]);
  return std::abs(transform[0] - o.transform[0]) <= tol_x && std::abs(transform[3] - o.transform[3]) <= tol_y &&
         std::abs(transform[1] - o.transform[1]) * width <= tol_x &&
         std::abs(transform[5] - o.transform[5]) * height <= tol_y;
}

std::string Grid::describe() const {
  std::ostringstream s;
  s.precision(10);
  s << width << " x " << height << " pixels of " << transform[1] << " x " << -transform[5] << " at (" << transform[0]
    << ", " << transform[3] << ")";
  return s.str();
}

Grid Grid::refined(int k) const {
  Grid g = *this;
  g.width *= k;
  g.height *= k;
  for (size_t i : {1, 2, 4, 5}) g.transform[i] /= k;
  return g;
}

}  // namespace vbagg::io
