// simulate -> train -> predict -> eval with the real executables, checking the outputs with GDAL.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "../io/fixtures.hpp"
#include "run.hpp"

namespace vbagg {
namespace {

namespace fs = std::filesystem;
using test::band_values;
using test::bin;
using test::json_number;
using test::json_object;
using test::read_text;
using test::run;

// One small country, trained once for the whole suite.
class EndToEnd : public ::testing::Test {
 protected:
  static inline test::TempDir* dir = nullptr;
  static void SetUpTestSuite() {
    dir = new test::TempDir();
    const std::string d = dir->path.string();
    auto r = run(bin("vbagg-simulate") + " --kind country --out " + d + "/data --size 80x60 --units 30 --seed 3 -q");
    ASSERT_EQ(r.code, 0) << r.output;
    std::ofstream(d + "/run.yaml")
        << "data:\n  covariates:\n"
        << "    - path: data/temperature.tif\n    - path: data/rainfall.tif\n"
        << "    - {path: data/night_lights.tif, name: lights}\n    - path: data/travel_time.tif\n"
        << "  population: {path: data/population.tif}\n"
        << "  units: {path: data/units.gpkg, id_field: ID, response_field: cases}\n"
        << "model:\n  inducing: {count: 40}\n"
        // No polish: a quick fit, as every process that runs cases of the suite makes it once
        // (CTest runs the suite in one, tests/CMakeLists.txt); under the sanitizer the polish's
        // passes took minutes.
        << "train:\n  optimizer: lbfgs\n  epochs: 60\n  polish: 0\n  holdout: {fraction: 0.25, seed: 2}\n";
    r = run(bin("vbagg-train") + " --config " + d + "/run.yaml --out " + d + "/fit -q --threads 2");
    ASSERT_EQ(r.code, 0) << r.output;
  }
  static void TearDownTestSuite() {
    delete dir;
    dir = nullptr;
  }
  std::string d() const { return dir->path.string(); }
};

TEST_F(EndToEnd, TrainWritesModelConfigAndHistory) {
  for (const char* f : {"model.yaml", "run.resolved.yaml", "history.csv"})
    EXPECT_TRUE(fs::exists(d() + "/fit/" + f)) << f;
  const std::string model = read_text(d() + "/fit/model.yaml");
  EXPECT_NE(model.find("format: vbagg-model"), std::string::npos);
  EXPECT_NE(model.find("written_by: vbagg " VBAGG_VERSION), std::string::npos);
  EXPECT_NE(model.find("covariates: [temperature, rainfall, lights, travel_time]"), std::string::npos);
  const std::string resolved = read_text(d() + "/fit/run.resolved.yaml");
  EXPECT_NE(resolved.find("likelihood: negative_binomial"), std::string::npos);  // defaults filled in
  EXPECT_NE(resolved.find("path: ../data/population.tif"), std::string::npos);   // relative to the run folder
  std::istringstream history(read_text(d() + "/fit/history.csv"));
  std::string line;
  int rows = 0;
  while (std::getline(history, line)) ++rows;
  EXPECT_GT(rows, 10);
}

// L-BFGS scores the holdout every 10 evaluations; the epochs between log the latest score with its
// epoch, never a nan (history.csv keeps the nan: nothing was scored there).
TEST_F(EndToEnd, TrainLogsTheLatestHoldoutScore) {
  const auto r = run(bin("vbagg-train") + " --config " + d() + "/run.yaml --out " + d() +
                     "/logged --set train.epochs=12 --set train.tolerance=0 --threads 2");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.find("NLL nan"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("epoch 11: objective"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(epoch 10)"), std::string::npos) << r.output;
  EXPECT_NE(read_text(d() + "/logged/history.csv").find(",nan,"), std::string::npos);
}

TEST_F(EndToEnd, PredictWritesDescribedMapsOnTheReferenceGrid) {
  const auto r = run(bin("vbagg-predict") + " --model " + d() + "/fit/model.yaml --out " + d() +
                     "/maps --quantiles 0.1,0.9 --exceedance 0.05 --exceedance 0.2");
  ASSERT_EQ(r.code, 0) << r.output;
  // Not a terminal: GDAL's progress, once.
  EXPECT_NE(r.output.find("0...10...20...30...40...50...60...70...80...90...100 - done.\n"), std::string::npos)
      << r.output;
  io::DatasetPtr ref = io::open_raster(d() + "/data/population.tif");
  double ref_gt[6], gt[6];
  ref->GetGeoTransform(ref_gt);
  std::vector<float> pop(80 * 60);
  ASSERT_EQ(ref->GetRasterBand(1)->RasterIO(GF_Read, 0, 0, 80, 60, pop.data(), 80, 60, GDT_Float32, 0, 0), CE_None);
  for (const char* name : {"intensity_mean", "intensity_sd", "intensity_q0.1", "intensity_q0.9", "cases_mean",
                           "latent_mean", "latent_sd", "exceedance_0.05", "exceedance_0.2"}) {
    SCOPED_TRACE(name);
    const std::string path = d() + "/maps/" + name + ".tif";
    ASSERT_TRUE(fs::exists(path));
    io::DatasetPtr ds = io::open_raster(path);
    ASSERT_EQ(ds->GetRasterCount(), 1);
    ASSERT_NE(ds->GetMetadataItem("VBAGG_VERSION"), nullptr);
    EXPECT_EQ(std::string(ds->GetMetadataItem("VBAGG_VERSION")), "vbagg " VBAGG_VERSION);
    EXPECT_EQ(ds->GetRasterXSize(), 80);
    EXPECT_EQ(ds->GetRasterYSize(), 60);
    ds->GetGeoTransform(gt);
    for (int k = 0; k < 6; ++k) EXPECT_DOUBLE_EQ(gt[k], ref_gt[k]);
    EXPECT_TRUE(ds->GetSpatialRef()->IsSame(ref->GetSpatialRef()));
    GDALRasterBand* b = ds->GetRasterBand(1);
    EXPECT_FALSE(std::string(b->GetDescription()).empty());
    int has_nodata = 0;
    EXPECT_EQ(b->GetNoDataValue(&has_nodata), -9999);
    EXPECT_TRUE(has_nodata);
    EXPECT_NE(b->GetMetadataItem("STATISTICS_MEAN"), nullptr);
    EXPECT_STREQ(ds->GetMetadataItem("COMPRESSION", "IMAGE_STRUCTURE"), "DEFLATE");
    int bx, by;
    b->GetBlockSize(&bx, &by);
    EXPECT_EQ(bx, 256);
    std::vector<float> v(80 * 60);
    ASSERT_EQ(b->RasterIO(GF_Read, 0, 0, 80, 60, v.data(), 80, 60, GDT_Float32, 0, 0), CE_None);
    int finite = 0, lake = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      const bool missing = v[i] == -9999.0f;
      if (!missing) {
        ++finite;
        EXPECT_TRUE(std::isfinite(v[i]));
      }
      // The lake has no covariates (population 0, nodata in covariates): no prediction there.
      if (pop[i] == 0) {
        ++lake;
        EXPECT_TRUE(missing) << "pixel " << i;
      }
    }
    EXPECT_GT(lake, 0);
    EXPECT_EQ(finite + lake, 80 * 60);
  }
  // Quantiles bracket the mean; exceedance is a probability.
  io::DatasetPtr lo = io::open_raster(d() + "/maps/intensity_q0.1.tif"),
                 hi = io::open_raster(d() + "/maps/intensity_q0.9.tif");
  double lo_max = lo->GetRasterBand(1)->GetMinimum(), hi_min = hi->GetRasterBand(1)->GetMinimum();
  EXPECT_LT(lo_max, hi_min + 1);
  io::DatasetPtr ex = io::open_raster(d() + "/maps/exceedance_0.2.tif");
  double mn, mx, mean, sd;
  ex->GetRasterBand(1)->GetStatistics(FALSE, TRUE, &mn, &mx, &mean, &sd);
  EXPECT_GE(mn, 0);
  EXPECT_LE(mx, 1);
  // units.csv: one row per unit, with train and holdout ids.
  const std::string units = read_text(d() + "/maps/units.csv");
  EXPECT_EQ(units.rfind("unit,split,observed,predicted,lower_0.1,upper_0.9,population,pixels\n", 0), 0u);
  EXPECT_EQ(std::count(units.begin(), units.end(), '\n'), 31);
  EXPECT_NE(units.find(",holdout,"), std::string::npos);
  EXPECT_NE(units.find(",train,"), std::string::npos);
}

TEST_F(EndToEnd, EvalBeatsConstantBaselineOnHoldout) {
  const auto r = run(bin("vbagg-eval") + " --model " + d() + "/fit/model.yaml --split holdout --truth " + d() +
                     "/data/truth_intensity.tif --json " + d() + "/metrics.json --report " + d() + "/report.html");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("pixel correlation"), std::string::npos) << r.output;
  const std::string json = read_text(d() + "/metrics.json");
  const double nll = json_number(json, "bag_nll_mean");
  const auto base_at = json.find("\"baseline_constant\"");
  ASSERT_NE(base_at, std::string::npos);
  const double base = json_number(json.substr(base_at), "bag_nll_mean");
  EXPECT_LT(nll, base) << json;
  const auto pixel_at = json.find("\"pixel\"");
  ASSERT_NE(pixel_at, std::string::npos) << json;
  EXPECT_GT(json_number(json.substr(pixel_at), "correlation"), 0.5) << json;
  // Beside the truth's coverage, what a calibrated model's would be: its mean error lies in (0, 1)
  // below its 90th percentile, and the table says it.
  const double err_mean = json_number(json.substr(pixel_at), "calibrated_error_mean");
  EXPECT_GT(err_mean, 0) << json;
  EXPECT_LE(err_mean, json_number(json.substr(pixel_at), "calibrated_error_p90")) << json;
  EXPECT_NE(json.find("\"calibrated_coverage_low\": ["), std::string::npos) << json;
  EXPECT_NE(r.output.find("a calibrated model's on these pixels"), std::string::npos) << r.output;
  // And beside the held-out counts' coverage, a calibrated model's from joint pseudo-observations.
  EXPECT_GT(json_number(json_object(json, "count_calibrated"), "calibrated_error_mean"), 0) << json;
  EXPECT_NE(r.output.find("a calibrated model's on these units"), std::string::npos) << r.output;
  const std::string html = read_text(d() + "/report.html");
  EXPECT_NE(html.find("<img alt=\"calibration\" src=\"data:image/png;base64,iVBOR"), std::string::npos);
  EXPECT_NE(html.find("<img alt=\"PIT histogram\" src=\"data:image/png;base64,iVBOR"), std::string::npos);
  EXPECT_NE(html.find("<img alt=\"intensity mean\""), std::string::npos);
  // The PIT histogram: ten bins whose fractions add up to one over the held-out units.
  const auto pit_at = json.find("\"count_pit_histogram\": [");
  ASSERT_NE(pit_at, std::string::npos) << json;
  std::istringstream pit(json.substr(pit_at + 24, json.find(']', pit_at) - pit_at - 24));
  double total = 0, v;
  int bins = 0;
  for (char comma; pit >> v; pit >> comma, ++bins) total += v;
  EXPECT_EQ(bins, 10) << json;
  EXPECT_NEAR(total, 1.0, 1e-9) << json;
}

// --cv 3: three refits, each evaluated on its own block of units; every unit is held out once,
// coverage is pooled over them, and the metrics come with their spread over folds.
TEST_F(EndToEnd, EvalCrossValidatesOnSpatialBlocks) {
  const auto r = run(bin("vbagg-eval") + " --model " + d() + "/fit/model.yaml --cv 3 --set train.epochs=25 --truth " +
                     d() + "/data/truth_intensity.tif --json " + d() + "/cv.json -q --threads 2");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("3-fold spatially blocked cross-validation (30 units"), std::string::npos) << r.output;
  const std::string json = read_text(d() + "/cv.json");
  EXPECT_EQ(json_number(json, "folds"), 3) << json;
  EXPECT_EQ(json_number(json, "units"), 30) << json;
  const auto fold_at = json.find("\"fold_units\": [");
  ASSERT_NE(fold_at, std::string::npos) << json;
  std::istringstream sizes(json.substr(fold_at + 15, json.find(']', fold_at) - fold_at - 15));
  int total = 0, folds = 0, n;
  for (char comma; sizes >> n; sizes >> comma, ++folds) {
    EXPECT_GT(n, 0);
    total += n;
  }
  EXPECT_EQ(folds, 3);
  EXPECT_EQ(total, 30);
  const auto nll_at = json.find("\"bag_nll_mean\": {");
  ASSERT_NE(nll_at, std::string::npos) << json;
  EXPECT_GE(json_number(json.substr(nll_at), "sd"), 0) << json;
  EXPECT_NE(json.find("\"pixel_coverage\": ["), std::string::npos) << json;
  // The folds' draws pooled as the truth is: a calibrated model's band beside the pooled coverage.
  EXPECT_GT(json_number(json_object(json, "pixel_calibrated"), "calibrated_error_mean"), 0) << json;
  EXPECT_NE(r.output.find("a calibrated model's on these pixels"), std::string::npos) << r.output;
  EXPECT_GT(json_number(json_object(json, "count_calibrated"), "calibrated_error_mean"), 0) << json;
  // --split and --cv are two answers to one question.
  EXPECT_EQ(run(bin("vbagg-eval") + " --model " + d() + "/fit/model.yaml --cv 3 --split train").code, 2);
  EXPECT_EQ(run(bin("vbagg-eval") + " --model " + d() + "/fit/model.yaml --cv 1").code, 2);
}

// Mean relative width (upper - lower) / predicted of the held-out units' intervals in units.csv.
double holdout_relative_width(const std::string& csv) {
  std::istringstream in(read_text(csv));
  std::string line;
  std::getline(in, line);  // header
  double sum = 0;
  int n = 0;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ls(line);
    for (std::string cell; std::getline(ls, cell, ',');) f.push_back(cell);
    if (f.size() < 6 || f[1] != "holdout") continue;
    sum += (std::stod(f[5]) - std::stod(f[4])) / std::stod(f[3]);
    ++n;
  }
  return n ? sum / n : NAN;
}

