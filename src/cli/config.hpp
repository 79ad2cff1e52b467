// run.yaml: loaded, overridden with --set, validated against the parameter table, defaults
// filled in. Errors name the file, line and key and list the allowed values.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "io/data_config.hpp"

namespace vbagg::cli {

// Which data.* keys without a default a configuration must give.
enum class RequiredData {
  all,        // training and evaluation: covariates, population and units
  not_units,  // prediction for a new area: units are optional (units.csv only when given)
  none,
};

class Config {
 public:
  // Reads `path` (empty: defaults only), applies "key=value" overrides, validates. Throws
  // ConfigError.
  static Config load(const std::string& path, const std::vector<std::string>& overrides,
                     RequiredData required = RequiredData::all);
  // The same from YAML text; source names it in messages (empty: defaults only).
  static Config parse(const std::string& text, const std::string& source, const std::string& base_dir,
                      const std::vector<std::string>& overrides, RequiredData required = RequiredData::all);
  // A resolved configuration saved by an earlier run (run.resolved.yaml or a model's copy).
  static Config from_node(const YAML::Node& resolved, const std::string& base_dir, const std::string& source);

  std::string text(const std::string& key) const;
  double real(const std::string& key) const;
  long long integer(const std::string& key) const;
  bool boolean(const std::string& key) const;
  std::vector<double> reals(const std::string& key) const;
  // A path setting resolved against the config file's folder.
  std::string path(const std::string& key) const;
  void set(const std::string& key, const std::string& yaml_value);

  const std::string& base_dir() const { return base_dir_; }
  const std::string& source() const { return source_; }
  const YAML::Node& root() const { return root_; }
  // Every setting, defaults filled in, relative paths made absolute. With `relative_to` (the
  // folder the text will be saved in), paths on the same tree as that folder are written relative
  // to it instead, like GDAL's relativeToVRT, so a run folder moved together with its data still
  // resolves them.
  std::string resolved_yaml(const std::string& relative_to = "") const;
  YAML::Node resolved_node(const std::string& relative_to = "") const;

  io::DataConfig data_config() const;

 private:
  YAML::Node root_;
  std::string base_dir_;
  std::string source_;
};

}  // namespace vbagg::cli
