#include "data_config.hpp"

#include <algorithm>
#include <filesystem>
#include <string>

#include "core/types.hpp"

namespace vbagg::io {

PixelAssignment parse_pixel_assignment(const std::string& s) {
  if (s == "centre" || s == "center") return PixelAssignment::centre;
  if (s == "all_touched") return PixelAssignment::all_touched;
  if (s == "fraction") return PixelAssignment::fraction;
  throw ConfigError("unknown pixel assignment '" + s + "' (allowed: centre, all_touched, fraction)");
}

BadUnitPolicy parse_bad_unit_policy(const std::string& s) {
  if (s == "stop") return BadUnitPolicy::stop;
  if (s == "drop") return BadUnitPolicy::drop;
  throw ConfigError("unknown bad-unit policy '" + s + "' (allowed: stop, drop)");
}

bool parse_missing_response_policy(const std::string& s) {
  if (s == "bad") return false;
  if (s == "predict") return true;
  throw ConfigError("unknown data.on_missing_response '" + s + "' (allowed: bad, predict)");
}

std::string to_string(PixelAssignment p) {
  return p == PixelAssignment::centre ? "centre" : p == PixelAssignment::all_touched ? "all_touched" : "fraction";
}

std::string to_string(BadUnitPolicy p) { return p == BadUnitPolicy::stop ? "stop" : "drop"; }

std::string LayerSpec::covariate_name() const {
  return name.empty() ? std::filesystem::path(path).stem().string() : name;
}

std::string band_covariate_name(const std::string& layer, int band, int bands, const std::string& description) {
  if (bands == 1) return layer;
  return layer + "_" + (description.empty() ? std::to_string(band) : description);
}

std::vector<std::string> resampling_names() {
  return {"near", "bilinear", "cubic", "cubicspline", "lanczos", "average", "rms",
          "mode", "max",      "min",   "med",         "q1",      "q3",      "sum"};
}

void check_resampling(const std::string& name, const std::string& where) {
  const std::vector<std::string> allowed = resampling_names();
  if (std::find(allowed.begin(), allowed.end(), name) != allowed.end()) return;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  throw ConfigError(where + ": unknown resampling '" + name + "' (allowed: " + list + ")");
}

int series_band(const LayerSpec& l, const std::vector<std::string>& band_descriptions) {
  const int bands = static_cast<int>(band_descriptions.size());
  for (int b = 0; b < bands; ++b)
    if (band_descriptions[static_cast<size_t>(b)] == l.period) return b + 1;
  if (bands == l.periods) return l.period_index + 1;
  throw DataError("covariate '" + l.path + "' has " + std::to_string(bands) + " bands, none described as " + l.period +
                  ", and data.time has " + std::to_string(l.periods) +
                  " periods; series: bands reads the band described by each period's label (YYYY-MM or YYYY), or "
                  "band k for the k-th period when the file has one band per period");
}

LayerBands layer_bands(const LayerSpec& l, const std::vector<std::string>& band_descriptions) {
  if (!l.period.empty()) return {{series_band(l, band_descriptions)}, {l.covariate_name()}};
  LayerBands out;
  const int n = static_cast<int>(band_descriptions.size());
  for (int b = 1; b <= n; ++b) {
    out.bands.push_back(b);
    out.names.push_back(band_covariate_name(l.covariate_name(), b, n, band_descriptions[static_cast<size_t>(b - 1)]));
  }
  return out;
}

DataConfig period_config(const DataConfig& config, size_t i) {
  const Period& p = config.time[i];
  DataConfig c = config;
  c.time = {};
  for (size_t k = 0; k < c.covariates.size(); ++k) {
    LayerSpec& l = c.covariates[k];
    const std::string where = "data.covariates[" + std::to_string(k) + "]";
    if (has_period_tokens(l.path)) {
      if (l.series_bands)
        throw ConfigError(where + ": a path pattern and series: bands are two ways to give a series; use one");
      if (l.name.empty()) l.name = pattern_stem(l.path);
      l.path = expand_period(l.path, p, where + ".path");
    } else if (l.series_bands) {
      l.name = l.covariate_name();
      l.period = p.label;
      l.period_index = static_cast<int>(i);
      l.periods = static_cast<int>(config.time.size());
    }
  }
  if (has_period_tokens(c.population.path))
    c.population.path = expand_period(c.population.path, p, "data.population.path");
  c.units.response_field = expand_period(c.units.response_field, p, "data.units.response_field");
  c.units.trials_field = expand_period(c.units.trials_field, p, "data.units.trials_field");
  c.units.period = p.label;
  return c;
}

}  // namespace vbagg::io