// model.unit_effect: the model file keeps the effect's spread and training units, units.csv
// widens the held-out units' intervals with it, and the maps say they leave it out. The counts
// carry unit noise (sd 0.5), which the effect is there for; the point estimates are taken as known
// in both fits, so the widening is the effect's own.
TEST_F(EndToEnd, UnitEffectReachesTheModelFileUnitsAndMetadata) {
  auto r = run(bin("vbagg-simulate") + " --kind country --out " + d() +
               "/noisy --size 80x60 --units 30 --seed 3 --unit-noise 0.5 -q");
  ASSERT_EQ(r.code, 0) << r.output;
  std::string config = read_text(d() + "/run.yaml");
  for (size_t at; (at = config.find("data/")) != std::string::npos;) config.replace(at, 5, "noisy/");
  std::ofstream(d() + "/noisy.yaml") << config;
  r = run(bin("vbagg-train") + " --config " + d() + "/noisy.yaml --out " + d() +
          "/unit --set model.unit_effect=true --set model.likelihood=poisson --set model.fixed_effects=point "
          "--set model.point_uncertainty=none -q --threads 2");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string model = read_text(d() + "/unit/model.yaml");
  EXPECT_NE(model.find("unit_effect:"), std::string::npos);
  r = run(bin("vbagg-train") + " --config " + d() + "/noisy.yaml --out " + d() +
          "/plain --set model.likelihood=poisson --set model.unit_effect=false --set model.fixed_effects=point "
          "--set model.point_uncertainty=none -q --threads 2");
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* fit : {"unit", "plain"}) {
    r = run(bin("vbagg-predict") + " --model " + d() + "/" + fit + "/model.yaml --out " + d() + "/" + fit + "/maps -q");
    ASSERT_EQ(r.code, 0) << r.output;
  }
  EXPECT_GT(holdout_relative_width(d() + "/unit/maps/units.csv"),
            1.2 * holdout_relative_width(d() + "/plain/maps/units.csv"));
  io::DatasetPtr ds = io::open_raster(d() + "/unit/maps/intensity_mean.tif");
  const char* includes = ds->GetMetadataItem("VBAGG_MAP_INCLUDES");
  ASSERT_NE(includes, nullptr);
  EXPECT_NE(std::string(includes).find("not the unit effect"), std::string::npos) << includes;
}

