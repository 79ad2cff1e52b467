// vbagg-predict: intensity, uncertainty and cases maps over the whole grid, streamed strip by
// strip, and units.csv with observed and predicted totals.
#include "predict.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <unordered_map>

#include "app.hpp"
#include "core/likelihood.hpp"
#include "core/link.hpp"
#include "core/metrics.hpp"
#include "core/predict.hpp"
#include "io/aligned_layer.hpp"
#include "io/atomic_file.hpp"
#include "io/coordinates.hpp"
#include "io/raster_writer.hpp"
#include "model_data.hpp"
#include "model_setup.hpp"

namespace vbagg::cli {

namespace {

namespace fs = std::filesystem;

std::string level_name(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

enum class Quantity { mean, cases, latent_mean, sd, quantile, latent_sd, exceedance };

struct Output {
  Quantity what;
  size_t index;  // which quantile or threshold
  std::unique_ptr<io::RasterWriter> writer;
  std::vector<float> strip;
};

std::string intensity_unit(const Model& m) { return likelihood_of(m.spec.likelihood).intensity_unit(); }

std::string latent_unit(const Model& m) { return link_of(m.spec.link).latent_meaning(); }

// What a pixel map shows: the smooth intensity, never the count noise of the bag likelihood.
std::string map_includes(const Model& m) {
  std::string s =
      std::string("the intensity Psi(f) of the GP f: ") +
      (m.spec.linear_inputs > 0 ? "linear mean in the covariates, " : "constant mean, ") +
      (m.spec.fixed_effects == FixedEffects::variational ? "with the uncertainty of its coefficients, " : "") +
      "and its kernel terms; not the count noise of the " + to_string(m.spec.likelihood) + " likelihood";
  const auto extra = likelihood_of(m.spec.likelihood).param_names();
  if (!extra.empty()) s += " (" + extra.front() + " enters unit totals only)";
  if (m.spec.unit_effect) s += "; not the unit effect (it enters unit totals only)";
  return s;
}

// units.csv: observed count, predicted total with a central predictive interval, per unit.
void write_units_csv(const std::string& path, const LoadedModel& m, const std::vector<double>& levels, int samples,
                     int threads) {
  const io::BuiltData built = model_dataset(m);
  const Dataset& d = built.dataset;
  std::vector<Index> all(static_cast<size_t>(d.num_bags()));
  for (Index a = 0; a < d.num_bags(); ++a) all[static_cast<size_t>(a)] = a;
  const Vector totals = unit_totals(m, d, all, threads);
  const Vector bag_weight = d.bag_weights();
  const double lo = std::min(levels.front(), levels.back()), hi = std::max(levels.front(), levels.back());
  std::ostringstream s;
  s.precision(10);
  s << "unit,split,observed,predicted,lower_" << level_name(lo) << ",upper_" << level_name(hi)
    << ",population,pixels\n";
  const std::vector<std::string> none;
  const std::vector<std::string>& train = m.same_units ? m.file.train_units : none;
  const std::vector<std::string>& holdout = m.same_units ? m.file.holdout_units : none;
  for (Index a = 0; a < d.num_bags(); ++a) {
    const std::string& id = d.bag_ids[static_cast<size_t>(a)];
    const Index n = d.bag_size(a);
    const Vector draws = unit_draws(m, d, a, samples);
    auto q = [&](double p) { return empirical_quantile(draws, p); };
    const bool in_train = std::find(train.begin(), train.end(), id) != train.end();
    const bool in_holdout = std::find(holdout.begin(), holdout.end(), id) != holdout.end();
    std::string quoted = id;
    if (quoted.find_first_of(",\"") != std::string::npos) {
      std::string e;
      for (char c : quoted) e += c == '"' ? std::string("\"\"") : std::string(1, c);
      quoted = "\"" + e + "\"";
    }
    s << quoted << ","
      << (in_train     ? "train"
          : in_holdout ? "holdout"
                       : "new")
      << "," << d.response[a] << "," << totals[a] << "," << q(lo) << "," << q(hi) << "," << bag_weight[a] << "," << n
      << "\n";
  }
  io::write_text_atomic(path, s.str());
}

}  // namespace

int predict_main(int argc, char** argv) {
  CLI::App app(
      "Predicts pixel-level intensity with its uncertainty over the whole reference grid from a fitted model, "
      "writing one single-band GeoTIFF per quantity (intensity_mean, intensity_sd, intensity_q<level>, "
      "cases_mean, latent_mean, latent_sd, exceedance_<t>) and units.csv with observed and predicted totals. "
      "With --config it predicts for another area or year from rasters with the same covariate names.",
      "vbagg-predict");
  std::string model_path, config_path, out, format = "GTiff";
  std::vector<std::string> sets, creation;
  std::vector<double> quantiles, exceedance;
  int threads = 0;
  bool quiet = false, verbose = false;
  app.add_option("--model", model_path, "Fitted model (model.yaml written by vbagg-train)")->required();
  app.add_option("--config", config_path, "Run configuration for a new area or year (default: the model's own)");
  app.add_option("--set", sets, "Override a setting: --set KEY=VALUE (repeatable)");
  app.add_option("--out", out, "Output folder for the maps and units.csv")->required();
  app.add_option("--quantiles", quantiles,
                 "Quantile levels of the intensity maps, comma-separated (default: predict.quantiles, 0.025,0.975)")
      ->delimiter(',')
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--exceedance", exceedance, "Threshold t for a map of P(intensity > t) (repeatable)");
  app.add_option("--of", format, "Output format: GTiff (tiled, DEFLATE) or COG (cloud-optimised, with overviews)")
      ->check(CLI::IsMember({"GTiff", "COG"}))
      ->capture_default_str();
  app.add_option("--co", creation, "GDAL creation option KEY=VALUE passed to the output driver (repeatable)");
  app.add_option("--threads", threads, "Threads (default: train.threads, 0 = every core)")->check(CLI::PositiveNumber);
  add_common_flags(app, quiet, verbose);
  return run_app(app, argc, argv, [&] {
    setup_logging("vbagg-predict", quiet, verbose);
    io::ensure_gdal_registered();
    io::RasterFormat fmt{format, creation, 1};
    fmt.validate();
    const LoadedModel m = load_model(model_path, config_path, sets, RequiredData::not_units);
    const Model& model = m.file.model;
    const Settings settings = settings_of(m.config);
    if (quantiles.empty()) quantiles = settings.predict.quantiles;
    if (exceedance.empty()) exceedance = settings.predict.exceedance;
    for (double q : quantiles)
      if (!(q > 0 && q < 1)) throw ConfigError("quantile level " + level_name(q) + " is not strictly between 0 and 1");
    const int nthreads = thread_count(settings, threads);
    fmt.threads = nthreads;
    io::ensure_writable_dir(out);

    const io::DataConfig data = m.config.data_config();
    // Refuse an output folder where a map or units.csv would overwrite one of the inputs.
    std::vector<std::string> planned = {"intensity_mean.tif", "intensity_sd.tif", "cases_mean.tif",
                                        "latent_mean.tif",    "latent_sd.tif",    "units.csv"};
    for (double q : quantiles) planned.push_back("intensity_q" + level_name(q) + ".tif");
    for (double t : exceedance) planned.push_back("exceedance_" + level_name(t) + ".tif");
    refuse_overwriting_inputs(out, planned, data);
    // The reference grid of the configuration (the training grid unless --config names another).
    const std::string grid_path = io::reference_grid_path(data);
    io::Grid grid;
    {
      io::DatasetPtr ref = io::open_raster(grid_path);
      grid = io::Grid::of(*ref, grid_path);
    }
    const auto band_names = covariate_band_names(data);
    const auto sources = match_covariates(m.file.covariates, band_names, m.config.source());
    std::vector<std::unique_ptr<io::AlignedLayer>> layers;
    for (const auto& l : data.covariates)
      layers.push_back(std::make_unique<io::AlignedLayer>(l.path, l.resampling, grid, grid_path));
    std::unique_ptr<io::AlignedLayer> population;
    if (!data.population.path.empty())
      population =
          std::make_unique<io::AlignedLayer>(data.population.path, data.population.resampling, grid, grid_path);
    const io::CoordinateMapper coords(grid);
    if (m.file.coordinates && coords.count() != m.file.coordinates)
      throw DataError("the model was trained with " + std::to_string(m.file.coordinates) + " coordinate inputs but '" +
                      grid_path + "' gives " + std::to_string(coords.count()));

    // Point estimates (nystrom, constant) have no posterior: only their means are written, and
    // the maps say so in their metadata rather than carrying made-up uncertainty.
    const bool posterior = has_uncertainty(m);
    if (!posterior && (app.count("--quantiles") || app.count("--exceedance")))
      spdlog::warn("the {} model is a point estimate: no sd, quantile, exceedance or latent sd maps are written",
                   m.file.kind);
    std::vector<Output> outs;
    auto add = [&](Quantity what, size_t index, const std::string& file, const std::string& desc,
                   const std::string& unit) {
      auto writer = std::make_unique<io::RasterWriter>(out + "/" + file, grid, desc, unit, fmt);
      writer->set_metadata("VBAGG_MODEL_KIND", m.file.kind);
      writer->set_metadata("VBAGG_VERSION", version_text());
      if (m.file.kind != "constant") writer->set_metadata("VBAGG_MAP_INCLUDES", map_includes(model));
      if (!posterior)
        writer->set_metadata("VBAGG_UNCERTAINTY", "none: the " + m.file.kind + " model is a point estimate");
      outs.push_back({what, index, std::move(writer), {}});
    };
    const std::string iu = intensity_unit(model), lu = latent_unit(model);
    const std::string est = posterior ? "posterior mean" : "point estimate";
    add(Quantity::mean, 0, "intensity_mean.tif", est + " of the intensity", iu);
    if (population)
      add(Quantity::cases, 0, "cases_mean.tif", "expected cases: population x " + est + " of the intensity", "cases");
    if (m.file.kind != "constant") add(Quantity::latent_mean, 0, "latent_mean.tif", est + " of the latent GP f", lu);
    if (posterior) {
      add(Quantity::sd, 0, "intensity_sd.tif", "posterior standard deviation of the intensity", iu);
      for (size_t k = 0; k < quantiles.size(); ++k)
        add(Quantity::quantile, k, "intensity_q" + level_name(quantiles[k]) + ".tif",
            "posterior " + level_name(quantiles[k]) + " quantile of the intensity", iu);
      add(Quantity::latent_sd, 0, "latent_sd.tif", "posterior standard deviation of the latent GP f", lu);
      for (size_t k = 0; k < exceedance.size(); ++k)
        add(Quantity::exceedance, k, "exceedance_" + level_name(exceedance[k]) + ".tif",
            "P(intensity > " + level_name(exceedance[k]) + ")", "probability");
    }
    // constant: the rate of the unit holding each pixel (the one covering most of it).
    std::unordered_map<std::int64_t, std::pair<double, double>> cell_rate;  // cell -> (coverage, rate)
    if (m.file.kind == "constant" && !data.units.path.empty()) {
      const io::BuiltData built = model_dataset(m);
      const Dataset& d = built.dataset;
      for (Index a = 0; a < d.num_bags(); ++a) {
        const double rate = constant_rate(m, d.bag_ids[static_cast<size_t>(a)]);
        for (Index i = d.bag_begin(a); i < d.bag_begin(a) + d.bag_size(a); ++i) {
          auto& slot = cell_rate[built.cell[static_cast<size_t>(i)]];
          if (d.coverage[i] > slot.first) slot = {d.coverage[i], rate};
        }
      }
    }

    PredictOptions po;
    if (posterior) {
      po.quantiles = quantiles;
      po.exceedance = exceedance;
    }
    po.threads = nthreads;
    const Index D = m.file.kind == "constant" ? 0 : model.num_inputs();
    const Index Dc = static_cast<Index>(m.file.covariates.size());
    // Strips of at most 256 rows and about 2^20 pixels bound the memory (~0.5 GB with 18
    // covariates) however wide the grid is.
    const int strip_rows = std::clamp((1 << 20) / std::max(1, grid.width), 1, 256);
    Progress progress("predicting", grid.height, !quiet);
    std::vector<std::vector<double>> values(sources.size());
    std::vector<double> pop;
    long long predicted = 0;
    for (int row0 = 0; row0 < grid.height; row0 += strip_rows) {
      const int rows = std::min(strip_rows, grid.height - row0);
      const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(grid.width);
      for (size_t k = 0; k < sources.size(); ++k)
        layers[sources[k].layer]->read(sources[k].band, 0, row0, grid.width, rows, values[k]);
      if (population) population->read(1, 0, row0, grid.width, rows, pop);
      std::vector<Index> valid;
      for (size_t i = 0; i < n; ++i) {
        bool ok = true;
        for (size_t k = 0; ok && k < sources.size(); ++k) ok = std::isfinite(values[k][i]);
        if (ok) valid.push_back(static_cast<Index>(i));
      }
      Prediction p;
      if (m.file.kind == "constant") {
        p.mean.resize(static_cast<Index>(valid.size()));
        for (size_t j = 0; j < valid.size(); ++j) {
          const auto it = cell_rate.find(static_cast<std::int64_t>(row0) * grid.width + valid[j]);
          p.mean[static_cast<Index>(j)] = it != cell_rate.end() ? it->second.second : m.file.overall_rate;
        }
      } else {
        Matrix X(D, static_cast<Index>(valid.size()));
        for (size_t j = 0; j < valid.size(); ++j) {
          const size_t i = static_cast<size_t>(valid[j]);
          for (Index k = 0; k < Dc; ++k) X(k, static_cast<Index>(j)) = values[static_cast<size_t>(k)][i];
          if (m.file.coordinates)
            coords(static_cast<int>(i % static_cast<size_t>(grid.width)),
                   row0 + static_cast<int>(i / static_cast<size_t>(grid.width)),
                   X.col(static_cast<Index>(j)).data() + Dc);
        }
        m.file.standardization.apply(X);
        p = predict(model, X, po);
      }
      for (auto& o : outs) o.strip.assign(n, NAN);
      for (size_t j = 0; j < valid.size(); ++j) {
        const size_t i = static_cast<size_t>(valid[j]);
        const Index J = static_cast<Index>(j);
        for (auto& o : outs) {
          const Index k = static_cast<Index>(o.index);
          double v = NAN;
          switch (o.what) {
            case Quantity::mean:
              v = p.mean[J];
              break;
            case Quantity::cases:
              v = pop[i] * p.mean[J];
              break;
            case Quantity::latent_mean:
              v = p.latent_mean[J];
              break;
            case Quantity::sd:
              v = p.sd[J];
              break;
            case Quantity::quantile:
              v = p.quantiles(J, k);
              break;
            case Quantity::latent_sd:
              v = std::sqrt(p.latent_var[J]);
              break;
            case Quantity::exceedance:
              v = p.exceedance(J, k);
              break;
          }
          o.strip[i] = static_cast<float>(v);
        }
      }
      for (auto& o : outs) o.writer->write_rows(row0, rows, o.strip);
      fault_point("strip");
      predicted += static_cast<long long>(valid.size());
      progress.update(row0 + rows);
    }
    progress.finish();
    for (auto& o : outs) {
      o.writer->finish();
      fault_point("map");
    }
    spdlog::info("predicted {} pixels of {} x {}; wrote {} maps to {}", predicted, grid.width, grid.height, outs.size(),
                 out);
    if (!data.units.path.empty()) {
      write_units_csv(out + "/units.csv", m, quantiles.size() >= 2 ? quantiles : std::vector<double>{0.025, 0.975},
                      settings.predict.samples, nthreads);
      spdlog::info("wrote {}/units.csv", out);
    }
  });
}

}  // namespace vbagg::cli
