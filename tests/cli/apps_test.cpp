// The apps as library calls, in process: simulate, train, predict and eval through their argument
// structs, and the predictor interface that lets predict and eval serve every model kind.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <random>
#include <set>
#include <sstream>

#include "../io/fixtures.hpp"
#include "cli/eval.hpp"
#include "cli/predict.hpp"
#include "cli/predictor.hpp"
#include "cli/simulate.hpp"
#include "cli/train.hpp"
#include "core/metrics.hpp"
#include "io/gdal_handles.hpp"
#include "io/model_file.hpp"
#include "io/raster_writer.hpp"

namespace vbagg::cli {
namespace {

// A small country, simulated in process once for the suite, with a short run configuration.
class Apps : public ::testing::Test {
 protected:
  static inline test::TempDir* dir = nullptr;
  static void SetUpTestSuite() {
    spdlog::set_level(spdlog::level::warn);
    dir = new test::TempDir();
    CountryOptions o;
    o.width = 48;
    o.height = 36;
    o.units = 16;
    o.seed = 11;
    simulate_country(*dir / "data", o);
    std::ofstream(*dir / "run.yaml") << "data:\n  covariates:\n"
                                     << "    - path: data/temperature.tif\n    - path: data/rainfall.tif\n"
                                     << "  population: {path: data/population.tif}\n"
                                     << "  units: {path: data/units.gpkg, id_field: ID, response_field: cases}\n"
                                     << "train:\n  epochs: 8\n  holdout: {fraction: 0.25, seed: 3}\n";
  }
  static void TearDownTestSuite() {
    delete dir;
    dir = nullptr;
  }
  static std::string path(const std::string& name) { return *dir / name; }

