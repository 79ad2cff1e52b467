#include "model_data.hpp"

#include <algorithm>
#include <filesystem>
#include <functional>

#include "core/predict.hpp"
#include "io/atomic_file.hpp"
#include "io/gdal_handles.hpp"
#include "processes.hpp"

namespace vbagg::cli {

namespace fs = std::filesystem;

namespace {

// Units of another source (a new area) are not the training units even when their ids repeat.
// The model's own paths are relative to its folder.
bool same_units_source(const io::ModelFile& file, const std::string& model_dir, const Config& config) {
  std::string trained;
  if (const YAML::Node u = file.config["data"]["units"]; u && u["path"]) trained = u["path"].as<std::string>();
  // A joint fit's first source stands for its units (data.sources[0]).
  if (const YAML::Node s = file.config["data"]["sources"]; s && s.IsSequence() && s.size() > 0 && s[0]["path"])
    trained = s[0]["path"].as<std::string>();
  if (!trained.empty()) trained = (fs::path(model_dir) / trained).lexically_normal().string();
  const std::string now = config.data_config().units.path;
  return !now.empty() && fs::weakly_canonical(now) == fs::weakly_canonical(trained);
}

Config model_config(const io::ModelFile& file, const std::string& model_path, const std::string& config_path,
                    const std::vector<std::string>& sets, RequiredData required) {
  if (!config_path.empty()) return Config::load(config_path, sets, required);
  Config c = Config::from_node(file.config, fs::absolute(model_path).parent_path().string(), model_path + " (config)");
  for (const auto& s : sets) {
    const auto eq = s.find('=');
    if (eq == std::string::npos) throw ConfigError("--set " + s + ": expected KEY=VALUE");
    c.set(s.substr(0, eq), s.substr(eq + 1));
  }
  return c;
}

}  // namespace

LoadedModel load_model(const std::string& model_path, const std::string& config_path,
                       const std::vector<std::string>& sets, RequiredData required) {
  io::ModelFile file = io::read_model_file(model_path);
  Config config = model_config(file, model_path, config_path, sets, required);
  const bool same = same_units_source(file, fs::absolute(model_path).parent_path().string(), config);
  return loaded_model(std::move(file), std::move(config), same);
}

LoadedModel loaded_model(io::ModelFile file, Config config, bool same_units) {
  std::shared_ptr<const Predictor> predictor = make_predictor(file, same_units);
  return {std::move(file), std::move(config), same_units, std::move(predictor)};
}

std::vector<io::LayerBands> covariate_band_names(const io::DataConfig& data) {
  std::vector<io::LayerBands> layers;
  for (const auto& l : data.covariates) {
    io::DatasetPtr ds = io::open_raster(l.path);
    std::vector<std::string> descriptions;
    for (int b = 1; b <= ds->GetRasterCount(); ++b) descriptions.push_back(ds->GetRasterBand(b)->GetDescription());
    layers.push_back(io::layer_bands(l, descriptions));
  }
  return layers;
}

std::vector<CovariateSource> match_covariates(const std::vector<std::string>& model_names,
                                              const std::vector<io::LayerBands>& layers, const std::string& where) {
  std::vector<CovariateSource> out;
  for (const auto& name : model_names) {
    bool found = false;
    for (size_t l = 0; l < layers.size() && !found; ++l)
      for (size_t b = 0; b < layers[l].names.size() && !found; ++b)
        if (layers[l].names[b] == name) {
          out.push_back({l, layers[l].bands[b]});
          found = true;
        }
    if (!found)
      throw DataError("the model uses covariate '" + name + "' but " + where +
                      " has no covariate of that name in data.covariates (names come from the file stem or 'name')");
  }
  return out;
}

namespace {

// build(), with units that cannot be used listed in <report_dir>/unusable_units.csv.
io::BuiltData listing_unusable_units(const std::string& report_dir, const std::function<io::BuiltData()>& build) {
  try {
    return build();
  } catch (const io::UnusableUnits& e) {
    const fs::path dir = report_dir.empty() ? fs::temp_directory_path() : fs::path(report_dir);
    const std::string list = (dir / "unusable_units.csv").string();
    if (leading_process()) io::write_text_atomic(list, io::issues_csv(e.issues()));
    throw DataError(std::string(e.what()) + "\nevery unit and its problem: " + list);
  }
}

}  // namespace

io::BuiltData build_data(const Config& config, const std::string& report_dir, const Collective& processes) {
  return listing_unusable_units(report_dir,
                                [&] { return io::build_dataset(config.data_config(), config.base_dir(), processes); });
}

io::BuiltData model_dataset_in_batches(const LoadedModel& m, const std::string& report_dir, Index batch_pixels,
                                       const std::function<void(const io::BuiltData&)>& consume,
                                       const Collective& processes) {
  return listing_unusable_units(report_dir, [&] {
    return io::build_dataset_in_batches(
        m.config.data_config(), m.config.base_dir(), batch_pixels,
        [&](io::BuiltData& batch) { consume(model_inputs(m, std::move(batch))); }, processes);
  });
}

io::BuiltData model_dataset(const LoadedModel& m, const std::string& report_dir, const Collective& processes) {
  return model_inputs(m, build_data(m.config, report_dir, processes));
}

io::BuiltData model_inputs(const LoadedModel& m, io::BuiltData built) {
  const auto& names = m.file.covariates;
  const Index Dc = static_cast<Index>(names.size());
  if (built.num_coordinates != m.file.coordinates)
    throw DataError("the model was trained with " + std::to_string(m.file.coordinates) +
                    " coordinate inputs but the grid of " + m.config.source() + " gives " +
                    std::to_string(built.num_coordinates) + " (a projected grid gives 2, a geographic one 3)");
  const Index Dt = m.file.time.empty() ? 0 : kTimeInputs;
  if (m.file.time.empty() != built.time.empty())
    throw DataError(m.file.time.empty() ? "the model has no time axis but " + m.config.source() +
                                              " sets data.time; predict one period at a time without it"
                                        : "the model was trained on periods (" + m.file.time.labels().front() + " to " +
                                              m.file.time.labels().back() + ") but " + m.config.source() +
                                              " does not set data.time: list the periods to predict");
  Matrix X(Dc + m.file.coordinates + Dt, built.dataset.num_pixels());
  for (Index k = 0; k < Dc; ++k) {
    const auto it = std::find(built.covariates.begin(), built.covariates.end(), names[static_cast<size_t>(k)]);
    if (it == built.covariates.end())
      throw DataError("the model uses covariate '" + names[static_cast<size_t>(k)] + "' but the data of " +
                      m.config.source() +
                      " do not provide it (missing from data.covariates, or constant over the units)");
    X.row(k) = built.dataset.inputs.row(it - built.covariates.begin());
  }
  const Index Dall = static_cast<Index>(built.covariates.size());
  X.middleRows(Dc, m.file.coordinates + Dt) = built.dataset.inputs.middleRows(Dall, m.file.coordinates + Dt);
  // Times count from the model's first year, which a forecast's periods may not start in.
  if (Dt) X.row(Dc + m.file.coordinates).array() += built.time.origin_year() - m.file.time.origin_year();
  m.file.standardization.apply(X);
  built.dataset.inputs = std::move(X);
  built.covariates = names;
  built.dataset.input_names.clear();
  return built;
}

Prediction predict_dataset_pixels(const LoadedModel& m, const io::BuiltData& built, const std::vector<Index>& pixels,
                                  const PredictOptions& options, int task) {
  const Dataset& d = built.dataset;
  const bool units = m.predictor->needs_pixel_units();
  Matrix X(units ? 0 : d.num_inputs(), static_cast<Index>(pixels.size()));
  std::vector<const std::string*> unit_of;
  for (size_t j = 0; j < pixels.size(); ++j) {
    if (units) {
      const auto bag = std::upper_bound(d.offsets.begin(), d.offsets.end(), pixels[j]) - d.offsets.begin() - 1;
      unit_of.push_back(&d.bag_ids[static_cast<size_t>(bag)]);
    } else {
      X.col(static_cast<Index>(j)) = d.inputs.col(pixels[j]);
    }
  }
  return m.predictor->predict_pixels(X, unit_of, options, task);
}

}  // namespace vbagg::cli
