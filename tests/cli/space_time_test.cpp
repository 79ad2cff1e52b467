// A seasonal country through train and predict: periods in the model, a band per period, a file
// per period, forecasts beyond the data, and the time settings refused where they cannot apply.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

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

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream s(text);
  for (std::string line; std::getline(s, line);) out.push_back(line);
  return out;
}

// Eight months simulated; the model learns the first six.
class SpaceTime : public ::testing::Test {
 protected:
  static inline test::TempDir* dir = nullptr;
  static void SetUpTestSuite() {
    dir = new test::TempDir();
    const std::string d = dir->path.string();
    auto r = run(bin("vbagg-simulate") + " --kind country --out " + d +
                 "/data --size 40x30 --units 12 --months 8 --seed 5 -q");
    ASSERT_EQ(r.code, 0) << r.output;
    r = run(bin("vbagg-train") + " --config " + d + "/data/seasonal.yaml --out " + d +
            "/fit -q --threads 2 --set data.time=2019-01..2019-06 --set train.epochs=40 --set model.inducing.count=30");
    ASSERT_EQ(r.code, 0) << r.output;
  }
  static void TearDownTestSuite() {
    delete dir;
    dir = nullptr;
  }
  std::string d() const { return dir->path.string(); }
  test::RunResult predict(const std::string& out, const std::string& more = "") const {
    return run(bin("vbagg-predict") + " --model " + d() + "/fit/model.yaml --out " + d() + "/" + out + " -q " + more);
  }
};

TEST_F(SpaceTime, TheModelKeepsItsPeriodsAndProductKernel) {
  const std::string model = read_text(d() + "/fit/model.yaml");
  EXPECT_NE(model.find("periods: [2019-01, 2019-02, 2019-03, 2019-04, 2019-05, 2019-06]"), std::string::npos);
  EXPECT_NE(model.find("fixed_variance: true"), std::string::npos);
  // model.kernel.space: auto is Matérn 5/2 with periods (docs/space-time.md).
  EXPECT_NE(model.find("type: matern52"), std::string::npos);
  EXPECT_EQ(model.find("type: matern32"), std::string::npos);
  EXPECT_NE(model.find("U001@2019-06"), std::string::npos);  // its units are units in periods
  EXPECT_NE(model.find("shared: true"), std::string::npos);  // a unit's months share its effect
  EXPECT_NE(model.find("U001: ["), std::string::npos);       // and each unit's effect is kept
}

// model.unit_effect_scope: period gives each unit-period its own effect; the sampled expectation
// takes bags one at a time, so auto gives it that too, and an explicit unit is refused.
TEST_F(SpaceTime, TheUnitEffectScopeIsAChoice) {
  const std::string train = bin("vbagg-train") + " --config " + d() +
                            "/data/seasonal.yaml -q --set data.time=2019-01..2019-03 --set train.epochs=3 "
                            "--set model.inducing.count=10 --out " +
                            d();
  auto r = run(train + "/per_period --set model.unit_effect_scope=period");
  ASSERT_EQ(r.code, 0) << r.output;
  std::string model = read_text(d() + "/per_period/model.yaml");
  EXPECT_NE(model.find("unit_effect:"), std::string::npos);
  EXPECT_EQ(model.find("shared: true"), std::string::npos);
  r = run(train + "/sampled --set model.expectation=sample --set train.optimizer=adam");
  ASSERT_EQ(r.code, 0) << r.output;
  model = read_text(d() + "/sampled/model.yaml");
  EXPECT_NE(model.find("unit_effect:"), std::string::npos);
  EXPECT_EQ(model.find("shared: true"), std::string::npos);
  r = run(train + "/refused --set model.expectation=sample --set model.unit_effect_scope=unit");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("model.unit_effect_scope"), std::string::npos) << r.output;
}