  // Trains model.kind `kind` once per suite into fit_<kind>.
  static std::string trained(const std::string& kind) {
    const std::string out = path("fit_" + kind);
    if (!std::filesystem::exists(out + "/model.yaml")) {
      TrainArgs args;
      args.config_path = path("run.yaml");
      args.sets = {"model.kind=" + kind};
      args.out = out;
      args.threads = 2;
      EXPECT_EQ(run_train(args), out);
    }
    return out + "/model.yaml";
  }
};

TEST_F(Apps, SimulateWritesTheCountryAndItsConfiguration) {
  for (const char* f : {"temperature.tif", "population.tif", "truth_intensity.tif", "units.gpkg", "data.yaml"})
    EXPECT_TRUE(std::filesystem::exists(path(std::string("data/") + f))) << f;
  // One row of truth per unit, with the header.
  std::ifstream truth(path("data/truth_units.csv"));
  std::string line;
  ASSERT_TRUE(std::getline(truth, line));
  EXPECT_EQ(line, "ID,expected,unit_effect");
  int rows = 0;
  while (std::getline(truth, line)) ++rows;
  EXPECT_EQ(rows, 16);
}

// The constant model is the evaluations' baseline: fitted to the same training units, its
// metrics and the baseline column are the same numbers.
TEST_F(Apps, TheConstantModelIsTheBaseline) {
  EvalArgs args;
  args.model_path = trained("constant");
  args.truth = path("data/truth_intensity.tif");
  for (const char* split : {"train", "holdout"}) {
    SCOPED_TRACE(split);
    args.split = split;
    const Metrics r = run_eval(args).metrics;
    EXPECT_NEAR(r.bag_log_mse, r.baseline_bag_log_mse, 1e-12 * (1 + r.bag_log_mse));
    EXPECT_NEAR(r.bag_nll_mean, r.baseline_bag_nll_mean, 1e-12 * (1 + std::abs(r.bag_nll_mean)));
    EXPECT_NEAR(r.pixel_mse, r.baseline_pixel_mse, 1e-12 * r.pixel_mse);
    EXPECT_TRUE(r.pixel_coverage.empty());  // a point estimate has no intervals to calibrate
  }
}

// Each pixel of the constant model's map holds the rate of its unit (a training unit's own rate,
// or the overall rate), and every training unit's rate appears.
TEST_F(Apps, TheConstantMapHoldsEachPixelsUnitRate) {
  const std::string model = trained("constant");
  PredictArgs args;
  args.model_path = model;
  args.out = path("maps_constant");
  run_predict(args);
  const io::ModelFile file = io::read_model_file(model);
  std::vector<double> rates = {file.constant.overall};
  for (const auto& [id, rate] : file.constant.unit) rates.push_back(rate);
  io::DatasetPtr ds = io::open_raster(args.out + "/intensity_mean.tif");
  const int w = ds->GetRasterXSize(), h = ds->GetRasterYSize();
  std::vector<float> v(static_cast<size_t>(w) * static_cast<size_t>(h));
  ASSERT_EQ(ds->GetRasterBand(1)->RasterIO(GF_Read, 0, 0, w, h, v.data(), w, h, GDT_Float32, 0, 0), CE_None);
  const double nodata = ds->GetRasterBand(1)->GetNoDataValue();
  std::set<size_t> seen;
  for (float x : v) {
    if (x == nodata) continue;
    const auto it = std::min_element(rates.begin(), rates.end(),
                                     [&](double a, double b) { return std::abs(a - x) < std::abs(b - x); });
    ASSERT_NEAR(*it, x, 1e-6 * *it);
    seen.insert(static_cast<size_t>(it - rates.begin()));
  }
  EXPECT_GE(seen.size(), file.constant.unit.size());
  EXPECT_FALSE(std::filesystem::exists(args.out + "/intensity_sd.tif"));
  EXPECT_FALSE(std::filesystem::exists(args.out + "/latent_mean.tif"));
}

// The GP model through the same calls: maps with uncertainty, and held-out counts scored.
TEST_F(Apps, TrainPredictEvalTheVariationalModel) {
  const std::string model = trained("vbagg");
  PredictArgs p;
  p.model_path = model;
  p.out = path("maps_vbagg");
  p.quantiles = {0.1, 0.9};
  run_predict(p);
  for (const char* f : {"intensity_mean.tif", "intensity_sd.tif", "intensity_q0.1.tif", "intensity_q0.9.tif",
                        "latent_mean.tif", "latent_sd.tif", "cases_mean.tif", "units.csv"})
    EXPECT_TRUE(std::filesystem::exists(p.out + "/" + f)) << f;
  EvalArgs e;
  e.model_path = model;
  e.json = path("metrics.json");
  const EvalResult r = run_eval(e);
  EXPECT_EQ(r.metrics.kind, "vbagg");
  EXPECT_EQ(r.metrics.units, 4);  // a quarter of 16
  EXPECT_TRUE(std::isfinite(r.metrics.elbo_train));
  EXPECT_EQ(r.metrics.count_coverage.size(), r.metrics.levels.size());
  std::ifstream json(e.json);
  EXPECT_TRUE(json.good());
}

// The text of attribute `name` in the first element that has it.
std::string attribute(const std::string& xml, const std::string& name) {
  const auto at = xml.find(" " + name + "=\"");
  if (at == std::string::npos) return "";
  const auto begin = at + name.size() + 3;
  return xml.substr(begin, xml.find('"', begin) - begin);
}

using test::band_values;
using test::read_text;

// Styles beside the maps: the mean and its quantiles share limits, probabilities run 0-1, the
// legend carries the unit; rates per 1,000 scale the intensity maps and their thresholds alike.
TEST_F(Apps, MapStylesAndRatesPerThousand) {
  PredictArgs p;
  p.model_path = trained("vbagg");
  p.out = path("styled");
  p.quantiles = {0.1, 0.9};
  p.exceedance = {0.05};
  run_predict(p);
  const std::string mean = read_text(p.out + "/intensity_mean.qml"), q = read_text(p.out + "/intensity_q0.9.qml");
  EXPECT_NE(mean.find("singlebandpseudocolor"), std::string::npos);
  EXPECT_FALSE(attribute(mean, "classificationMax").empty());
  EXPECT_EQ(attribute(mean, "classificationMin"), attribute(q, "classificationMin"));
  EXPECT_EQ(attribute(mean, "classificationMax"), attribute(q, "classificationMax"));
  EXPECT_EQ(attribute(mean, "suffix"), " cases per person");
  const std::string prob = read_text(p.out + "/exceedance_0.05.qml");
  EXPECT_EQ(attribute(prob, "classificationMin"), "0");
  EXPECT_EQ(attribute(prob, "classificationMax"), "1");
  EXPECT_NE(attribute(read_text(p.out + "/intensity_sd.qml"), "classificationMax"),
            attribute(mean, "classificationMax"));

  PredictArgs k = p;
  k.out = path("per_thousand");
  k.sets = {"predict.rate_per=1000"};
  k.exceedance = {50};
  k.style = "none";
  run_predict(k);
  EXPECT_FALSE(std::filesystem::exists(k.out + "/intensity_mean.qml"));
  io::DatasetPtr ds = io::open_raster(k.out + "/intensity_mean.tif");
  EXPECT_STREQ(ds->GetRasterBand(1)->GetUnitType(), "cases per 1000 people");
  EXPECT_STREQ(ds->GetMetadataItem("VBAGG_RATE_PER"), "1000");
  const auto a = band_values(p.out + "/intensity_q0.9.tif"), b = band_values(k.out + "/intensity_q0.9.tif");
  const auto pa = band_values(p.out + "/exceedance_0.05.tif"), pb = band_values(k.out + "/exceedance_50.tif");
  const auto ca = band_values(p.out + "/cases_mean.tif"), cb = band_values(k.out + "/cases_mean.tif");
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == io::kOutputNodata) continue;
    ASSERT_NEAR(b[i], 1000 * a[i], 1e-4 * b[i]);
    ASSERT_NEAR(pb[i], pa[i], 1e-6);
    ASSERT_EQ(cb[i], ca[i]);  // cases are counts, whatever the rate's unit
  }
}

