// The model file (model.yaml): a versioned, documented text file holding everything needed to
// predict and to recompute the objective. Format: docs/model-format.md.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "core/baselines.hpp"
#include "core/model.hpp"
#include "core/standardize.hpp"
#include "grid.hpp"
#include "time_axis.hpp"

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
  ModelKind kind = ModelKind::vbagg;    // nystrom sets model.spec.map_estimate
  ConstantRates constant;               // kind constant (`model` unused)
  Model model;                          // every other kind
  std::vector<std::string> covariates;  // names, in input order
  Standardization standardization;      // of the covariate rows
  int coordinates = 0;                  // 0, 2 (projected km) or 3 (geographic chordal km)
  TimeAxis time;                        // the training periods of a space-time model (then kTimeInputs inputs)
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
