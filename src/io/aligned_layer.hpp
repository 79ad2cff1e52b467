// A raster brought onto the reference grid: read directly when already aligned, otherwise through
// a GDAL warped VRT (lazy, block by block) with the configured resampling and reprojection.
#pragma once

#include <string>
#include <vector>

#include "gdal_handles.hpp"
#include "grid.hpp"

namespace vbagg::io {

class AlignedLayer {
 public:
  // Opens `path` and aligns it to `reference` (whose source is named by reference_path).
  AlignedLayer(const std::string& path, const std::string& resampling, const Grid& reference,
               const std::string& reference_path);

  int bands() const { return bands_; }
  bool warped() const { return warped_; }
  const std::string& path() const { return path_; }
  // Band descriptions (empty where the file has none).
  const std::vector<std::string>& band_descriptions() const { return descriptions_; }

  // Reads band (1-based) over the window into out (row-major, cols x rows). Missing values
  // (nodata, mask, NaN, +-Inf and the float32 sentinels beyond 1e38) become NaN.
  void read(int band, int col0, int row0, int cols, int rows, std::vector<double>& out) const;

 private:
  std::string path_;
  DatasetPtr source_;
  DatasetPtr view_;  // the warped VRT, or null when the source is aligned
  int bands_ = 0;
  bool warped_ = false;
  std::vector<std::string> descriptions_;
};

}  // namespace vbagg::io
