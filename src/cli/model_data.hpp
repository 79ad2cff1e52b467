// What predict and eval share: a model file with its run configuration (or a new one for another
// area or year), and the model's inputs built from that configuration.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "config.hpp"
#include "core/predict.hpp"
#include "io/build_dataset.hpp"
#include "io/model_file.hpp"
#include "predictor.hpp"

namespace vbagg::cli {

struct LoadedModel {
  io::ModelFile file;
  Config config;           // --config when given, else the model's own resolved configuration; --set applied
  bool same_units = true;  // the configuration's units are those the model was trained on (not a new area)
  std::shared_ptr<const Predictor> predictor;  // of `file`, for these units
};

// A model with its configuration, and its predictor for the configuration's units.
LoadedModel loaded_model(io::ModelFile file, Config config, bool same_units);

// `required`: which data.* keys a --config must give (prediction makes the units optional).
LoadedModel load_model(const std::string& model_path, const std::string& config_path,
                       const std::vector<std::string>& sets, RequiredData required = RequiredData::all);

// io::build_dataset of the configuration's data. When units cannot be used, every one with its
// problem is written to <report_dir>/unusable_units.csv (the system's temporary folder when
// report_dir is empty) and the error names that file. With several processes (an MPI job), each
// builds the bags of its share of the units (io::build_dataset).
io::BuiltData build_data(const Config& config, const std::string& report_dir,
                         const Collective& processes = one_process());

// The units' dataset with inputs in the model's order: covariates matched by name and
// standardised with the model's means and sds, then coordinates. Throws DataError naming a
// covariate the model needs and the configuration lacks.
io::BuiltData model_dataset(const LoadedModel& m, const std::string& report_dir,
                            const Collective& processes = one_process());
// The same a batch of units at a time (io::build_dataset_in_batches): `consume` sees each batch's
// bags with the model's inputs; returns the units' summaries, without pixels. Memory holds one batch
// of about `batch_pixels` pixels (or the largest unit), not the whole area.
io::BuiltData model_dataset_in_batches(const LoadedModel& m, const std::string& report_dir, Index batch_pixels,
                                       const std::function<void(const io::BuiltData&)>& consume,
                                       const Collective& processes = one_process());
// The same from a dataset already built from m.config (raw inputs, as io::build_dataset gives them).
io::BuiltData model_inputs(const LoadedModel& m, io::BuiltData built);

// Predictions of task `task` at pixels of the dataset (indices into built.dataset), for any kind.
Prediction predict_dataset_pixels(const LoadedModel& m, const io::BuiltData& built, const std::vector<Index>& pixels,
                                  const PredictOptions& options, int task = 0);

// Where each of the model's covariates comes from in the configuration: (layer, band), 1-based band.
struct CovariateSource {
  size_t layer;
  int band;
};
std::vector<CovariateSource> match_covariates(const std::vector<std::string>& model_names,
                                              const std::vector<io::LayerBands>& layers, const std::string& where);

// The covariates of each configured covariate layer, named as the pipeline names them.
std::vector<io::LayerBands> covariate_band_names(const io::DataConfig& data);

}  // namespace vbagg::cli