// model.kernel.season: cycle (the season less its mean over the year) is kept in the model file by
// name and predicts from it; periodic is the rbf on the circle inputs.
// The season's shape and the space-time layout (one space kernel for both time parts, or one each).
TEST_F(SpaceTime, TheSeasonsShapeAndTheSpaceTimeLayoutAreChoicesKeptInTheModel) {
  const std::string train = bin("vbagg-train") + " --config " + d() +
                            "/data/seasonal.yaml -q --set data.time=2019-01..2019-03 --set train.epochs=5 "
                            "--set model.inducing.count=10 --out " +
                            d();
  const std::pair<std::string, std::string> choices[] = {
      {"cycle", "shared"}, {"periodic", "shared"}, {"cycle", "separate"}};
  for (const auto& [season, layout] : choices) {
    SCOPED_TRACE(season + " " + layout);
    const std::string out = d() + "/season_" + season + "_" + layout;
    auto r = run(train + "/season_" + season + "_" + layout + " --set model.kernel.season=" + season +
                 " --set model.kernel.space_time=" + layout);
    ASSERT_EQ(r.code, 0) << r.output;
    const std::string model = read_text(out + "/model.yaml");
    EXPECT_EQ(model.find("type: cycle") != std::string::npos, season == "cycle") << model;
    EXPECT_EQ(test::occurrences(model, "type: matern52"), layout == "separate" ? 2 : 1) << model;
    r = run(bin("vbagg-predict") + " --model " + out + "/model.yaml --out " + out + "/maps -q");
    ASSERT_EQ(r.code, 0) << r.output;
    io::DatasetPtr ds = io::open_raster(out + "/maps/latent_sd.tif");
    ASSERT_EQ(ds->GetRasterCount(), 3);
    double mn, mx, mean, sd;
    ASSERT_EQ(ds->GetRasterBand(3)->GetStatistics(FALSE, TRUE, &mn, &mx, &mean, &sd), CE_None);
    EXPECT_GT(mn, 0) << "every pixel's latent sd in March";
  }
  auto r = run(train + "/refused --set model.kernel.season=cycle --set model.kernel.time=trend");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("model.kernel.season is 'cycle' but model.kernel.time is 'trend'"), std::string::npos)
      << r.output;
  r = run(train + "/refused --set model.kernel.space_time=separate --set model.kernel.time=trend");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("model.kernel.space_time is 'separate' but model.kernel.time is 'trend'"), std::string::npos)
      << r.output;
}

TEST_F(SpaceTime, MapsHaveABandPerPeriod) {
  const auto r = predict("maps");
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* name : {"intensity_mean", "intensity_sd", "cases_mean", "latent_sd"}) {
    SCOPED_TRACE(name);
    io::DatasetPtr ds = io::open_raster(d() + "/maps/" + name + ".tif");
    ASSERT_EQ(ds->GetRasterCount(), 6);
    ASSERT_NE(ds->GetMetadataItem("VBAGG_QUANTITY"), nullptr);
    for (int b = 1; b <= 6; ++b) {
      EXPECT_EQ(std::string(ds->GetRasterBand(b)->GetDescription()), "2019-0" + std::to_string(b));
      double mn, mx, mean, sd;
      ASSERT_EQ(ds->GetRasterBand(b)->GetStatistics(FALSE, FALSE, &mn, &mx, &mean, &sd), CE_None);
      EXPECT_GE(mn, 0);
      EXPECT_GT(mx, mn);
    }
  }
  // The season shows: the country's mean intensity differs between months.
  io::DatasetPtr mean = io::open_raster(d() + "/maps/intensity_mean.tif");
  double lo = 1e300, hi = 0;
  for (int b = 1; b <= 6; ++b) {
    double mn, mx, m, sd;
    mean->GetRasterBand(b)->GetStatistics(FALSE, FALSE, &mn, &mx, &m, &sd);
    lo = std::min(lo, m);
    hi = std::max(hi, m);
  }
  EXPECT_GT(hi, 1.5 * lo);

  const std::vector<std::string> rows = lines_of(read_text(d() + "/maps/units.csv"));
  ASSERT_EQ(rows.size(), 1u + 12 * 6);
  EXPECT_EQ(rows[0].rfind("unit,period,split,observed,predicted,", 0), 0u) << rows[0];
  EXPECT_EQ(rows[1].rfind("U001@2019-01,2019-01,", 0), 0u) << rows[1];
  io::DatasetPtr units(static_cast<GDALDataset*>(
      GDALOpenEx((d() + "/maps/units.gpkg").c_str(), GDAL_OF_VECTOR, nullptr, nullptr, nullptr)));
  ASSERT_TRUE(units);
  int layers = 0;  // one per period, beside the styles' table
  for (int k = 0; k < units->GetLayerCount(); ++k)
    layers += std::string(units->GetLayer(k)->GetName()).rfind("units_", 0) == 0;
  EXPECT_EQ(layers, 6);
  OGRLayer* march = units->GetLayerByName("units_2019-03");
  ASSERT_NE(march, nullptr);
  EXPECT_EQ(march->GetFeatureCount(), 12);
}

