// From covariate rasters, a population raster and admin units to the core's bag Dataset.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dataset.hpp"
#include "data_config.hpp"
#include "grid.hpp"

namespace vbagg::io {

struct UnitSummary {
  std::string id;
  double response = 0;
  Index pixels = 0;          // pixels kept
  Index dropped_pixels = 0;  // assigned pixels dropped for a missing covariate or population
  double population = 0;     // sum of coverage x population over kept pixels
};

struct DroppedUnit {
  std::string id;
  std::string reason;
};

struct BuiltData {
  Dataset dataset;  // inputs: covariates (raw, not standardised), then coordinates
  Grid grid;        // the reference grid
  std::string grid_path;
  std::vector<std::string> covariates;  // names of the covariate rows, in order
  Index num_coordinates = 0;            // 0, 2 (projected, km) or 3 (geographic, chordal km)
  std::vector<std::int64_t> cell;       // row * width + col of every dataset pixel
  std::vector<UnitSummary> units;       // the units kept, in dataset bag order
  std::vector<DroppedUnit> dropped;     // units dropped under on_bad_unit: drop
  std::vector<std::string> notes;       // alignment, repairs, constant covariates, ...
};

// Resolves relative paths against base_dir, aligns every layer to the reference grid, assigns
// pixels to units and gathers the pixel table. Throws ConfigError for settings, DataError for
// data (with every offending unit named when on_bad_unit is stop).
BuiltData build_dataset(const DataConfig& config, const std::string& base_dir = "");

// The raster whose grid every layer is aligned to: data.grid names 'population', a covariate
// (by its name or file stem) or a raster path; relative paths resolve against base_dir.
std::string reference_grid_path(const DataConfig& config, const std::string& base_dir = "");

// Log lines for a build: its notes, every unit that lost pixels to missing data (with counts),
// every dropped unit with its reason, and a closing summary.
std::vector<std::string> report_lines(const BuiltData& built);

}  // namespace vbagg::io
