// The model file (model.yaml): a versioned, documented text file holding everything needed to
// predict and to recompute the objective. Format: docs/model-format.md.
#pragma once

#include <yaml-cpp/yaml.h>

#include <map>
#include <string>
#include <vector>

#include "core/model.hpp"
#include "core/standardize.hpp"
#include "grid.hpp"

namespace vbagg::io {

inline constexpr int kModelFormatVersion = 1;

struct TrainingSummary {
  int epochs = 0;
  std::string stop_reason;
  double elbo = 0;
  double best_holdout_nll = 0;  // NaN without holdout
  double seconds = 0;
};

struct ModelFile {
  // vbagg (the variational model), bag_pixel (the same model fitted to bags collapsed to their
  // mean inputs), nystrom (MAP point estimate, model.spec.map_estimate), or constant (a rate per
  // training unit; `model` unused).
  std::string kind = "vbagg";
  std::map<std::string, double> unit_rates;  // constant: y_a / P_a of every training unit
  double overall_rate = 0;                   // constant: sum y / sum P over the training units
  Model model;
  std::vector<std::string> covariates;  // names, in input order
  Standardization standardization;      // of the covariate rows
  int coordinates = 0;                  // 0, 2 (projected km) or 3 (geographic chordal km)
  Grid grid;                            // the training reference grid
  std::vector<std::string> train_units, holdout_units;
  TrainingSummary training;
  YAML::Node config;  // the resolved run configuration
};

// Writes atomically, numbers with 17 significant digits (they round-trip exactly).
void write_model_file(const std::string& path, const ModelFile& file);
// Throws DataError naming the file and the missing or broken entry, or the unsupported version.
ModelFile read_model_file(const std::string& path);
// The same from the file's text; `path` names it in messages.
ModelFile parse_model_file(const std::string& text, const std::string& path);

}  // namespace vbagg::io