// Where the latent sd exceeds 1 at most pixels (a few dozen units with strong unit noise), predict
// warns that the mean map lies far above the median map, and it does: here by more than e^0.5 at
// the median pixel. The suite's country, without unit noise, gets no warning.
TEST_F(EndToEnd, PredictWarnsWhereTheMeanMapLiesFarAboveTheMedian) {
  auto r = run(bin("vbagg-simulate") + " --kind country --out " + d() +
               "/wide --size 80x60 --units 30 --seed 2 --unit-noise 0.7 -q");
  ASSERT_EQ(r.code, 0) << r.output;
  r = run(bin("vbagg-train") + " --config " + d() + "/wide/data.yaml --out " + d() + "/wide/fit -q --threads 2");
  ASSERT_EQ(r.code, 0) << r.output;
  r = run(bin("vbagg-predict") + " --model " + d() + "/wide/fit/model.yaml --out " + d() +
          "/wide/maps --quantiles 0.5 --style none -q");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("the latent sd exceeds 1 at"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("intensity_q0.5"), std::string::npos) << r.output;
  const std::vector<float> mean = band_values(d() + "/wide/maps/intensity_mean.tif"),
                           median = band_values(d() + "/wide/maps/intensity_q0.5.tif");
  std::vector<double> ratio;
  for (size_t i = 0; i < mean.size(); ++i)
    if (median[i] > 0) ratio.push_back(mean[i] / median[i]);
  ASSERT_GT(ratio.size(), mean.size() / 2);
  std::nth_element(ratio.begin(), ratio.begin() + static_cast<std::ptrdiff_t>(ratio.size() / 2), ratio.end());
  EXPECT_GT(ratio[ratio.size() / 2], std::exp(0.5));

  r = run(bin("vbagg-predict") + " --model " + d() + "/fit/model.yaml --out " + d() + "/narrow --style none -q");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.find("latent sd exceeds"), std::string::npos) << r.output;
}

