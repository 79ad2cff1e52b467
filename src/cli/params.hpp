// Every configuration parameter, declared once: key, type, default, allowed values, help. The
// loader's validation, the apps' --help and docs/configuration.md are all generated from it.
#pragma once

#include <string>
#include <vector>

namespace vbagg::cli {

enum class ParamType { text, path, integer, real, boolean, choice, real_list, layer_list, source_list };

// The keys of one entry of data.sources: the data.units.* keys, plus these.
inline const std::vector<std::string> kSourceOwnKeys{"name", "likelihood", "link", "task", "covariates", "population"};

struct Param {
  std::string key;  // dotted path, e.g. "model.link"
  ParamType type;
  std::string default_yaml;          // default as YAML text ("" = no default: must be given)
  std::vector<std::string> choices;  // for choice
  double min = -1e308, max = 1e308;  // for integer and real (inclusive)
  std::string help;
};

const std::vector<Param>& all_params();
const Param* find_param(const std::string& key);
std::string type_name(ParamType t);

// The configuration reference as Markdown (docs/configuration.md).
std::string configuration_markdown();

}  // namespace vbagg::cli
