// What the input pipeline reads: the `data:` section of run.yaml, as plain structs.
#pragma once

#include <string>
#include <vector>

namespace vbagg::io {

struct LayerSpec {
  std::string path;
  std::string name;        // covariate name; default: the file name without extension
  std::string resampling;  // GDAL resampling used to bring the layer onto the reference grid
};

struct UnitsSpec {
  std::string path;
  std::string layer;  // optional when the source has one layer
  std::string id_field;
  std::string response_field;
};

enum class PixelAssignment { centre, all_touched, fraction };
enum class BadUnitPolicy { stop, drop };

PixelAssignment parse_pixel_assignment(const std::string& s);
BadUnitPolicy parse_bad_unit_policy(const std::string& s);
std::string to_string(PixelAssignment p);
std::string to_string(BadUnitPolicy p);

// Resampling names GDAL's warper accepts; throws ConfigError listing them for any other.
void check_resampling(const std::string& name, const std::string& where);

struct DataConfig {
  std::vector<LayerSpec> covariates;
  LayerSpec population{"", "population", "sum"};
  UnitsSpec units;
  std::string grid = "population";  // 'population', a covariate name, or a raster path
  PixelAssignment pixel_assignment = PixelAssignment::fraction;
  bool coordinates = true;
  BadUnitPolicy on_bad_unit = BadUnitPolicy::stop;
  int strip_rows = 256;  // rows read at a time: bounds memory on large grids
};

}  // namespace vbagg::io