// model.point_uncertainty: by default the fit ends with the point estimates' spread, which the log
// lists, the model file keeps and every interval carries; none leaves q's own intervals.
TEST_F(EndToEnd, PointSpreadReachesTheLogModelFileAndIntervals) {
  auto r = run(bin("vbagg-train") + " --config " + d() + "/run.yaml --out " + d() + "/spread --threads 2");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("point estimates' spread (Laplace sd"), std::string::npos) << r.output;
  EXPECT_NE(read_text(d() + "/spread/model.yaml").find("point_spread:"), std::string::npos);
  r = run(bin("vbagg-train") + " --config " + d() + "/run.yaml --out " + d() +
          "/known --set model.point_uncertainty=none -q --threads 2");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(read_text(d() + "/known/model.yaml").find("point_spread:"), std::string::npos);
  for (const char* fit : {"spread", "known"}) {
    r = run(bin("vbagg-predict") + " --model " + d() + "/" + fit + "/model.yaml --out " + d() + "/" + fit + "/maps -q");
    ASSERT_EQ(r.code, 0) << r.output;
  }
  EXPECT_GT(holdout_relative_width(d() + "/spread/maps/units.csv"),
            holdout_relative_width(d() + "/known/maps/units.csv"));
  const std::vector<float> wide = band_values(d() + "/spread/maps/intensity_sd.tif"),
                           narrow = band_values(d() + "/known/maps/intensity_sd.tif");
  ASSERT_EQ(wide.size(), narrow.size());
  size_t wider = 0, valid = 0;
  for (size_t i = 0; i < wide.size(); ++i)
    if (std::isfinite(wide[i]) && std::isfinite(narrow[i]) && narrow[i] > 0) {
      ++valid;
      wider += wide[i] > narrow[i];
    }
  EXPECT_GT(valid, 0u);
  EXPECT_EQ(wider, valid) << "every pixel's sd grows with the spread";
  io::DatasetPtr ds = io::open_raster(d() + "/spread/maps/intensity_mean.tif");
  const char* includes = ds->GetMetadataItem("VBAGG_MAP_INCLUDES");
  ASSERT_NE(includes, nullptr);
  EXPECT_NE(std::string(includes).find("uncertainty of its point estimates"), std::string::npos) << includes;
  r = run(bin("vbagg-train") + " --config " + d() + "/run.yaml --out " + d() +
          "/sampled --set model.expectation=sample --set model.point_uncertainty=laplace -q");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("model.point_uncertainty laplace needs"), std::string::npos) << r.output;
}