// units.gpkg: every input feature with its geometry and CRS, the same numbers as units.csv, and
// a graduated default style in its layer_styles table.
TEST_F(Apps, UnitsGeoPackageCarriesThePredictions) {
  PredictArgs p;
  p.model_path = trained("vbagg");
  p.out = path("units_out");
  run_predict(p);
  io::DatasetPtr in = io::open_vector(path("data/units.gpkg"));
  io::DatasetPtr out = io::open_vector(p.out + "/units.gpkg");
  OGRLayer* src = in->GetLayer(0);
  OGRLayer* layer = out->GetLayerByName("units");
  ASSERT_NE(layer, nullptr);
  EXPECT_EQ(layer->GetFeatureCount(), src->GetFeatureCount());
  EXPECT_TRUE(layer->GetSpatialRef()->IsSame(src->GetSpatialRef()));
  for (const char* f :
       {"id", "split", "observed", "predicted", "lower_0.025", "upper_0.975", "population", "pixels", "log_residual"})
    EXPECT_GE(layer->GetLayerDefn()->GetFieldIndex(f), 0) << f;
  const std::string csv = read_text(p.out + "/units.csv");
  int holdout = 0;
  for (auto& f : *layer) {
    const std::string id = f->GetFieldAsString("id");
    holdout += std::string(f->GetFieldAsString("split")) == "holdout";
    const double observed = f->GetFieldAsDouble("observed"), predicted = f->GetFieldAsDouble("predicted");
    EXPECT_LE(f->GetFieldAsDouble("lower_0.025"), f->GetFieldAsDouble("upper_0.975"));
    EXPECT_NEAR(f->GetFieldAsDouble("log_residual"), std::log(observed) - std::log(predicted), 1e-9);
    EXPECT_NE(csv.find("\n" + id + ","), std::string::npos) << id;
    src->SetAttributeFilter(("ID = '" + id + "'").c_str());
    std::unique_ptr<OGRFeature> original(src->GetNextFeature());
    ASSERT_NE(original, nullptr) << id;
    EXPECT_TRUE(original->GetGeometryRef()->Equals(f->GetGeometryRef())) << id;
  }
  EXPECT_EQ(holdout, 4);
  OGRLayer* styles = out->ExecuteSQL("SELECT styleName, useAsDefault, styleQML FROM layer_styles", nullptr, nullptr);
  ASSERT_NE(styles, nullptr);
  std::set<std::string> names;
  for (auto& f : *styles) {
    names.insert(f->GetFieldAsString(0));
    if (f->GetFieldAsInteger(1) != 0) {
      EXPECT_NE(std::string(f->GetFieldAsString(2)).find("graduatedSymbol"), std::string::npos);
    }
  }
  out->ReleaseResultSet(styles);
  EXPECT_EQ(names, (std::set<std::string>{"predicted", "observed", "log_residual"}));
}

