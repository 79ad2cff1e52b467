// Float32 GeoTIFF (or COG) outputs written strip by strip: tiled and compressed by default, nodata
// set, band descriptions and unit, statistics stored so QGIS stretches at once. One band, or one
// band per period of a space-time map (each band named by its period).
// The file appears under its final name only when finished.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "atomic_file.hpp"
#include "gdal_handles.hpp"
#include "grid.hpp"

namespace vbagg::io {

inline constexpr double kOutputNodata = -9999.0;

struct RasterFormat {
  std::string driver = "GTiff";               // GTiff or COG
  std::vector<std::string> creation_options;  // KEY=VALUE, added to (and overriding) the defaults
  int threads = 1;                            // threads compressing the tiles (GDAL's NUM_THREADS)

  // Throws ConfigError naming an unknown driver or an option the driver rejects.
  void validate() const;
};

class RasterWriter {
 public:
  // One band described by `description`; with band_names, one band per name, each described by its
  // name, and `description` in the dataset's VBAGG_QUANTITY metadata.
  RasterWriter(const std::string& path, const Grid& grid, const std::string& description, const std::string& unit,
               const RasterFormat& format, const std::vector<std::string>& band_names = {});
  ~RasterWriter();

  // A metadata item of the dataset (e.g. the model kind), kept in COG conversion.
  void set_metadata(const std::string& key, const std::string& value);
  // Writes rows [row0, row0 + rows) of band `band` (0-based) from values (row-major, grid width per
  // row); NaN -> nodata.
  void write_rows(int row0, int rows, const std::vector<float>& values, int band = 0);
  // Stores statistics, converts to COG when asked, and moves the file to its final name.
  void finish();
  // The valid values at a fixed lattice of about 10^5 cells of the grid (every cell of a smaller
  // grid), for the percentiles of a style's limits: the same cells in every map of a grid (pooled
  // over the bands).
  const std::vector<float>& value_sample() const { return sample_; }

 private:
  std::string path_;
  RasterFormat format_;
  Grid grid_;
  std::unique_ptr<AtomicOutput> out_;
  DatasetPtr ds_;
  struct BandStatistics {
    double min = 1e300, max = -1e300, sum = 0, sum2 = 0;
    long long count = 0;
  };
  std::vector<BandStatistics> stats_;
  long long sample_stride_ = 1;
  std::vector<float> sample_;
};

}  // namespace vbagg::io