TEST_F(SpaceTime, SplitPeriodsWritesAFilePerPeriod) {
  const auto r = predict("split", "--split-periods --style none");
  ASSERT_EQ(r.code, 0) << r.output;
  for (int m = 1; m <= 6; ++m) {
    const std::string path = d() + "/split/intensity_mean_2019-0" + std::to_string(m) + ".tif";
    ASSERT_TRUE(fs::exists(path)) << path;
    EXPECT_EQ(io::open_raster(path)->GetRasterCount(), 1);
  }
  EXPECT_FALSE(fs::exists(d() + "/split/intensity_mean.tif"));
  // The same numbers as the bands of one file.
  ASSERT_EQ(predict("bands", "--style none").code, 0);
  std::vector<float> a(40 * 30), b(40 * 30);
  io::DatasetPtr split = io::open_raster(d() + "/split/intensity_mean_2019-04.tif");
  io::DatasetPtr bands = io::open_raster(d() + "/bands/intensity_mean.tif");
  ASSERT_EQ(split->GetRasterBand(1)->RasterIO(GF_Read, 0, 0, 40, 30, a.data(), 40, 30, GDT_Float32, 0, 0), CE_None);
  ASSERT_EQ(bands->GetRasterBand(4)->RasterIO(GF_Read, 0, 0, 40, 30, b.data(), 40, 30, GDT_Float32, 0, 0), CE_None);
  EXPECT_EQ(a, b);
}

TEST_F(SpaceTime, ForecastsPeriodsBeyondTheData) {
  const auto r = predict("forecast", "--set data.time=2019-07..2019-08");
  ASSERT_EQ(r.code, 0) << r.output;
  io::DatasetPtr ds = io::open_raster(d() + "/forecast/intensity_mean.tif");
  ASSERT_EQ(ds->GetRasterCount(), 2);
  EXPECT_EQ(std::string(ds->GetRasterBand(2)->GetDescription()), "2019-08");
  const std::vector<std::string> rows = lines_of(read_text(d() + "/forecast/units.csv"));
  ASSERT_EQ(rows.size(), 1u + 12 * 2);
  for (size_t k = 1; k < rows.size(); ++k) EXPECT_NE(rows[k].find(",new,"), std::string::npos) << rows[k];
}