// model.fixed_effects variational: the coefficients come with their posterior sd in the log, the
// model file says where they live, and prediction reads them back.
TEST_F(EndToEnd, VariationalFixedEffectsReachTheLogModelFileAndMaps) {
  auto r = run(bin("vbagg-train") + " --config " + d() + "/run.yaml --out " + d() +
               "/fixed --set model.fixed_effects=variational --set model.mean_function=linear --threads 2");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("fixed effects (variational): intercept"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" ± "), std::string::npos) << r.output;
  EXPECT_NE(read_text(d() + "/fixed/model.yaml").find("fixed_effects: variational"), std::string::npos);
  r = run(bin("vbagg-predict") + " --model " + d() + "/fixed/model.yaml --out " + d() + "/fixed/maps -q");
  ASSERT_EQ(r.code, 0) << r.output;
  io::DatasetPtr ds = io::open_raster(d() + "/fixed/maps/intensity_mean.tif");
  const char* includes = ds->GetMetadataItem("VBAGG_MAP_INCLUDES");
  ASSERT_NE(includes, nullptr);
  EXPECT_NE(std::string(includes).find("uncertainty of its coefficients"), std::string::npos) << includes;
}

// model.kernel.covariates ard+additive: the ard part and an rbf on each of the four covariates reach
// the model file, and predict reads them back into maps.
TEST_F(EndToEnd, AdditiveCovariateKernelReachesTheModelFileAndMaps) {
  auto r = run(bin("vbagg-train") + " --config " + d() + "/run.yaml --out " + d() +
               "/additive -q --set model.kernel.covariates=ard+additive --threads 2");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string model = read_text(d() + "/additive/model.yaml");
  EXPECT_EQ(test::occurrences(model, "type: ard\n      first_input: 0\n      inputs: 4\n"), 1) << model.substr(0, 2000);
  for (int c = 0; c < 4; ++c)
    EXPECT_EQ(test::occurrences(model, "type: rbf\n      first_input: " + std::to_string(c) + "\n      inputs: 1\n"), 1)
        << "one rbf on covariate " << c;
  EXPECT_NE(model.find("covariates: ard+additive"), std::string::npos);
  r = run(bin("vbagg-predict") + " --model " + d() + "/additive/model.yaml --out " + d() + "/additive/maps -q");
  ASSERT_EQ(r.code, 0) << r.output;
  io::DatasetPtr ds = io::open_raster(d() + "/additive/maps/latent_sd.tif");
  double mn, mx, mean, sd;
  ASSERT_EQ(ds->GetRasterBand(1)->GetStatistics(FALSE, TRUE, &mn, &mx, &mean, &sd), CE_None);
  EXPECT_GT(mn, 0);
  EXPECT_TRUE(std::isfinite(mx));
}