// Units that reported nothing: a bad unit by default, and with data.on_missing_response: predict
// kept out of the fit, the holdout and every score, yet predicted in units.csv and units.gpkg.
TEST_F(Apps, UnitsWithoutResponseArePredicted) {
  const std::string units = path("silent_units.gpkg");
  std::filesystem::copy_file(path("data/units.gpkg"), units, std::filesystem::copy_options::overwrite_existing);
  std::set<std::string> silent;
  {
    GDALDatasetUniquePtr ds(GDALDataset::Open(units.c_str(), GDAL_OF_VECTOR | GDAL_OF_UPDATE));
    ASSERT_NE(ds, nullptr);
    OGRLayer* layer = ds->GetLayer(0);
    for (auto& f : *layer) {
      if (silent.size() == 3) break;
      silent.insert(f->GetFieldAsString("ID"));
      f->SetFieldNull(f->GetFieldIndex("cases"));
      ASSERT_EQ(layer->SetFeature(f.get()), OGRERR_NONE);
    }
  }
  std::ofstream(path("silent.yaml")) << "data:\n  covariates:\n"
                                     << "    - path: data/temperature.tif\n    - path: data/rainfall.tif\n"
                                     << "  population: {path: data/population.tif}\n"
                                     << "  units: {path: silent_units.gpkg, id_field: ID, response_field: cases}\n"
                                     << "train:\n  epochs: 8\n  holdout: {fraction: 0.25, seed: 3}\n";
  TrainArgs t;
  t.config_path = path("silent.yaml");
  t.out = path("fit_silent");
  t.threads = 2;
  try {
    run_train(t);
    FAIL() << "units without a response were fitted under the default policy";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("missing response"), std::string::npos) << e.what();
  }
  t.sets = {"data.on_missing_response=predict"};
  run_train(t);
  const io::ModelFile file = io::read_model_file(t.out + "/model.yaml");
  EXPECT_EQ(file.train_units.size() + file.holdout_units.size(), 13u);
  EXPECT_EQ(file.holdout_units.size(), 3u);  // a quarter of the 13 that reported
  for (const auto& list : {file.train_units, file.holdout_units})
    for (const auto& id : list) EXPECT_EQ(silent.count(id), 0u) << id;

  PredictArgs p;
  p.model_path = t.out + "/model.yaml";
  p.out = path("maps_silent");
  run_predict(p);
  std::istringstream csv(read_text(p.out + "/units.csv"));
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line.rfind("unit,split,observed,predicted,", 0), 0u) << line;
  int unobserved = 0;
  while (std::getline(csv, line)) {
    std::vector<std::string> cells;
    std::stringstream row(line);
    for (std::string c; std::getline(row, c, ',');) cells.push_back(c);
    ASSERT_GE(cells.size(), 6u) << line;
    const bool quiet = silent.count(cells[0]) > 0;
    EXPECT_EQ(cells[1] == "unobserved", quiet) << line;
    EXPECT_EQ(cells[2].empty(), quiet) << line;
    const double predicted = std::stod(cells[3]), lower = std::stod(cells[4]), upper = std::stod(cells[5]);
    EXPECT_GT(predicted, 0) << line;
    EXPECT_LT(lower, upper) << line;
    unobserved += quiet;
  }
  EXPECT_EQ(unobserved, 3);
  io::DatasetPtr gpkg = io::open_vector(p.out + "/units.gpkg");
  for (auto& f : *gpkg->GetLayerByName("units")) {
    const bool quiet = silent.count(f->GetFieldAsString("id")) > 0;
    EXPECT_EQ(std::string(f->GetFieldAsString("split")) == "unobserved", quiet);
    EXPECT_EQ(f->IsFieldNull(f->GetFieldIndex("observed")), quiet);
    EXPECT_GT(f->GetFieldAsDouble("predicted"), 0);
  }

  EvalArgs e;
  e.model_path = t.out + "/model.yaml";
  e.split = "all";
  EXPECT_EQ(run_eval(e).metrics.units, 13);
  e.folds = 3;
  const Metrics pooled = run_eval(e).metrics;
  EXPECT_EQ(pooled.units, 13);
  EXPECT_TRUE(std::isfinite(pooled.bag_nll_mean));
}