TEST_F(SpaceTime, SpansAverageThePeriodsWithJointUncertainty) {
  const auto r = predict("spans", "--style none --span 2019-01..2019-03 --set predict.spans=2019-05");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string dir = d() + "/spans/";
  for (const char* f : {"intensity_mean_2019-01_2019-03.tif", "intensity_sd_2019-01_2019-03.tif",
                        "intensity_q0.025_2019-01_2019-03.tif", "intensity_q0.975_2019-01_2019-03.tif",
                        "intensity_mean_2019-05.tif", "intensity_sd_2019-05.tif"})
    EXPECT_TRUE(fs::exists(dir + f)) << f;
  const std::vector<float> mean = band_values(dir + "intensity_mean_2019-01_2019-03.tif", 1),
                           sd = band_values(dir + "intensity_sd_2019-01_2019-03.tif", 1),
                           lo = band_values(dir + "intensity_q0.025_2019-01_2019-03.tif", 1),
                           hi = band_values(dir + "intensity_q0.975_2019-01_2019-03.tif", 1),
                           may = band_values(dir + "intensity_mean_2019-05.tif", 1),
                           may_sd = band_values(dir + "intensity_sd_2019-05.tif", 1);
  std::vector<std::vector<float>> months, month_sd;
  for (int b = 1; b <= 5; ++b) {
    months.push_back(band_values(dir + "intensity_mean.tif", b));
    month_sd.push_back(band_values(dir + "intensity_sd.tif", b));
  }
  int pixels = 0;
  for (size_t i = 0; i < mean.size(); ++i) {
    if (!(mean[i] > 0)) continue;  // nodata: the lake
    ++pixels;
    const double avg = (months[0][i] + months[1][i] + months[2][i]) / 3.0;
    const double avg_sd = (month_sd[0][i] + month_sd[1][i] + month_sd[2][i]) / 3.0;
    EXPECT_NEAR(mean[i], avg, 1e-5 * avg) << i;
    // Correlated months: less spread than their average sd (perfect correlation), more than
    // independent months would give.
    EXPECT_LT(sd[i], avg_sd) << i;
    const double independent =
        std::sqrt(month_sd[0][i] * month_sd[0][i] + month_sd[1][i] * month_sd[1][i] + month_sd[2][i] * month_sd[2][i]) /
        3.0;
    EXPECT_GT(sd[i], independent) << i;
    EXPECT_LT(lo[i], mean[i]);
    EXPECT_GT(hi[i], mean[i]);
    // A span of one period is that period's map.
    EXPECT_NEAR(may[i], months[4][i], 1e-5 * months[4][i]);
    EXPECT_NEAR(may_sd[i], month_sd[4][i], 1e-4 * month_sd[4][i]);
  }
  EXPECT_GT(pixels, 1000);
  const auto bad = predict("spans2", "--span 2019-05..2019-09");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.output.find("2019-07 is not among the periods of data.time"), std::string::npos) << bad.output;
}

TEST_F(SpaceTime, EvalComparesEachPeriodWithItsTruthAndDrawsTheSeasonalCurve) {
  const std::string eval = bin("vbagg-eval") + " --model " + d() + "/fit/model.yaml -q --split all --truth '" + d() +
                           "/data/truth_intensity_{period}.tif'";
  auto r = run(eval + " --json " + d() + "/eval.json --report " + d() + "/report.html --unit U003");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string json = read_text(d() + "/eval.json");
  EXPECT_NE(json.find("\"units\": 72"), std::string::npos) << json;
  // Each period against its own month's truth: the season is in the truth, so a single raster
  // would correlate far worse.
  const auto at = json.find("\"pixel\": {\"mse\": ");
  ASSERT_NE(at, std::string::npos);
  const auto corr = json.find("\"correlation\": ", at);
  ASSERT_NE(corr, std::string::npos);
  EXPECT_GT(std::stod(json.substr(corr + 15)), 0.9) << json;
  // The counts' band: joint pseudo-observations in which a unit's periods share a draw of its effect.
  EXPECT_GT(json_number(json_object(json, "count_calibrated"), "calibrated_error_mean"), 0) << json;
  EXPECT_NE(r.output.find("a calibrated model's on these units"), std::string::npos) << r.output;
  const std::string html = read_text(d() + "/report.html");
  EXPECT_NE(html.find("alt=\"seasonal curve of unit U003\""), std::string::npos);
  EXPECT_NE(html.find("Period 2019-06"), std::string::npos);
  r = run(eval + " --report " + d() + "/r2.html --unit U999");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("--unit U999: no unit of that id"), std::string::npos) << r.output;
  r = run(bin("vbagg-eval") + " --model " + d() + "/fit/model.yaml -q --truth " + d() + "/data/truth_intensity.tif");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("a raster per period"), std::string::npos) << r.output;
}

