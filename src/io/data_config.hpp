// What the input pipeline reads: the `data:` section of run.yaml, as plain structs.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "time_axis.hpp"

namespace vbagg::io {

// How covariates and population come onto the reference grid unless a layer says otherwise:
// covariates are interpolated, population is summed (so totals are kept).
inline constexpr const char* kCovariateResampling = "bilinear";
inline constexpr const char* kPopulationResampling = "sum";

struct LayerSpec {
  LayerSpec() = default;
  LayerSpec(std::string path_, std::string name_, std::string resampling_)
      : path(std::move(path_)), name(std::move(name_)), resampling(std::move(resampling_)) {}

  std::string path;
  std::string name;        // covariate name; default: the file name without extension
  std::string resampling;  // GDAL resampling used to bring the layer onto the reference grid
  // With data.time, a covariate may be a series: a path pattern with {period}, {year} or {month}
  // (one file per period), or a multi-band file with one band per period (`series_bands`).
  bool series_bands = false;
  // Set per period by period_config for a series of bands: the period, and its position among
  // data.time's `periods` (series_band finds its band).
  std::string period;
  int period_index = -1, periods = 0;

  // `name`, or the file's stem when it is empty.
  std::string covariate_name() const;
};

// The covariate name of band `band` (1-based) of a layer with `bands` bands: the layer's name for a
// single band, else <layer>_<band description>, or <layer>_<band> without a description.
std::string band_covariate_name(const std::string& layer, int band, int bands, const std::string& description);

struct UnitsSpec {
  UnitsSpec() = default;
  UnitsSpec(std::string path_, std::string layer_, std::string id_field_, std::string response_field_,
            std::string trials_field_)
      : path(std::move(path_)),
        layer(std::move(layer_)),
        id_field(std::move(id_field_)),
        response_field(std::move(response_field_)),
        trials_field(std::move(trials_field_)) {}

  std::string path;
  std::string layer;  // optional when the source has one layer
  std::string id_field;
  std::string response_field;
  std::string trials_field;  // binomial data: the number tested; empty for counts and values
  // Survey points as units: below 0 points are refused; 0 makes a point's bag the grid pixel it
  // falls in; above 0 a disc of this radius around it (in the grid CRS's units).
  double point_buffer = -1;
  // The source's name in a joint fit of several sources (data.sources), empty for one source.
  std::string name;
  // Its likelihood's name (empty: model.likelihood, or binomial when trials_field is set).
  std::string likelihood;
  // With data.time: a long table (CSV or any OGR table) of one row per unit and period, joined to
  // the units by id_field and holding period_field, response_field and trials_field; empty when
  // the units hold a field per period (response_field a pattern with {period}, {year}, {month}).
  std::string response_table;
  std::string period_field = "period";
  std::string period;  // set per period by period_config: the period whose responses to read
  // data.on_missing_response: predict. A unit whose response is missing (empty, or no row for the
  // period in the response table) is kept without one (NaN): predicted, never fitted. Otherwise
  // it is a bad unit (data.on_bad_unit).
  bool predict_missing = false;
};

enum class PixelAssignment { centre, all_touched, fraction };
enum class BadUnitPolicy { stop, drop };

PixelAssignment parse_pixel_assignment(const std::string& s);
BadUnitPolicy parse_bad_unit_policy(const std::string& s);
// data.on_missing_response: 'bad' (false) or 'predict' (true).
bool parse_missing_response_policy(const std::string& s);
std::string to_string(PixelAssignment p);
std::string to_string(BadUnitPolicy p);

// The resampling names GDAL's warper accepts.
std::vector<std::string> resampling_names();
// Throws ConfigError listing them for any other name.
void check_resampling(const std::string& name, const std::string& where);

// A further source of a joint fit: its units and, when given, covariates and population of its own
// (another year of the same covariates on the same grid); empty means the first source's.
struct SourceConfig {
  UnitsSpec units;
  std::vector<LayerSpec> covariates;
  LayerSpec population;
};

struct DataConfig {
  std::vector<LayerSpec> covariates;
  LayerSpec population{"", "population", kPopulationResampling};
  UnitsSpec units;  // the only source, or the first of data.sources
  std::vector<SourceConfig> more_sources;
  std::string grid = "population";  // 'population', a covariate name, or a raster path
  int grid_refine = 1;              // the working grid divides each reference pixel into k x k
  PixelAssignment pixel_assignment = PixelAssignment::fraction;
  bool coordinates = true;
  BadUnitPolicy on_bad_unit = BadUnitPolicy::stop;
  int strip_rows = 256;  // rows read at a time: bounds memory on large grids
  TimeAxis time;         // data.time: the periods of a space-time fit (empty: one period)
};

// The band (1-based) of layer l's period in a file with these band descriptions: the band described
// by the period's label, else, when the file has one band per period of data.time, the period's
// position. Throws DataError naming the file otherwise.
int series_band(const LayerSpec& l, const std::vector<std::string>& band_descriptions);

// The covariates a layer gives, from its bands' descriptions: every band, named by
// band_covariate_name, or a series' band of its period (series_band), named as the layer.
struct LayerBands {
  std::vector<int> bands;  // 1-based
  std::vector<std::string> names;
};
LayerBands layer_bands(const LayerSpec& l, const std::vector<std::string>& band_descriptions);

// The configuration of period i of config.time on its own: covariate, population and field patterns
// expanded, series bands chosen, responses read for that period. Covariates keep their names over
// the periods (a pattern's name is its stem without the tokens).
DataConfig period_config(const DataConfig& config, size_t i);

}  // namespace vbagg::io