// The simulated country's prevalence survey through the same commands: the binomial model from
// prevalence.yaml, prevalence maps in (0, 1) that track the truth, and positives per unit.
TEST_F(Apps, PrevalenceSurveyThroughTheSameCommands) {
  TrainArgs t;
  t.config_path = path("data/prevalence.yaml");
  t.out = path("fit_prevalence");
  t.sets = {"train.epochs=150", "train.holdout.fraction=0.25"};
  t.threads = 2;
  run_train(t);
  const io::ModelFile file = io::read_model_file(t.out + "/model.yaml");
  EXPECT_EQ(file.model.spec.likelihood, LikelihoodKind::binomial);
  EXPECT_EQ(file.model.spec.link, Link::logit);
  EXPECT_EQ(file.model.spec.expectation, Expectation::delta);
  EXPECT_TRUE(file.model.spec.unit_effect) << "auto: a survey unit's own effect on the logit";
  PredictArgs p;
  p.model_path = t.out + "/model.yaml";
  p.out = path("maps_prevalence");
  p.exceedance = {0.3};
  run_predict(p);
  io::DatasetPtr ds = io::open_raster(p.out + "/intensity_mean.tif");
  EXPECT_STREQ(ds->GetRasterBand(1)->GetUnitType(), "prevalence (proportion positive)");
  for (float v : band_values(p.out + "/intensity_q0.975.tif"))
    if (v != io::kOutputNodata) {
      ASSERT_TRUE(v > 0 && v < 1) << v;
    }
  EXPECT_STREQ(io::open_raster(p.out + "/cases_mean.tif")->GetRasterBand(1)->GetUnitType(), "people infected");
  EvalArgs e;
  e.model_path = t.out + "/model.yaml";
  e.split = "all";
  e.truth = path("data/truth_prevalence.tif");
  const Metrics r = run_eval(e).metrics;
  // Twelve training units pin the map down loosely: 0.72 at the ELBO's optimum (a sampled fit
  // run long enough ends there too), against 0.85 when all sixteen train.
  EXPECT_GT(r.pixel_correlation, 0.6);
  EXPECT_LT(r.pixel_mse, r.baseline_pixel_mse);
  EXPECT_LT(r.bag_log_mse, 0.1);  // positives per unit, against n_a x the unit's prevalence
  // The constant baseline scores surveys by the binomial at its prevalence.
  EXPECT_TRUE(std::isfinite(r.baseline_bag_nll_mean));
  EXPECT_LT(r.bag_nll_mean, r.baseline_bag_nll_mean);
  const std::string csv = read_text(p.out + "/units.csv");
  EXPECT_NE(csv.find(",holdout,"), std::string::npos);
}

// A survey at points (clusters), each the bag of the pixel it falls in: 60 clusters of 200 tested
// on the simulated country's true prevalence; the fitted map follows the truth.
TEST_F(Apps, SurveyClustersAtPoints) {
  const std::vector<float> truth = band_values(path("data/truth_prevalence.tif"));
  io::DatasetPtr grid = io::open_raster(path("data/truth_prevalence.tif"));
  double gt[6];
  grid->GetGeoTransform(gt);
  const int w = grid->GetRasterXSize(), h = grid->GetRasterYSize();
  std::mt19937_64 rng(4);
  std::vector<test::Feature> clusters;
  while (clusters.size() < 60) {
    const int col = static_cast<int>(rng() % static_cast<unsigned>(w)),
              row = static_cast<int>(rng() % static_cast<unsigned>(h));
    const float p = truth[static_cast<size_t>(row) * static_cast<size_t>(w) + static_cast<size_t>(col)];
    if (!(p > 0 && p < 1)) continue;  // the lake
    const double x = gt[0] + (col + 0.5) * gt[1], y = gt[3] + (row + 0.5) * gt[5];
    const double positives = static_cast<double>(std::binomial_distribution<int>(200, p)(rng));
    clusters.push_back({"c" + std::to_string(clusters.size()), positives,
                        "POINT(" + std::to_string(x) + " " + std::to_string(y) + ")", 200.0});
  }
  test::write_units(path("data/drawn_clusters.gpkg"), "GPKG", 4326, clusters);
  TrainArgs t;
  t.config_path = path("data/prevalence.yaml");
  t.out = path("fit_clusters");
  t.sets = {"data.units.path=drawn_clusters.gpkg", "data.units.response_field=cases", "data.units.point_buffer=0",
            "train.holdout.fraction=0"};
  t.threads = 2;
  run_train(t);
  EvalArgs e;
  e.model_path = t.out + "/model.yaml";
  e.split = "all";
  e.truth = path("data/truth_prevalence.tif");
  const Metrics r = run_eval(e).metrics;
  EXPECT_EQ(r.pixels, 60);  // one pixel per cluster
  EXPECT_GT(r.pixel_correlation, 0.9);
  PredictArgs p;
  p.model_path = t.out + "/model.yaml";
  p.out = path("maps_clusters");
  run_predict(p);
  // The map over the whole country, against the truth.
  const auto mean = band_values(p.out + "/intensity_mean.tif");
  std::vector<double> a, b;
  for (size_t i = 0; i < mean.size(); ++i)
    if (mean[i] != io::kOutputNodata && truth[i] > 0) {
      a.push_back(mean[i]);
      b.push_back(truth[i]);
    }
  EXPECT_GT(correlation(Eigen::Map<Vector>(a.data(), static_cast<Index>(a.size())),
                        Eigen::Map<Vector>(b.data(), static_cast<Index>(b.size()))),
            0.8);
}

