// A georeferenced raster grid: size, affine geotransform and CRS.
#pragma once

#include <array>
#include <string>

class GDALDataset;
class OGRSpatialReference;

namespace vbagg::io {

struct Grid {
  int width = 0, height = 0;
  std::array<double, 6> transform{};  // GDAL geotransform
  std::string crs_wkt;                // WKT2; empty when the raster has none

  static Grid of(GDALDataset& ds, const std::string& path);

  double pixel_width() const { return transform[1]; }
  double pixel_height() const { return -transform[5]; }
  bool is_north_up() const { return transform[2] == 0 && transform[4] == 0 && transform[5] < 0; }
  // Georeferenced centre of pixel (col, row).
  double centre_x(int col) const { return transform[0] + (col + 0.5) * transform[1]; }
  double centre_y(int row) const { return transform[3] + (row + 0.5) * transform[5]; }
  // Extent [xmin, ymin, xmax, ymax] of a north-up grid.
  std::array<double, 4> extent() const;

  // Same size, same CRS, and geotransforms equal to within 1e-6 of a pixel (float noise in
  // headers must not force a resampling).
  bool aligned_with(const Grid& other) const;
  std::string describe() const;
  // The same extent with each pixel divided into k x k.
  Grid refined(int k) const;
};

// True when two WKT strings denote the same CRS (ignoring axis-order metadata).
bool same_crs(const std::string& a, const std::string& b);

}  // namespace vbagg::io
