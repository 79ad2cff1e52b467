#include "model_data.hpp"

#include <filesystem>
#include <random>

#include "core/predict.hpp"
#include "io/gdal_handles.hpp"

namespace vbagg::cli {

namespace fs = std::filesystem;

namespace {

// Units of another source (a new area) are not the training units even when their ids repeat.
bool same_units_source(const LoadedModel& m) {
  std::string trained;
  if (const YAML::Node u = m.file.config["data"]["units"]; u && u["path"]) trained = u["path"].as<std::string>();
  const std::string now = m.config.data_config().units.path;
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
  LoadedModel m{std::move(file), std::move(config), true};
  m.same_units = same_units_source(m);
  return m;
}

std::vector<std::vector<std::string>> covariate_band_names(const io::DataConfig& data) {
  std::vector<std::vector<std::string>> names;
  for (const auto& l : data.covariates) {
    io::DatasetPtr ds = io::open_raster(l.path);
    const std::string base = l.name.empty() ? fs::path(l.path).stem().string() : l.name;
    std::vector<std::string> bands;
    const int n = ds->GetRasterCount();
    for (int b = 1; b <= n; ++b) {
      const std::string desc = ds->GetRasterBand(b)->GetDescription();
      bands.push_back(n == 1 ? base : base + "_" + (desc.empty() ? std::to_string(b) : desc));
    }
    names.push_back(bands);
  }
  return names;
}

std::vector<CovariateSource> match_covariates(const std::vector<std::string>& model_names,
                                              const std::vector<std::vector<std::string>>& layers,
                                              const std::string& where) {
  std::vector<CovariateSource> out;
  for (const auto& name : model_names) {
    bool found = false;
    for (size_t l = 0; l < layers.size() && !found; ++l)
      for (size_t b = 0; b < layers[l].size() && !found; ++b)
        if (layers[l][b] == name) {
          out.push_back({l, static_cast<int>(b + 1)});
          found = true;
        }
    if (!found)
      throw DataError("the model uses covariate '" + name + "' but " + where +
                      " has no covariate of that name in data.covariates (names come from the file stem or 'name')");
  }
  return out;
}

io::BuiltData model_dataset(const LoadedModel& m) {
  return model_inputs(m, io::build_dataset(m.config.data_config(), m.config.base_dir()));
}

io::BuiltData model_inputs(const LoadedModel& m, io::BuiltData built) {
  const auto& names = m.file.covariates;
  const Index Dc = static_cast<Index>(names.size());
  if (built.num_coordinates != m.file.coordinates)
    throw DataError("the model was trained with " + std::to_string(m.file.coordinates) +
                    " coordinate inputs but the grid of " + m.config.source() + " gives " +
                    std::to_string(built.num_coordinates) + " (a projected grid gives 2, a geographic one 3)");
  Matrix X(Dc + m.file.coordinates, built.dataset.num_pixels());
  for (Index k = 0; k < Dc; ++k) {
    const auto it = std::find(built.covariates.begin(), built.covariates.end(), names[static_cast<size_t>(k)]);
    if (it == built.covariates.end())
      throw DataError("the model uses covariate '" + names[static_cast<size_t>(k)] + "' but the data of " +
                      m.config.source() +
                      " do not provide it (missing from data.covariates, or constant over the units)");
    X.row(k) = built.dataset.inputs.row(it - built.covariates.begin());
  }
  const Index Dall = static_cast<Index>(built.covariates.size());
  X.bottomRows(m.file.coordinates) = built.dataset.inputs.middleRows(Dall, m.file.coordinates);
  m.file.standardization.apply(X);
  built.dataset.inputs = std::move(X);
  built.covariates = names;
  built.dataset.input_names.clear();
  return built;
}

bool has_uncertainty(const LoadedModel& m) { return m.file.kind == "vbagg" || m.file.kind == "bag_pixel"; }

double constant_rate(const LoadedModel& m, const std::string& unit_id) {
  if (!m.same_units) return m.file.overall_rate;
  const auto it = m.file.unit_rates.find(unit_id);
  return it != m.file.unit_rates.end() ? it->second : m.file.overall_rate;
}

Vector unit_totals(const LoadedModel& m, const Dataset& d, const std::vector<Index>& bags, int threads) {
  if (m.file.kind != "constant") return predicted_bag_totals(m.file.model, d, bags, threads, m.same_units);
  const Vector P = d.bag_weights();
  Vector t(static_cast<Index>(bags.size()));
  for (size_t k = 0; k < bags.size(); ++k)
    t[static_cast<Index>(k)] = constant_rate(m, d.bag_ids[static_cast<size_t>(bags[k])]) * P[bags[k]];
  return t;
}

Vector unit_draws(const LoadedModel& m, const Dataset& d, Index a, int samples) {
  const unsigned long long seed = 1000 + static_cast<unsigned long long>(a);
  const Index b = d.bag_begin(a), n = d.bag_size(a);
  if (m.file.kind == "constant") {
    const double eta = constant_rate(m, d.bag_ids[static_cast<size_t>(a)]) * d.bag_weights()[a];
    std::mt19937_64 rng(seed);
    std::poisson_distribution<long long> poisson(eta);
    Vector draws(samples);
    for (int s = 0; s < samples; ++s) draws[s] = static_cast<double>(poisson(rng));
    std::sort(draws.data(), draws.data() + draws.size());
    return draws;
  }
  const Vector w = d.coverage.segment(b, n).cwiseProduct(d.population.segment(b, n));
  const UnitEffectMoments unit = bag_unit_effects(m.file.model, d, {a}, 1, m.same_units)[0];
  Vector draws = bag_predictive_draws(m.file.model, d.inputs.middleCols(b, n), w, samples, seed, unit);
  std::sort(draws.data(), draws.data() + draws.size());
  return draws;
}

Prediction predict_dataset_pixels(const LoadedModel& m, const io::BuiltData& built, const std::vector<Index>& pixels,
                                  const PredictOptions& options) {
  const Dataset& d = built.dataset;
  if (m.file.kind == "constant") {
    Prediction p;
    const Index n = static_cast<Index>(pixels.size());
    p.mean.resize(n);
    p.sd = p.latent_mean = p.latent_var = Vector::Zero(n);
    for (Index j = 0; j < n; ++j) {
      const Index i = pixels[static_cast<size_t>(j)];
      const auto bag = std::upper_bound(d.offsets.begin(), d.offsets.end(), i) - d.offsets.begin() - 1;
      p.mean[j] = constant_rate(m, d.bag_ids[static_cast<size_t>(bag)]);
    }
    return p;
  }
  Matrix X(d.num_inputs(), static_cast<Index>(pixels.size()));
  for (size_t j = 0; j < pixels.size(); ++j) X.col(static_cast<Index>(j)) = d.inputs.col(pixels[j]);
  return predict(m.file.model, X, options);
}

}  // namespace vbagg::cli