// train.schedule anneal: an Adam fit runs constant steps for half its 40 epochs (no plateau at
// tolerance 0), anneals over the other half, and says so in its log, history and model file.
TEST_F(EndToEnd, AnnealedStepsEndTheFit) {
  auto r = run(bin("vbagg-train") + " --config " + d() + "/run.yaml --out " + d() +
               "/anneal --set train.optimizer=adam --set train.schedule=anneal --set train.epochs=40 "
               "--set train.tolerance=0 --set model.likelihood=poisson --set model.unit_effect=false --threads 2");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("stopped after 40 epochs (annealed)"), std::string::npos) << r.output;
  EXPECT_NE(read_text(d() + "/anneal/model.yaml").find("stop_reason: annealed"), std::string::npos);
  std::istringstream history(read_text(d() + "/anneal/history.csv"));
  std::string line;
  std::vector<double> rates;
  std::getline(history, line);  // header: epoch,objective,holdout_nll,learning_rate,seconds
  while (std::getline(history, line)) {
    std::istringstream fields(line);
    std::string field;
    for (int k = 0; k < 4 && std::getline(fields, field, ','); ++k)
      if (k == 3) rates.push_back(std::stod(field));
  }
  ASSERT_EQ(rates.size(), 40u);
  EXPECT_EQ(rates[19], rates[0]);
  EXPECT_LT(rates[39], 0.01 * rates[0]);
}

// train.polish: natural-gradient epochs, then polish steps, each a line of history.csv with a
// better full-data objective than the step before; an Adam fit says it has none to polish.
TEST_F(EndToEnd, PolishFollowsTheNaturalGradientEpochs) {
  auto r = run(bin("vbagg-train") + " --config " + d() + "/run.yaml --out " + d() +
               "/polish --set train.optimizer=natgrad --set train.epochs=8 --set train.polish=6 "
               "--set model.likelihood=poisson --set model.unit_effect=false --threads 2");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string model = read_text(d() + "/polish/model.yaml");
  EXPECT_TRUE(model.find("stop_reason: polished") != std::string::npos ||
              model.find("stop_reason: polish_budget") != std::string::npos)
      << model;
  std::istringstream history(read_text(d() + "/polish/history.csv"));
  std::string line;
  std::vector<double> objective;
  std::getline(history, line);  // header
  while (std::getline(history, line)) objective.push_back(std::stod(line.substr(line.find(',') + 1)));
  ASSERT_GT(objective.size(), 8u);
  ASSERT_LE(objective.size(), 14u);
  for (size_t k = 9; k < objective.size(); ++k) EXPECT_GT(objective[k], objective[k - 1]) << "polish step " << k - 7;
  r = run(bin("vbagg-train") + " --config " + d() + "/run.yaml --out " + d() +
          "/polish_adam --set train.optimizer=adam --set train.epochs=3 --set train.polish=6 "
          "--set model.likelihood=poisson --set model.unit_effect=false --threads 2");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("train.polish follows natural-gradient or L-BFGS epochs only"), std::string::npos)
      << r.output;
}

TEST_F(EndToEnd, CloudOptimisedOutputAndCreationOptions) {
  auto r = run(bin("vbagg-predict") + " --model " + d() + "/fit/model.yaml --out " + d() + "/cog --of COG -q");
  ASSERT_EQ(r.code, 0) << r.output;
  io::DatasetPtr ds = io::open_raster(d() + "/cog/intensity_mean.tif");
  EXPECT_STREQ(ds->GetMetadataItem("LAYOUT", "IMAGE_STRUCTURE"), "COG");
  // A grid wider than its tiles gets overviews and passes GDAL's own COG validator (python3-gdal).
  // The COG driver's own creation option (BLOCKSIZE, which the GeoTIFF driver lacks) reaches it:
  // 128-pixel tiles give a 260 x 200 grid two overviews, at a seventh of the pixels (and of the
  // time under the sanitizer) that 512-pixel tiles would need.
  r = run(bin("vbagg-simulate") + " --kind country --out " + d() + "/wide --size 260x200 --units 12 --seed 4 -q");
  ASSERT_EQ(r.code, 0) << r.output;
  r = run(bin("vbagg-predict") + " --model " + d() + "/fit/model.yaml --config " + d() + "/wide/data.yaml --out " +
          d() + "/wide_cog --of COG --co BLOCKSIZE=128 -q --set data.covariates=\"[{path: night_lights.tif, " +
          "name: lights}, temperature.tif, rainfall.tif, travel_time.tif]\"");
  ASSERT_EQ(r.code, 0) << r.output;
  io::DatasetPtr wide_ds = io::open_raster(d() + "/wide_cog/intensity_sd.tif");
  GDALRasterBand* wide = wide_ds->GetRasterBand(1);
  int bx = 0, by = 0;
  wide->GetBlockSize(&bx, &by);
  EXPECT_EQ(bx, 128);
  EXPECT_EQ(wide->GetOverviewCount(), 2);
  for (const char* map : {"intensity_mean.tif", "intensity_sd.tif", "cases_mean.tif"}) {
    r = run("/usr/bin/python3 -m osgeo_utils.samples.validate_cloud_optimized_geotiff --full-check=yes " + d() +
            "/wide_cog/" + map);
    EXPECT_EQ(r.code, 0) << map << ": " << r.output;
    EXPECT_NE(r.output.find("is a valid cloud optimized GeoTIFF"), std::string::npos) << r.output;
  }
  r = run(bin("vbagg-predict") + " --model " + d() + "/fit/model.yaml --out " + d() + "/lzw --co COMPRESS=LZW -q");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_STREQ(io::open_raster(d() + "/lzw/latent_sd.tif")->GetMetadataItem("COMPRESSION", "IMAGE_STRUCTURE"), "LZW");
  r = run(bin("vbagg-predict") + " --model " + d() + "/fit/model.yaml --out " + d() + "/bad --co COMPRESS=NOPE");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("COMPRESS"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(d() + "/bad/intensity_mean.tif"));
}

