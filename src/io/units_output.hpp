// The units as a GeoPackage layer with their predictions, for the choropleth an analyst wants:
// the input's own geometries and CRS, one feature per input feature, and default styles QGIS
// applies on open.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "data_config.hpp"

namespace vbagg::io {

struct UnitResult {
  std::string split;  // train, holdout, new, or unobserved (no response given: observed is NaN)
  double observed = 0, predicted = 0, lower = 0, upper = 0, population = 0;
  long long pixels = 0;
};

// A style for the GeoPackage's layer_styles table; QGIS applies the default one on open and
// offers the others by name.
struct LayerStyle {
  std::string name, qml, description;
  bool use_as_default = false;
};

// One layer of the GeoPackage: a source's features and their results, by the source's own ids.
struct UnitsLayer {
  std::string name;  // "units" for a single source, else the source's name
  UnitsSpec source;
  std::map<std::string, UnitResult> results;
  std::vector<LayerStyle> styles;
};

// Writes `path` atomically: per UnitsLayer one layer with every feature of its source (geometry and
// CRS as they are) and the fields id, split, observed, predicted, <lower_field>, <upper_field>,
// population, pixels and log_residual = log(observed) - log(predicted) (NULL unless both are
// positive; observed is NULL for a unit without a response). A feature whose unit has no result
// (left out of the fit, or a duplicate id) keeps its geometry with split "unused" and NULL values.
void write_units_geopackage(const std::string& path, const std::string& lower_field, const std::string& upper_field,
                            const std::vector<UnitsLayer>& layers);

}  // namespace vbagg::io
