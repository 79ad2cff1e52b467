// vbagg-predict: intensity, uncertainty and cases maps over the whole grid, streamed strip by
// strip, and units.csv with observed and predicted totals.
#include "predict.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <locale>
#include <map>
#include <sstream>
#include <unordered_map>

#include "app.hpp"
#include "core/likelihood.hpp"
#include "core/link.hpp"
#include "core/metrics.hpp"
#include "core/shard.hpp"
#include "io/aligned_layer.hpp"
#include "io/atomic_file.hpp"
#include "io/coordinates.hpp"
#include "io/csv.hpp"
#include "io/map_style.hpp"
#include "io/raster_writer.hpp"
#include "io/units_output.hpp"
#include "model_data.hpp"
#include "model_setup.hpp"
#include "pixel_strips.hpp"
#include "processes.hpp"
#include "span_maps.hpp"

namespace vbagg::cli {

namespace {

namespace fs = std::filesystem;

std::string level_name(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

enum class Quantity { mean, cases, latent_mean, sd, quantile, latent_sd, exceedance };

// Maps that share a colour ramp and its limits (the mean and its quantiles, to be compared), or
// have their own.
enum class Family { intensity, cases, latent, intensity_sd, latent_sd, probability };

// A latent sd past which a map's mean is a poor point estimate: with the exp link the mean
// e^(m + v/2) is then over 1.65 times the median e^m. Fits of a few dozen units with strong unit
// noise reach it (30 units, unit noise 0.7: a latent sd of 2 at the median pixel, and a mean map
// whose squared error against the truth was 24 times the median map's; docs/outputs.md), where fits
// of 200 units stay near 0.1.
constexpr double kWideLatentSd = 1.0;

// One map to write: what it shows, which quantile or threshold, its file, description and unit.
struct MapSpec {
  Quantity what;
  size_t index;
  std::string file, description, unit;
  Family family;
  int task = 0;         // whose prediction the map shows
  double rate_per = 1;  // the intensity maps' scale (counts' predict.rate_per; 1 for other tasks)
};

// The model as task d's maps see it (its first source's view; the model itself for one task).
Model task_view(const LoadedModel& m, int task) {
  return m.file.model.spec.num_tasks() == 1 ? m.file.model : m.file.model.for_task(task);
}

// predict.rate_per scales a task's intensity when it is a rate of counts.
double task_rate_per(const LoadedModel& m, int task, double rate_per) {
  if (m.file.kind == ModelKind::constant) return rate_per;
  return likelihood_of(task_view(m, task).spec.likelihood).is_count() ? rate_per : 1.0;
}

// The intensity maps' unit: the likelihood's, per rate_per people for counts.
std::string intensity_unit(const Model& model, double rate_per) {
  if (rate_per == 1) return likelihood_of(model.spec.likelihood).intensity_unit();
  std::ostringstream s;
  s.imbue(std::locale::classic());
  s << "cases per " << rate_per << " people";
  return s.str();
}

// What a pixel map shows: the smooth intensity, never the count noise of the bag likelihood.
std::string map_includes(const Model& m) {
  std::string s =
      std::string("the intensity Psi(f) of the GP f: ") +
      (m.spec.linear_inputs > 0 ? "linear mean in the covariates, " : "constant mean, ") +
      (m.spec.fixed_effects == FixedEffects::variational ? "with the uncertainty of its coefficients, " : "") +
      "and its kernel terms" +
      (m.spread.directions() > 0 ? ", with the uncertainty of its point estimates (kernel, mean and noise parameters)"
                                 : "") +
      "; not the count noise of the " + to_string(m.spec.likelihood) + " likelihood";
  const auto extra = likelihood_of(m.spec.likelihood).param_names();
  if (!extra.empty()) s += " (" + extra.front() + " enters unit totals only)";
  if (m.spec.unit_effect) s += "; not the unit effect (it enters unit totals only)";
  return s;
}

// The maps a model gives: means always; sd, quantiles, latent sd and exceedance only with a
// posterior (point estimates carry no made-up uncertainty); cases only with a population.
// Task `task`'s maps; a model of several tasks names each file and description after its task.
std::vector<MapSpec> plan_task_maps(const LoadedModel& m, int task, bool population,
                                    const std::vector<double>& quantiles, const std::vector<double>& exceedance,
                                    double rate_per) {
  const Predictor& p = *m.predictor;
  const Model view = task_view(m, task);
  rate_per = task_rate_per(m, task, rate_per);
  const std::string iu = intensity_unit(view, rate_per);
  const std::string lu = link_of(view.spec.link).latent_meaning();
  const std::string est = p.has_posterior() ? "posterior mean" : "point estimate";
  const BagLikelihood& lik = likelihood_of(view.spec.likelihood);
  std::vector<MapSpec> maps = {
      {Quantity::mean, 0, "intensity_mean.tif", est + " of the intensity", iu, Family::intensity}};
  if (population)
    maps.push_back({Quantity::cases, 0, "cases_mean.tif",
                    std::string("expected ") + lik.total_unit() + ": population x " + est + " of the intensity",
                    lik.total_unit(), Family::cases});
  if (p.has_latent())
    maps.push_back({Quantity::latent_mean, 0, "latent_mean.tif", est + " of the latent GP f", lu, Family::latent});
  if (p.has_posterior()) {
    maps.push_back({Quantity::sd, 0, "intensity_sd.tif", "posterior standard deviation of the intensity", iu,
                    Family::intensity_sd});
    for (size_t k = 0; k < quantiles.size(); ++k)
      maps.push_back({Quantity::quantile, k, "intensity_q" + level_name(quantiles[k]) + ".tif",
                      "posterior " + level_name(quantiles[k]) + " quantile of the intensity", iu, Family::intensity});
    maps.push_back({Quantity::latent_sd, 0, "latent_sd.tif", "posterior standard deviation of the latent GP f", lu,
                    Family::latent_sd});
    for (size_t k = 0; k < exceedance.size(); ++k)
      maps.push_back({Quantity::exceedance, k, "exceedance_" + level_name(exceedance[k]) + ".tif",
                      "P(intensity > " + level_name(exceedance[k]) + " " + iu + ")", "probability",
                      Family::probability});
  }
  const std::string name = m.file.model.spec.num_tasks() > 1 ? m.file.model.spec.task_name(task) : "";
  for (MapSpec& s : maps) {
    s.task = task;
    s.rate_per = rate_per;
    if (name.empty()) continue;
    s.file = name + "_" + s.file;
    s.description = name + ": " + s.description;
  }
  return maps;
}

// The maps of every task.
std::vector<MapSpec> plan_maps(const LoadedModel& m, bool population, const std::vector<double>& quantiles,
                               const std::vector<double>& exceedance, double rate_per) {
  std::vector<MapSpec> maps;
  for (int d = 0; d < static_cast<int>(m.file.model.spec.num_tasks()); ++d) {
    const std::vector<MapSpec> own = plan_task_maps(m, d, population, quantiles, exceedance, rate_per);
    maps.insert(maps.end(), own.begin(), own.end());
  }
  return maps;
}

// "incidence~prevalence=0.62; ...": the prior correlation of every pair of tasks' latent fields.
std::string task_correlation_text(const Model& model) {
  const Matrix C = model.task_correlations();
  std::ostringstream s;
  s.imbue(std::locale::classic());
  s.precision(3);
  for (Index d = 0; d < C.rows(); ++d)
    for (Index e = d + 1; e < C.cols(); ++e)
      s << (d + e > 1 ? "; " : "") << model.spec.task_name(d) << "~" << model.spec.task_name(e) << "=" << C(d, e);
  return s.str();
}

struct MapOutput {
  MapSpec spec;
  std::unique_ptr<io::RasterWriter> writer;
};

// The maps' files: one per map, with a band per period of a space-time prediction (`periods`),
// or with --split-periods one file per map and period, <map>_<period>.tif.
std::vector<MapSpec> map_files(const std::vector<MapSpec>& maps, const std::vector<std::string>& periods,
                               bool split_periods) {
  if (!split_periods) return maps;
  std::vector<MapSpec> files;
  for (const MapSpec& spec : maps)
    for (const std::string& period : periods) {
      MapSpec f = spec;
      f.file = fs::path(spec.file).stem().string() + "_" + period + ".tif";
      f.description = spec.description + ", " + period;
      files.push_back(f);
    }
  return files;
}

std::vector<MapOutput> open_maps(const std::vector<MapSpec>& maps, const LoadedModel& m, const std::string& out,
                                 const io::Grid& grid, const io::RasterFormat& format, double rate_per,
                                 const std::vector<std::string>& band_names) {
  const std::string kind = to_string(m.file.kind);
  std::vector<MapOutput> outs;
  for (const MapSpec& spec : maps) {
    auto writer = std::make_unique<io::RasterWriter>(out + "/" + spec.file, grid, spec.description, spec.unit, format,
                                                     band_names);
    writer->set_metadata("VBAGG_MODEL_KIND", kind);
    writer->set_metadata("VBAGG_VERSION", version_text());
    if (spec.unit.rfind("cases per", 0) == 0) writer->set_metadata("VBAGG_RATE_PER", level_name(rate_per));
    if (m.predictor->has_latent()) writer->set_metadata("VBAGG_MAP_INCLUDES", map_includes(task_view(m, spec.task)));
    if (m.file.model.spec.num_tasks() > 1) {
      writer->set_metadata("VBAGG_TASK", m.file.model.spec.task_name(spec.task));
      writer->set_metadata("VBAGG_TASK_CORRELATIONS", task_correlation_text(m.file.model));
    }
    if (!m.predictor->has_posterior())
      writer->set_metadata("VBAGG_UNCERTAINTY", "none: the " + kind + " model is a point estimate");
    outs.push_back({spec, std::move(writer)});
  }
  return outs;
}

// rate_per scales the intensity maps (not the cases, latent or probability maps).
double map_value(const MapSpec& spec, const Prediction& p, Index j, double population, double rate_per) {
  const Index k = static_cast<Index>(spec.index);
  switch (spec.what) {
    case Quantity::mean:
      return rate_per * p.mean[j];
    case Quantity::cases:
      return population * p.mean[j];
    case Quantity::latent_mean:
      return p.latent_mean[j];
    case Quantity::sd:
      return rate_per * p.sd[j];
    case Quantity::quantile:
      return rate_per * p.quantiles(j, k);
    case Quantity::latent_sd:
      return std::sqrt(p.latent_var[j]);
    case Quantity::exceedance:
      return p.exceedance(j, k);
  }
  return NAN;
}

// The unit holding each grid cell (the one covering most of it), for predictors that read units;
// of a space-time build, the units of period `period`.
std::unordered_map<std::int64_t, const std::string*> units_by_cell(const io::BuiltData& built, int period = -1) {
  std::unordered_map<std::int64_t, std::pair<double, const std::string*>> best;
  const Dataset& d = built.dataset;
  for (Index a = 0; a < d.num_bags(); ++a)
    if (built.units[static_cast<size_t>(d.global_bag_of(a))].period == period)
      for (Index i = d.bag_begin(a); i < d.bag_begin(a) + d.bag_size(a); ++i) {
        auto& slot = best[built.cell[static_cast<size_t>(i)]];
        if (d.coverage[i] > slot.first) slot = {d.coverage[i], &d.bag_ids[static_cast<size_t>(a)]};
      }
  std::unordered_map<std::int64_t, const std::string*> out;
  for (const auto& [cell, slot] : best) out[cell] = slot.second;
  return out;
}

// Each map's QGIS style beside it: limits from the family's pooled value sample, so the mean and
// its quantile maps share one ramp; probabilities on a fixed 0-1 ramp.
void write_map_styles(const std::vector<MapOutput>& outs, const std::string& dir) {
  const std::map<Family, io::Palette> palette = {{Family::intensity, io::Palette::viridis},
                                                 {Family::cases, io::Palette::yellow_green_blue},
                                                 {Family::latent, io::Palette::viridis},
                                                 {Family::intensity_sd, io::Palette::yellow_orange_red},
                                                 {Family::latent_sd, io::Palette::yellow_orange_red},
                                                 {Family::probability, io::Palette::plasma}};
  std::map<Family, std::vector<float>> pooled;
  for (const MapOutput& o : outs) {
    auto& v = pooled[o.spec.family];
    v.insert(v.end(), o.writer->value_sample().begin(), o.writer->value_sample().end());
  }
  for (const MapOutput& o : outs) {
    io::RasterStyle style;
    if (o.spec.family == Family::probability) {
      style.prefix = "P = ";
    } else {
      style = io::ramp_limits(pooled[o.spec.family]);
      style.suffix = " " + o.spec.unit;
    }
    style.palette = palette.at(o.spec.family);
    io::write_text_atomic(dir + "/" + fs::path(o.spec.file).stem().string() + ".qml", io::raster_style_qml(style));
  }
}

// What units.csv and units.gpkg say about one unit.
struct UnitRow {
  std::string id;  // "<source>:<id>" for a unit of a later source, "<id>@<period>" of a space-time model
  int source = 0;
  int period = -1;  // the index of a space-time unit's period
  io::UnitResult result;
};

// Observed count and predicted total with a central predictive interval, per unit of the data (a
// whole build or a batch of it). In an MPI job each process predicts the units it built
// (io::build_dataset shares them out), and
// sums share the numbers (each unit's are non-zero on one process only, so the sums are copies).
// `shared_over`: the processes whose shares `built` holds (one_process() for a whole build).
std::vector<UnitRow> unit_rows(const LoadedModel& m, const io::BuiltData& built, double lo, double hi, int samples,
                               int threads, const Collective& shared_over) {
  const Dataset& d = built.dataset;
  std::vector<Index> local(static_cast<size_t>(d.num_bags()));
  for (Index a = 0; a < d.num_bags(); ++a) local[static_cast<size_t>(a)] = a;
  Matrix predicted = Matrix::Zero(4, static_cast<Index>(built.units.size()));  // total, lower, upper, population
  const Vector totals = local.empty() ? Vector() : m.predictor->unit_totals(d, local, threads);
  const Vector bag_weight = d.bag_weights();
  m.predictor->unit_draws(d, local, samples, threads, [&](size_t place, const Vector& draws) {
    const Index a = local[place];
    predicted.col(d.global_bag_of(a) - built.first_unit) << totals[a], empirical_quantile(draws, lo),
        empirical_quantile(draws, hi), bag_weight[a];
  });
  shared_over.sum(predicted);
  const std::vector<std::string> none;
  const std::vector<std::string>& train = m.same_units ? m.file.train_units : none;
  const std::vector<std::string>& holdout = m.same_units ? m.file.holdout_units : none;
  std::vector<UnitRow> rows;
  for (size_t a = 0; a < built.units.size(); ++a) {
    const io::UnitSummary& u = built.units[a];
    const bool in_train = std::find(train.begin(), train.end(), u.id) != train.end();
    const bool in_holdout = std::find(holdout.begin(), holdout.end(), u.id) != holdout.end();
    const auto k = static_cast<Index>(a);
    rows.push_back({u.id,
                    u.source,
                    u.period,
                    {!u.observed() ? "unobserved"
                     : in_train    ? "train"
                     : in_holdout  ? "holdout"
                                   : "new",
                     u.response, predicted(0, k), predicted(1, k), predicted(2, k), predicted(3, k), u.pixels}});
  }
  return rows;
}

// `sources`: the source names of a joint fit (a column "source" after the unit; none for one source).
// `periods`: a space-time model's (a column "period" after the unit).
void write_units_csv(const std::string& path, const std::vector<UnitRow>& rows, const std::string& lower,
                     const std::string& upper, const std::vector<std::string>& sources,
                     const std::vector<std::string>& periods) {
  std::ostringstream s;
  s.precision(10);
  s << "unit," << (sources.empty() ? "" : "source,") << (periods.empty() ? "" : "period,")
    << "split,observed,predicted," << lower << "," << upper << ",population,pixels\n";
  for (const UnitRow& r : rows) {
    s << io::csv_field(r.id) << ",";
    if (!sources.empty()) s << io::csv_field(sources[static_cast<size_t>(r.source)]) << ",";
    if (!periods.empty()) s << periods[static_cast<size_t>(r.period)] << ",";
    // A unit without a response leaves its observed cell empty.
    s << r.result.split << ",";
    if (!std::isnan(r.result.observed)) s << r.result.observed;
    s << "," << r.result.predicted << "," << r.result.lower << "," << r.result.upper << "," << r.result.population
      << "," << r.result.pixels << "\n";
  }
  io::write_text_atomic(path, s.str());
}

// units.gpkg's styles: the predicted total (the default), the observed count on the same classes
// so the two compare, and the log residual on a diverging ramp centred on zero.
std::vector<io::LayerStyle> unit_styles(const std::vector<UnitRow>& rows) {
  std::vector<double> predicted, observed, residual;
  double largest = 0;
  for (const UnitRow& r : rows) {
    predicted.push_back(r.result.predicted);
    observed.push_back(r.result.observed);
    if (r.result.observed > 0 && r.result.predicted > 0)
      largest = std::max(largest, std::abs(std::log(r.result.observed) - std::log(r.result.predicted)));
  }
  std::vector<double> both = predicted;
  both.insert(both.end(), observed.begin(), observed.end());
  const std::vector<double> counts = io::quantile_breaks(both, 5);
  io::GraduatedStyle p{"predicted", counts, io::Palette::red_purple, "cases", 0};
  io::GraduatedStyle o{"observed", counts, io::Palette::red_purple, "cases", 0};
  const double r = largest > 0 ? largest : 1.0;
  io::GraduatedStyle res{
      "log_residual", {-r, -0.6 * r, -0.2 * r, 0.2 * r, 0.6 * r, r}, io::Palette::blue_white_red, "", 2};
  return {{"predicted", io::graduated_style_qml(p), "predicted total cases per unit", true},
          {"observed", io::graduated_style_qml(o), "observed cases per unit, on the classes of predicted", false},
          {"log_residual", io::graduated_style_qml(res), "log(observed) - log(predicted): red where more were observed",
           false}};
}

// units.csv (for scripts) and units.gpkg (the input polygons with the same columns and styles).
// `sources`: the source names of a joint fit (none for one source).
void write_unit_outputs(const LoadedModel& m, const std::vector<UnitRow>& rows, const std::vector<std::string>& sources,
                        const std::string& dir, double lo, double hi, bool styles) {
  const std::string lower = "lower_" + level_name(lo), upper = "upper_" + level_name(hi);
  const io::DataConfig data = m.config.data_config();
  const std::vector<std::string> periods = data.time.labels();
  write_units_csv(dir + "/units.csv", rows, lower, upper, sources, periods);
  if (!periods.empty()) {
    // One layer per period, units_<period>, each feature with its unit's results of the period.
    std::vector<io::UnitsLayer> layers;
    std::vector<std::vector<UnitRow>> per_period(periods.size());
    for (const auto& period : periods) layers.push_back({"units_" + period, data.units, {}, {}});
    for (const UnitRow& r : rows) {
      const auto p = static_cast<size_t>(r.period);
      per_period[p].push_back(r);
      layers[p].results[r.id.substr(0, r.id.size() - periods[p].size() - 1)] = r.result;
    }
    for (size_t p = 0; p < layers.size(); ++p)
      if (styles && !per_period[p].empty()) layers[p].styles = unit_styles(per_period[p]);
    write_units_geopackage(dir + "/units.gpkg", lower, upper, layers);
    return;
  }
  // One layer per source, named by the source (one source: "units"); rows of later sources carry
  // "<source>:" before their ids.
  std::vector<io::UnitsLayer> layers{{data.more_sources.empty() ? "units" : data.units.name, data.units, {}, {}}};
  for (const auto& more : data.more_sources) layers.push_back({more.units.name, more.units, {}, {}});
  std::vector<std::vector<UnitRow>> per_layer(layers.size());
  for (const UnitRow& r : rows) {
    const auto k = static_cast<size_t>(r.source);
    per_layer[k].push_back(r);
    layers[k].results[k == 0 ? r.id : r.id.substr(layers[k].name.size() + 1)] = r.result;
  }
  for (size_t k = 0; k < layers.size(); ++k)
    if (styles && !per_layer[k].empty()) layers[k].styles = unit_styles(per_layer[k]);
  write_units_geopackage(dir + "/units.gpkg", lower, upper, layers);
}

}  // namespace

void run_predict(const PredictArgs& args) {
  io::ensure_gdal_registered();
  io::RasterFormat format{args.format, args.creation, 1};
  format.validate();
  const LoadedModel m = load_model(args.model_path, args.config_path, args.sets, RequiredData::not_units);
  const Settings settings = settings_of(m.config);
  const std::vector<double> quantiles = args.quantiles.empty() ? settings.predict.quantiles : args.quantiles;
  const std::vector<double> exceedance = args.exceedance.empty() ? settings.predict.exceedance : args.exceedance;
  const double rate_per = settings.predict.rate_per;
  bool counts = false;
  for (int d = 0; d < static_cast<int>(m.file.model.spec.num_tasks()); ++d) counts |= task_rate_per(m, d, 2.0) != 1.0;
  if (rate_per != 1 && !counts)
    throw ConfigError("predict.rate_per applies to counts; the " + to_string(m.file.model.spec.likelihood) +
                      " likelihood's intensity is not a rate per person");
  const bool styles = args.style.empty() ? settings.predict.qgis_style : args.style == "qgis";
  if (!args.style.empty() && args.style != "qgis" && args.style != "none")
    throw ConfigError("--style " + args.style + ": expected qgis or none");
  for (double q : quantiles)
    if (!(q > 0 && q < 1)) throw ConfigError("quantile level " + level_name(q) + " is not strictly between 0 and 1");
  const int threads = thread_count(settings, args.threads);
  format.threads = threads;
  io::ensure_writable_dir(args.out);
  const io::DataConfig data = m.config.data_config();
  if (!m.predictor->has_posterior() && (!args.quantiles.empty() || !args.exceedance.empty()))
    spdlog::warn("the {} model is a point estimate: no sd, quantile, exceedance or latent sd maps are written",
                 to_string(m.file.kind));

  // A space-time model predicts the periods of data.time (which may lie beyond its own: a forecast).
  const io::TimeAxis& time = data.time;
  if (m.file.time.empty() != time.empty())
    throw ConfigError(m.file.time.empty()
                          ? "data.time is set but the model has no time axis; predict it without data.time"
                          : "the model is space-time (trained on " + m.file.time.labels().front() + " to " +
                                m.file.time.labels().back() + "): set data.time to the periods to predict");
  if (args.split_periods && time.empty()) throw ConfigError("--split-periods needs a space-time model and data.time");
  const std::vector<std::string> periods = time.labels();
  const size_t P = std::max<size_t>(1, time.size());

  std::vector<std::string> span_texts = settings.predict.spans;
  span_texts.insert(span_texts.end(), args.spans.begin(), args.spans.end());
  if (!span_texts.empty() && time.empty()) throw ConfigError("--span averages periods; it needs a space-time model");
  const std::vector<Span> spans = parse_spans(span_texts, time);

  // Refuse an output folder where a map or units.csv would overwrite one of the inputs.
  const std::vector<MapSpec> maps = plan_maps(m, !data.population.path.empty(), quantiles, exceedance, rate_per);
  const std::vector<MapSpec> files = map_files(maps, periods, args.split_periods);
  std::vector<std::string> planned = {"units.csv", "units.gpkg", "unusable_units.csv"};
  for (const std::string& f : span_files(spans, quantiles)) {
    planned.push_back(f);
    planned.push_back(fs::path(f).stem().string() + ".qml");
  }
  for (const MapSpec& s : files) {
    planned.push_back(s.file);
    planned.push_back(fs::path(s.file).stem().string() + ".qml");
  }
  refuse_overwriting_inputs(args.out, planned, data);

  // Each period's rasters (its covariates and population) and time inputs.
  std::vector<PixelSources> sources;
  for (size_t p = 0; p < time.size(); ++p) {
    Vector t(kTimeInputs);
    time_inputs(io::TimeAxis::time_of(time[p], m.file.time.origin_year()), t);
    sources.push_back(open_sources(m, io::period_config(data, p), t));
  }
  if (time.empty()) sources.push_back(open_sources(m, data));
  const io::Grid& grid = sources.front().grid;
  // In an MPI job the processes take turns at the strips and the leading one writes every map.
  const bool leader = leading_process();
  std::vector<MapOutput> outs;
  const std::vector<std::string> band_names = args.split_periods ? std::vector<std::string>() : periods;
  if (leader)
    outs = open_maps(files, m, args.out, grid, format, rate_per, band_names);
  else
    for (const MapSpec& spec : files) outs.push_back({spec, nullptr});
  // Map j of period p: its file's output and band.
  auto output_of = [&](size_t j, size_t p) -> std::pair<MapOutput*, int> {
    if (args.split_periods) return {&outs[j * P + p], 0};
    return {&outs[j], static_cast<int>(p)};
  };
  // The constant model's rate belongs to the unit holding each pixel: its units are built whole,
  // here. A GP's are built after the maps, a batch at a time.
  io::BuiltData units;
  std::vector<std::unordered_map<std::int64_t, const std::string*>> unit_of_cell(P);  // per period
  if (m.predictor->needs_pixel_units() && !data.units.path.empty()) {
    units = model_dataset(m, args.out);
    for (size_t p = 0; p < P; ++p) unit_of_cell[p] = units_by_cell(units, time.empty() ? -1 : static_cast<int>(p));
  }

  PredictOptions po;
  if (m.predictor->has_posterior()) {
    po.quantiles = quantiles;
    po.exceedance = exceedance;  // divided by each task's rate_per below
  }
  po.threads = threads;
  // Each task's exceedance thresholds in its maps' unit (rate_per scales count tasks only).
  std::vector<PredictOptions> task_options;
  for (int d = 0; d < static_cast<int>(m.file.model.spec.num_tasks()); ++d) {
    task_options.push_back(po);
    const double r = task_rate_per(m, d, rate_per);
    for (size_t k = 0; k < po.exceedance.size(); ++k) task_options.back().exceedance[k] = exceedance[k] / r;
  }
  // Strips of at most 256 rows and about 2^20 pixels bound the memory (~0.5 GB with 18
  // covariates) however wide the grid is.
  const int strip_rows = settings.predict.strip_rows > 0 ? settings.predict.strip_rows
                                                         : std::clamp((1 << 20) / std::max(1, grid.width), 1, 256);
  const io::CoordinateMapper coords(grid);
  Progress progress("predicting", grid.height, args.progress && leader);
  std::vector<std::vector<double>> values(sources.front().covariates.size());
  Strip strip;
  std::vector<const std::string*> pixel_units;
  long long predicted = 0;
  // Pixels (of every task) whose latent sd exceeds kWideLatentSd, for the warning after the maps.
  long long wide = 0, scored = 0;
  // Every map's values over rows [row0, row0 + rows) of period p, into map_strips.
  auto predict_strip = [&](int row0, int rows, size_t p, std::vector<std::vector<float>>& map_strips) {
    read_strip(sources[p], m, coords, row0, rows, values, strip);
    pixel_units.clear();
    if (m.predictor->needs_pixel_units())
      for (Index i : strip.valid) {
        const auto it = unit_of_cell[p].find(static_cast<std::int64_t>(row0) * grid.width + i);
        pixel_units.push_back(it != unit_of_cell[p].end() ? it->second : nullptr);
      }
    std::vector<Prediction> pred;
    for (size_t d = 0; d < task_options.size(); ++d)
      pred.push_back(m.predictor->predict_pixels(strip.inputs, pixel_units, task_options[d], static_cast<int>(d)));
    if (m.predictor->has_posterior())
      for (const Prediction& t : pred) {
        wide += (t.latent_var.array() > kWideLatentSd * kWideLatentSd).count();
        scored += t.latent_var.size();
      }
    const size_t n = static_cast<size_t>(strip.rows) * static_cast<size_t>(grid.width);
    for (size_t j = 0; j < maps.size(); ++j) {
      const MapSpec& spec = maps[j];
      map_strips[j].assign(n, NAN);
      for (size_t k = 0; k < strip.valid.size(); ++k) {
        const size_t i = static_cast<size_t>(strip.valid[k]);
        map_strips[j][i] =
            static_cast<float>(map_value(spec, pred[static_cast<size_t>(spec.task)], static_cast<Index>(k),
                                         strip.population.empty() ? NAN : strip.population[i], spec.rate_per));
      }
    }
    predicted += static_cast<long long>(strip.valid.size());
  };
  // The work is (strip, period) pairs, strip by strip, shared round the processes.
  const long long strips = (grid.height + strip_rows - 1) / strip_rows;
  auto rows_of = [&](long long k) { return std::min(strip_rows, grid.height - static_cast<int>(k / P) * strip_rows); };
  share_jobs(
      strips * static_cast<long long>(P), maps.size(),
      [&](long long k) { return static_cast<size_t>(rows_of(k)) * static_cast<size_t>(grid.width); },
      [&](long long k, std::vector<std::vector<float>>& values) {
        predict_strip(static_cast<int>(k / P) * strip_rows, rows_of(k), static_cast<size_t>(k) % P, values);
      },
      [&](long long k, const std::vector<std::vector<float>>& values) {
        const int row0 = static_cast<int>(k / P) * strip_rows;
        for (size_t j = 0; j < maps.size(); ++j) {
          const auto [out, band] = output_of(j, static_cast<size_t>(k) % P);
          out->writer->write_rows(row0, rows_of(k), values[j], band);
        }
        fault_point("strip");
        if (static_cast<size_t>(k) % P == P - 1) progress.update(row0 + rows_of(k));
      });
  predicted = static_cast<long long>(processes().sum(static_cast<double>(predicted)));
  wide = static_cast<long long>(processes().sum(static_cast<double>(wide)));
  scored = static_cast<long long>(processes().sum(static_cast<double>(scored)));
  if (leader && scored > 0 && 2 * wide > scored)
    spdlog::warn(
        "the latent sd exceeds {} at {:.0f} % of the pixels: the maps are that uncertain, and their means lie far from "
        "their medians (with the exp link e^(m + v/2) is more than {:.2f} times e^m); the median "
        "(predict.quantiles: [0.5], intensity_q0.5) is the better point map",
        kWideLatentSd, 100.0 * static_cast<double>(wide) / static_cast<double>(scored),
        std::exp(kWideLatentSd * kWideLatentSd / 2));
  if (leader) {
    progress.finish();
    for (auto& o : outs) {
      o.writer->finish();
      fault_point("map");
    }
    if (styles) write_map_styles(outs, args.out);
    spdlog::info("predicted {} pixels of {} x {}{}; wrote {} maps{} to {}", predicted, grid.width, grid.height,
                 time.empty() ? "" : " over " + std::to_string(time.size()) + " periods", outs.size(),
                 styles ? " with their QGIS styles" : "", args.out);
  }
  if (!spans.empty()) {
    SpanMapOptions so;
    so.quantiles = m.predictor->has_posterior() ? quantiles : std::vector<double>();
    so.samples = settings.predict.samples;
    so.seed = settings.train.seed;
    so.strip_rows = strip_rows;
    so.threads = threads;
    so.rate_per = task_rate_per(m, 0, rate_per);
    so.unit = intensity_unit(task_view(m, 0), so.rate_per);
    so.styles = styles;
    so.format = format;
    write_span_maps(m, sources, spans, so, args.out);
  }
  if (!data.units.path.empty()) {
    const std::vector<double> levels = quantiles.size() >= 2 ? quantiles : std::vector<double>{0.025, 0.975};
    const double lo = std::min(levels.front(), levels.back()), hi = std::max(levels.front(), levels.back());
    const int samples = settings.predict.samples;
    std::vector<UnitRow> rows;
    std::vector<std::string> sources = units.sources;
    if (m.predictor->needs_pixel_units()) {
      // The constant model's units are whole in every process (its strips need every pixel's unit).
      rows = unit_rows(m, units, lo, hi, samples, threads, one_process());
    } else {
      // A GP's units a batch at a time, each no larger than a strip (or its largest unit), so memory
      // stays flat however large the area; every process gathers its share of each batch.
      const Index batch_pixels = static_cast<Index>(strip_rows) * grid.width;
      int batches = 0;
      sources = model_dataset_in_batches(
                    m, args.out, batch_pixels,
                    [&](const io::BuiltData& batch) {
                      const std::vector<UnitRow> more = unit_rows(m, batch, lo, hi, samples, threads, processes());
                      rows.insert(rows.end(), more.begin(), more.end());
                      ++batches;
                    },
                    processes())
                    .sources;
      spdlog::debug("predicted {} units in {} batches of up to {} pixels", rows.size(), batches, batch_pixels);
    }
    if (leader) {
      write_unit_outputs(m, rows, sources, args.out, lo, hi, styles);
      spdlog::info("wrote {}/units.csv and units.gpkg", args.out);
    }
  }
}

int predict_main(int argc, char** argv) {
  CLI::App app(
      "Predicts pixel-level intensity with its uncertainty over the whole reference grid from a fitted model, "
      "writing one single-band GeoTIFF per quantity (intensity_mean, intensity_sd, intensity_q<level>, "
      "cases_mean, latent_mean, latent_sd, exceedance_<t>) and units.csv with observed and predicted totals. "
      "With --config it predicts for another area or year from rasters with the same covariate names. A "
      "space-time model predicts every period of data.time (a band per period), including periods beyond its "
      "training data when their covariates exist.",
      "vbagg-predict");
  PredictArgs args;
  bool quiet = false, verbose = false;
  app.add_option("--model", args.model_path, "Fitted model (model.yaml written by vbagg-train)")->required();
  app.add_option("--config", args.config_path, "Run configuration for a new area or year (default: the model's own)");
  app.add_option("--set", args.sets, "Override a setting: --set KEY=VALUE (repeatable)");
  app.add_option("--out", args.out, "Output folder for the maps and units.csv")->required();
  app.add_option("--quantiles", args.quantiles,
                 "Quantile levels of the intensity maps, comma-separated (default: predict.quantiles, 0.025,0.975)")
      ->delimiter(',')
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--exceedance", args.exceedance, "Threshold t for a map of P(intensity > t) (repeatable)");
  app.add_option("--of", args.format, "Output format: GTiff (tiled, DEFLATE) or COG (cloud-optimised, with overviews)")
      ->check(CLI::IsMember({"GTiff", "COG"}))
      ->capture_default_str();
  app.add_option("--co", args.creation, "GDAL creation option KEY=VALUE passed to the output driver (repeatable)");
  app.add_option("--style", args.style,
                 "qgis: a <map>.qml beside each map and graduated styles in units.gpkg, so QGIS shows them styled "
                 "on open; none: no styles (default: predict.style, qgis)")
      ->check(CLI::IsMember({"qgis", "none"}));
  app.add_option("--threads", args.threads, "Threads (default: train.threads, 0 = every core)")
      ->check(CLI::PositiveNumber);
  app.add_option("--span", args.spans,
                 "A space-time model's span of periods to average (2019-01..2019-12, repeatable): maps of the mean "
                 "intensity over the span, intensity_mean_<from>_<to>.tif, with its sd and quantiles from joint "
                 "draws over the periods (beside predict.spans)");
  app.add_flag("--split-periods", args.split_periods,
               "A space-time model's maps as one file per quantity and period, <quantity>_<period>.tif (default: one "
               "file per quantity with a band per period of data.time, each band named by its period)");
  add_common_flags(app, quiet, verbose);
  return run_app(app, argc, argv, [&] {
    setup_logging("vbagg-predict", quiet, verbose);
    args.progress = !quiet;
    run_predict(args);
  });
}

}  // namespace vbagg::cli