TEST_F(EndToEnd, PredictsANewAreaWithTheSameCovariateNames) {
  // Another country (a new "year"), same covariate names: predictions on its own grid.
  auto r = run(bin("vbagg-simulate") + " --kind country --out " + d() + "/other --size 50x40 --units 10 --seed 9 -q");
  ASSERT_EQ(r.code, 0) << r.output;
  r = run(bin("vbagg-predict") + " --model " + d() + "/fit/model.yaml --config " + d() + "/other/data.yaml --out " +
          d() +
          "/other_maps --set data.covariates=\"[{path: night_lights.tif, name: lights}, temperature.tif, rainfall.tif, "
          "travel_time.tif]\" -q");
  ASSERT_EQ(r.code, 0) << r.output;
  io::DatasetPtr ds = io::open_raster(d() + "/other_maps/intensity_mean.tif");
  EXPECT_EQ(ds->GetRasterXSize(), 50);
  const std::string units = read_text(d() + "/other_maps/units.csv");
  EXPECT_NE(units.find(",new,"), std::string::npos);
  // Units are optional for a new area: the maps come without units.csv.
  std::ofstream(d() + "/other/maps_only.yaml")
      << "data:\n  covariates: [{path: night_lights.tif, name: lights}, temperature.tif, rainfall.tif, "
         "travel_time.tif]\n  population: {path: population.tif}\n";
  r = run(bin("vbagg-predict") + " --model " + d() + "/fit/model.yaml --config " + d() +
          "/other/maps_only.yaml --out " + d() + "/maps_only -q");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(fs::exists(d() + "/maps_only/intensity_q0.975.tif"));
  EXPECT_FALSE(fs::exists(d() + "/maps_only/units.csv"));
  // Without the renamed covariate the model cannot predict, and says which one is missing.
  r = run(bin("vbagg-predict") + " --model " + d() + "/fit/model.yaml --config " + d() + "/other/data.yaml --out " +
          d() + "/x");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("covariate 'lights'"), std::string::npos) << r.output;
}

TEST_F(EndToEnd, SimulateIsDeterministic) {
  for (const char* out : {"/s1", "/s2"}) {
    const auto r =
        run(bin("vbagg-simulate") + " --kind country --out " + d() + out + " --size 30x20 --units 5 --seed 4 -q");
    ASSERT_EQ(r.code, 0) << r.output;
  }
  for (const char* f : {"temperature.tif", "population.tif", "truth_intensity.tif"})
    EXPECT_EQ(read_text(d() + "/s1/" + f), read_text(d() + "/s2/" + f)) << f;
  // Each option of the field or the covariates: the same covariates and people as the country
  // `same_as`, another truth; a value it does not take is refused with the option named.
  const auto expect_other_truth = [&](const std::string& out, const std::string& options, const std::string& same_as) {
    const auto r = run(bin("vbagg-simulate") + " --kind country --out " + d() + out +
                       " --size 30x20 --units 5 --seed 4 " + options + " -q");
    ASSERT_EQ(r.code, 0) << r.output;
    for (const char* f : {"temperature.tif", "population.tif"})
      EXPECT_EQ(read_text(d() + same_as + "/" + f), read_text(d() + out + "/" + f)) << f;
    EXPECT_NE(read_text(d() + same_as + "/truth_intensity.tif"), read_text(d() + out + "/truth_intensity.tif"));
  };
  const auto expect_refused = [&](const std::string& out, const std::string& option, const std::string& value) {
    const auto r =
        run(bin("vbagg-simulate") + " --kind country --out " + d() + out + " " + option + " " + value + " -q");
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.output.find(option), std::string::npos) << r.output;
  };
  expect_other_truth("/s3", "--field-frequencies 300", "/s1");  // more frequencies in the latent field
  expect_refused("/s4", "--field-frequencies", "0");
  expect_other_truth("/s6", "--field-frequencies 300 --field-kernel matern52", "/s3");  // a Matérn 5/2 field
  expect_refused("/s7", "--field-kernel", "matern32");
  expect_other_truth("/s5", "--covariate-effects nonlinear", "/s1");
  expect_refused("/s8", "--covariate-effects", "quadratic");
  const auto r =
      run(bin("vbagg-simulate") + " --kind swissroll --out " + d() + "/roll --bags 20 --bag-mean 30 --bag-sd 10 -q");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string bags = read_text(d() + "/roll/bags.csv");
  EXPECT_EQ(std::count(bags.begin(), bags.end(), '\n'), 21);
}

}  // namespace
}  // namespace vbagg

