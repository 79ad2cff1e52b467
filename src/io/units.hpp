// Administrative units from any OGR vector source: id, response and polygon, reprojected to the
// reference grid's CRS, with every problem recorded against the unit that has it.
#pragma once

#include <string>
#include <vector>

#include "data_config.hpp"
#include "gdal_handles.hpp"
#include "grid.hpp"
#include "unit_issues.hpp"

namespace vbagg::io {

struct Unit {
  std::string id;
  double response = 0;
  double trials = 0;                  // with UnitsSpec::trials_field
  GeometryPtr geometry;               // polygonal, valid, in the grid's CRS (null when unusable)
  std::vector<std::string> problems;  // reasons the unit cannot be used (UnitIssue's form)
};

struct UnitsRead {
  std::vector<Unit> units;
  std::vector<std::string> notes;   // assumptions worth a log line
  std::vector<UnitIssue> repaired;  // geometries repaired, with the reason they were invalid
};

// Reads every feature of the configured layer. Problems of individual units (missing or
// non-numeric response, negative response, missing or non-numeric trials, trials that are not
// positive or fewer than the positives, duplicate id, missing, non-polygonal or irreparable
// geometry) are recorded on the unit; problems of the source (missing fields, several layers and
// none named, empty layer) throw.
// With spec.point_buffer >= 0, point features are units too: the grid pixel a point falls in, or
// a disc around it (polygons in the grid's CRS).
UnitsRead read_units(const UnitsSpec& spec, const Grid& grid);

// The configured layer of an open units source (data.units.layer, or its only layer); throws
// ConfigError listing the layers when that is ambiguous or missing.
OGRLayer* units_layer(GDALDataset& ds, const UnitsSpec& spec);
// The index of field `name` (setting `key`); throws ConfigError listing the fields when absent.
int units_field(OGRFeatureDefn* defn, const std::string& name, const std::string& key, const std::string& path);

}  // namespace vbagg::io