// Binomial data need their trials, and only binomial data have them.
TEST_F(Apps, TrialsAndTheBinomialModelGoTogether) {
  TrainArgs t;
  t.config_path = path("data/prevalence.yaml");
  t.out = path("fit_bad");
  t.sets = {"model.likelihood=poisson"};
  EXPECT_THROW(run_train(t), ConfigError);
  t.config_path = path("data/data.yaml");
  t.sets = {"model.likelihood=binomial"};
  EXPECT_THROW(run_train(t), ConfigError);
}

TEST_F(Apps, BadArgumentsAreConfigErrors) {
  EXPECT_THROW(run_train(TrainArgs{}), ConfigError);
  const std::string model = trained("constant");
  PredictArgs p;
  p.model_path = model;
  p.out = path("maps_bad");
  p.quantiles = {1.5};
  EXPECT_THROW(run_predict(p), ConfigError);
  p.quantiles = {};
  p.format = "PNG";
  EXPECT_THROW(run_predict(p), ConfigError);
  EvalArgs e;
  e.model_path = model;
  e.split = "everything";
  EXPECT_THROW(run_eval(e), ConfigError);
  EXPECT_FALSE(std::filesystem::exists(p.out));  // refused before anything is written
}

// What each kind's predictor offers, and the constant rates for units it was and was not fitted to.
TEST(Predictor, KindsAndConstantRates) {
  io::ModelFile f;
  for (ModelKind k : {ModelKind::vbagg, ModelKind::bag_pixel, ModelKind::nystrom, ModelKind::constant}) {
    f.kind = k;
    const auto p = make_predictor(f, true);
    EXPECT_EQ(p->has_posterior(), k == ModelKind::vbagg || k == ModelKind::bag_pixel) << to_string(k);
    EXPECT_EQ(p->has_latent(), k != ModelKind::constant) << to_string(k);
    EXPECT_EQ(p->needs_pixel_units(), k == ModelKind::constant) << to_string(k);
  }
  // Two units of two pixels each; only "a" was a training unit.
  Dataset d;
  d.inputs = Matrix::Zero(1, 4);
  d.population = Vector::Constant(4, 10.0);
  d.coverage = Vector::Ones(4);
  d.response = Vector::Zero(2);
  d.bag_ids = {"a", "b"};
  d.offsets = {0, 2, 4};
  f.kind = ModelKind::constant;
  f.constant.unit = {{"a", 0.5}};
  f.constant.overall = 0.2;
  const auto same = make_predictor(f, true), other = make_predictor(f, false);
  const Vector t = same->unit_totals(d, {0, 1}, 1);
  EXPECT_DOUBLE_EQ(t[0], 0.5 * 20);
  EXPECT_DOUBLE_EQ(t[1], 0.2 * 20);
  EXPECT_DOUBLE_EQ(other->unit_totals(d, {0}, 1)[0], 0.2 * 20);  // another area's "a" is a new unit
  const std::string a = "a";
  const Prediction px = same->predict_pixels(Matrix(0, 2), {&a, nullptr}, PredictOptions{});
  EXPECT_DOUBLE_EQ(px.mean[0], 0.5);
  EXPECT_DOUBLE_EQ(px.mean[1], 0.2);
  // Poisson draws around each listed bag's total, in the list's order: means within 4 standard
  // errors, sorted.
  std::vector<Vector> draws(2);
  same->unit_draws(d, {1, 0}, 4000, 1, [&](size_t place, const Vector& v) { draws[place] = v; });
  for (const Vector& v : draws) EXPECT_TRUE(std::is_sorted(v.data(), v.data() + v.size()));
  EXPECT_NEAR(draws[0].mean(), 4.0, 4 * std::sqrt(4.0 / 4000));
  EXPECT_NEAR(draws[1].mean(), 10.0, 4 * std::sqrt(10.0 / 4000));
}

}  // namespace
}  // namespace vbagg::cli