namespace vbagg {
namespace {

// A run folder copied elsewhere with its data predicts there, from the copies alone: model.yaml
// holds the data paths relative to itself.
TEST_F(EndToEnd, MovedRunFolderStillPredicts) {
  test::TempDir elsewhere;
  fs::copy(d() + "/data", elsewhere / "data", fs::copy_options::recursive);
  fs::create_directories(elsewhere / "fit");
  fs::copy_file(d() + "/fit/model.yaml", elsewhere / "fit/model.yaml");
  EXPECT_NE(read_text(elsewhere / "fit/model.yaml").find("path: ../data/units.gpkg"), std::string::npos);
  fs::rename(d() + "/data", d() + "/data_away");  // the originals are out of reach
  const auto r = run(bin("vbagg-predict") + " --model " + (elsewhere / "fit/model.yaml") + " --out " +
                     (elsewhere / "maps") + " -q");
  fs::rename(d() + "/data_away", d() + "/data");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(fs::exists(elsewhere / "maps/intensity_mean.tif"));
  // Still the training units: their split is known.
  const std::string units = read_text(elsewhere / "maps/units.csv");
  EXPECT_NE(units.find(",holdout,"), std::string::npos) << units;
  EXPECT_EQ(units.find(",new,"), std::string::npos) << units;
}

// Baselines go through the same commands and model file; point estimates write only their means
// and say so in the maps' metadata.
TEST_F(EndToEnd, BaselinesThroughTheSameCommands) {
  for (const std::string kind : {"constant", "nystrom", "bag_pixel"}) {
    SCOPED_TRACE(kind);
    const std::string fit = d() + "/fit_" + kind, maps = fit + "/maps";
    auto r =
        run(bin("vbagg-train") + " --config " + d() + "/run.yaml --out " + fit + " --set model.kind=" + kind + " -q");
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_NE(read_text(fit + "/model.yaml").find("kind: " + kind), std::string::npos);
    r = run(bin("vbagg-predict") + " --model " + fit + "/model.yaml --out " + maps + " -q");
    ASSERT_EQ(r.code, 0) << r.output;
    const bool posterior = kind == "bag_pixel";
    EXPECT_TRUE(fs::exists(maps + "/intensity_mean.tif"));
    EXPECT_TRUE(fs::exists(maps + "/cases_mean.tif"));
    EXPECT_EQ(fs::exists(maps + "/intensity_sd.tif"), posterior);
    EXPECT_EQ(fs::exists(maps + "/intensity_q0.025.tif"), posterior);
    io::DatasetPtr ds = io::open_raster(maps + "/intensity_mean.tif");
    EXPECT_STREQ(ds->GetMetadataItem("VBAGG_MODEL_KIND"), kind.c_str());
    if (!posterior) {
      EXPECT_NE(ds->GetMetadataItem("VBAGG_UNCERTAINTY"), nullptr);
    }
    r = run(bin("vbagg-eval") + " --model " + fit + "/model.yaml --truth " + d() + "/data/truth_intensity.tif --json " +
            fit + "/metrics.json");
    ASSERT_EQ(r.code, 0) << r.output;
    const std::string json = read_text(fit + "/metrics.json");
    EXPECT_NE(json.find("\"model\": \"" + kind + "\""), std::string::npos) << json;
    EXPECT_EQ(json.find("\"coverage\": null") != std::string::npos, !posterior) << json;
  }
  // The constant model predicts each training unit's own rate: its training totals are exact.
  const std::string units = read_text(d() + "/fit_constant/maps/units.csv");
  std::istringstream lines(units);
  std::string line;
  std::getline(lines, line);
  int train_rows = 0;
  while (std::getline(lines, line)) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
    if (f[1] != "train") continue;
    ++train_rows;
    EXPECT_NEAR(std::stod(f[3]), std::stod(f[2]), 1e-6 * std::stod(f[2]) + 1e-6) << line;
  }
  EXPECT_GT(train_rows, 10);
}

}  // namespace
}  // namespace vbagg
