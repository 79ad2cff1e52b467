// From covariate rasters, a population raster and admin units to the core's bag Dataset.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/collective.hpp"
#include "core/dataset.hpp"
#include "data_config.hpp"
#include "grid.hpp"
#include "unit_issues.hpp"

namespace vbagg::io {

struct UnitSummary {
  std::string id;            // <source>:<id> for a unit of the second or a later source of data.sources
  int source = 0;            // index into data.sources (0: data.units or the first source)
  double response = 0;       // NaN: none given (data.on_missing_response: predict)
  double trials = 0;         // the number tested of a binomial unit (0 otherwise)
  Index pixels = 0;          // pixels kept
  double area = 0;           // sum of the kept pixels' coverage fractions, in pixels
  Index dropped_pixels = 0;  // assigned pixels dropped for a missing covariate or population
  double population = 0;     // sum of coverage x population over kept pixels
  int period = -1;           // with data.time: the index of the unit's period (its id ends "@<period>")

  bool observed() const { return !std::isnan(response); }
};

struct BuiltData {
  // inputs: covariates (raw, not standardised), then coordinates. Built over several processes,
  // each holds the bags of its share of the units, and Dataset::global_bag gives each bag's
  // position in `units`.
  Dataset dataset;
  Grid grid;  // the reference grid
  std::string grid_path;
  std::vector<std::string> covariates;  // names of the covariate rows, in order
  Index num_coordinates = 0;            // 0, 2 (projected, km) or 3 (geographic, chordal km)
  std::vector<std::int64_t> cell;       // row * width + col of every dataset pixel
  std::vector<UnitSummary> units;       // every unit kept (over all processes), in bag order
  Index first_unit = 0;                 // a batch's: the place of units[0] among the whole build's units
  std::vector<std::string> sources;     // names of data.sources, in order (empty: one source)
  // data.time's periods (empty: one period). With periods, the inputs end with the kTimeInputs
  // time rows after the coordinates, and a bag is a unit in one period.
  TimeAxis time;
  std::vector<UnitIssue> dropped;     // problems of the units dropped under on_bad_unit: drop
  std::vector<std::string> notes;     // alignment, repairs, constant covariates, ...
  std::vector<std::string> warnings;  // units whose numbers look wrong: too small, implausible rates
};

// With data.time, every period is built on its own (period_config) and the bags of all periods are
// joined, period after period, each pixel carrying its period's covariates and time inputs.
//
// Resolves relative paths against base_dir, aligns every layer to the reference grid, assigns
// pixels to units and gathers the pixel table. With several sources (DataConfig::more_sources),
// each source's units are read and assigned in turn, on the first source's reference grid, and their
// bags follow the first source's in the dataset (Dataset::source); a later source's unit ids are
// prefixed with its name, "<source>:<id>", so ids stay unique. Throws ConfigError for settings, DataError for
// data: a covariate or population with no data over the units is named with its path, and units
// that cannot be used (on_bad_unit: stop) throw UnusableUnits, grouped by reason.
//
// With several `processes` (an MPI job) the units are shared out by their estimated size (their
// envelope's pixels on the grid): each process reads the raster windows of its own units only and
// builds their bags, and the units' summaries, problems and missing-data counts are shared, so
// every process makes the same decisions and knows every kept unit.
BuiltData build_dataset(const DataConfig& config, const std::string& base_dir = "",
                        const Collective& processes = one_process());

// The same units, built a batch at a time so that memory holds one batch and not the whole area:
// consecutive units whose envelopes hold about `batch_pixels` pixels together (a larger unit alone).
// Each batch's BuiltData goes to `consume`; its bags are numbered by their place among every
// source's kept units (Dataset::global_bag), ids carry their source's name, and every covariate is
// kept (none is dropped as constant over the batch), in the layers' order. Returns what
// build_dataset returns but the pixels: units, dropped units, notes and warnings, and the same
// errors (unusable units, under on_bad_unit: stop, after the last batch). With several processes
// every one sees every batch, its own share of each batch's units gathered.
BuiltData build_dataset_in_batches(const DataConfig& config, const std::string& base_dir, Index batch_pixels,
                                   const std::function<void(BuiltData&)>& consume,
                                   const Collective& processes = one_process());

// The number of pixels of the kept units, over every process.
Index total_pixels(const BuiltData& built);

// The raster whose grid every layer is aligned to: data.grid names 'population', a covariate
// (by its name or file stem) or a raster path; relative paths resolve against base_dir.
std::string reference_grid_path(const DataConfig& config, const std::string& base_dir = "");
// The working grid: the reference raster's grid, refined by data.grid_refine.
Grid working_grid(const DataConfig& config, const std::string& base_dir = "");

}  // namespace vbagg::io