TEST_F(SpaceTime, HeldOutPeriodsAndCrossValidationOverTime) {
  // The last two months held out whole, with no other unit: the holdout is exactly their units.
  auto r = run(bin("vbagg-train") + " --config " + d() + "/data/seasonal.yaml --out " + d() +
               "/held -q --set data.time=2019-01..2019-06 --set train.epochs=20 --set model.inducing.count=20 "
               "--set train.holdout.fraction=0 --set train.holdout.periods=2019-05..2019-06");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string model = read_text(d() + "/held/model.yaml");
  const auto holdout = model.find("holdout:");
  ASSERT_NE(holdout, std::string::npos);
  const std::string list = model.substr(holdout, model.find('\n', holdout) - holdout);
  EXPECT_NE(list.find("U001@2019-05"), std::string::npos) << list;
  EXPECT_EQ(list.find("2019-04"), std::string::npos) << list;
  r = run(bin("vbagg-train") + " --config " + d() + "/data/seasonal.yaml --out " + d() +
          "/held2 -q --set data.time=2019-01..2019-06 --set train.holdout.periods=2019-07");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("2019-07 is not among the periods of data.time"), std::string::npos) << r.output;

  // Three folds of two consecutive months each.
  r = run(bin("vbagg-eval") + " --model " + d() + "/held/model.yaml -q --cv 3 --cv-by time --json " + d() + "/cv.json");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("3-fold cross-validation over blocks of consecutive periods (72 units"), std::string::npos)
      << r.output;
  EXPECT_NE(read_text(d() + "/cv.json").find("\"fold_units\": [24, 24, 24]"), std::string::npos);
  r = run(bin("vbagg-eval") + " --model " + d() + "/held/model.yaml -q --cv 7 --cv-by time");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("7 folds over time need as many periods; data.time has 6"), std::string::npos) << r.output;
}

// Natural-gradient steps on a unit effect shared by six months: its term rewards variance where a
// unit's months agree, and unguarded steps took q's precision near singular (epoch 2 at -6e5, 22
// times the first epoch's objective, and a step rolled back). Every epoch now improves on the first.
TEST_F(SpaceTime, NaturalGradientStepsStayInScale) {
  const auto r = run(bin("vbagg-train") + " --config " + d() + "/data/seasonal.yaml --out " + d() +
                     "/natgrad --threads 2 --set data.time=2019-01..2019-06 --set train.optimizer=natgrad "
                     "--set train.epochs=20 --set train.holdout.fraction=0");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.find("rolled back"), std::string::npos) << r.output;
  const auto rows = lines_of(read_text(d() + "/natgrad/history.csv"));
  ASSERT_GT(rows.size(), 21u);
  auto objective = [&](size_t row) { return std::stod(rows[row].substr(rows[row].find(',') + 1)); };
  for (size_t row = 2; row < rows.size(); ++row) EXPECT_GT(objective(row), objective(1)) << rows[row];
}

// A month that a unit did not report (no row in the long table), under data.on_missing_response:
// predict: no fit or holdout list holds it, and units.csv predicts it, the unit's other months
// informing its shared effect.
TEST_F(SpaceTime, AMonthWithoutCountsIsPredicted) {
  std::ifstream all(d() + "/data/cases_monthly.csv");
  std::ofstream gap(d() + "/data/cases_gap.csv");
  int kept = 0;
  for (std::string line; std::getline(all, line);)
    if (line.rfind("U003,2019-04,", 0) != 0) {
      gap << line << "\n";
      ++kept;
    }
  gap.close();
  ASSERT_EQ(kept, 1 + 12 * 8 - 1);
  const std::string train = bin("vbagg-train") + " --config " + d() + "/data/seasonal_long.yaml -q --threads 2 --out " +
                            d() +
                            "/gap --set data.units.response_table=cases_gap.csv --set data.time=2019-01..2019-06 " +
                            "--set train.epochs=10 --set model.inducing.count=20";
  auto r = run(train);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("U003@2019-04"), std::string::npos) << r.output;
  r = run(train + " --set data.on_missing_response=predict");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string model = read_text(d() + "/gap/model.yaml");
  EXPECT_EQ(model.find("U003@2019-04"), std::string::npos);  // in no list of the fit
  EXPECT_NE(model.find("U003@2019-05"), std::string::npos);
  EXPECT_NE(model.find("U003: ["), std::string::npos);  // the unit's effect, from its other months
  r = run(bin("vbagg-predict") + " --model " + d() + "/gap/model.yaml --out " + d() + "/gap_maps -q");
  ASSERT_EQ(r.code, 0) << r.output;
  int unobserved = 0;
  for (const std::string& row : lines_of(read_text(d() + "/gap_maps/units.csv"))) {
    if (row.find(",unobserved,") == std::string::npos) continue;
    ++unobserved;
    EXPECT_EQ(row.rfind("U003@2019-04,2019-04,unobserved,,", 0), 0u) << row;
    std::stringstream cells(row);
    std::string cell;
    for (int k = 0; k < 5; ++k) std::getline(cells, cell, ',');
    EXPECT_GT(std::stod(cell), 0) << row;
  }
  EXPECT_EQ(unobserved, 1);
}

TEST_F(SpaceTime, TimeSettingsAreRefusedWhereTheyCannotApply) {
  auto expect_refused = [](const test::RunResult& r, const std::string& part) {
    EXPECT_NE(r.code, 0) << r.output;
    EXPECT_NE(r.output.find(part), std::string::npos) << r.output;
  };
  // The model's configuration without its periods: its rainfall series has none to follow.
  expect_refused(predict("none", "--set data.time="), "is a series (one value per period); it needs data.time");
  // A period's file of a covariate pattern is an input that the maps must not overwrite.
  std::ofstream(d() + "/data/clash.yaml")
      << "data:\n  time: 2019-01..2019-06\n  covariates: [temperature.tif, rainfall.tif, night_lights.tif, "
      << "travel_time.tif, {path: '../clash/intensity_mean_{period}.tif', name: rain}]\n"
      << "  population: {path: population.tif}\n"
      << "  units: {path: units.gpkg, id_field: ID, response_field: 'cases_{year}{month}'}\n";
  expect_refused(run(bin("vbagg-predict") + " --model " + d() + "/fit/model.yaml --config " + d() +
                     "/data/clash.yaml --split-periods --out " + d() + "/clash -q"),
                 "would overwrite the input '" + d() + "/clash/intensity_mean_2019-01.tif'");
  const std::string train = bin("vbagg-train") + " --config " + d() + "/data/";
  expect_refused(run(train + "data.yaml --out " + d() + "/x --set model.kernel.time=seasonal"), "data.time is not set");
  expect_refused(run(train + "data.yaml --out " + d() + "/x --set data.units.response_table=cases_monthly.csv"),
                 "needs data.time");
  expect_refused(run(train + "seasonal.yaml --out " + d() + "/x --set data.time=2019..2020"),
                 "{month} but the periods are years");
  expect_refused(run(train + "seasonal.yaml --out " + d() +
                     "/x --set data.time=2019-01..2019-06 --set "
                     "data.units.response_field=cases"),
                 "a response per period");
}

}  // namespace
}  // namespace vbagg
