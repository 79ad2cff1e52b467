// Every command's code on the smallest countries that reach it, in seconds: the HTML report and its
// plots, cross-validation over space, over time and over several sources, the span maps, two tasks'
// maps, and the monthly and swiss-roll simulators.
// The EndToEnd and SpaceTime suites check the same commands' results on larger fits; these walks
// are what the sanitizer build runs in their place (tests/CMakeLists.txt, label `long`).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "../io/fixtures.hpp"
#include "run.hpp"

namespace vbagg::walk_test {

namespace fs = std::filesystem;
using test::bin;
using test::json_number;
using test::read_text;
using test::run;

// The numbers of a JSON list `"key": [a, b, ...]` in text (empty when the key is missing).
std::vector<double> json_list(const std::string& text, const std::string& key) {
  std::vector<double> v;
  const size_t at = text.find("\"" + key + "\": [");
  if (at == std::string::npos) return v;
  std::istringstream in(text.substr(text.find('[', at) + 1));
  double x;
  char sep = ',';
  while (sep == ',' && in >> x >> sep) v.push_back(x);
  return v;
}

struct UnitRow {
  std::string unit, source, fold;
  double observed, predicted, lower, upper, pit;
};

// vbagg-eval --units-csv's rows, after checking its header.
std::vector<UnitRow> unit_rows(const std::string& path) {
  std::istringstream in(read_text(path));
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "unit,source,fold,observed,predicted,lower_95,upper_95,pit");
  std::vector<UnitRow> rows;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    UnitRow r;
    std::string field;
    std::getline(f, r.unit, ',');
    std::getline(f, r.source, ',');
    std::getline(f, r.fold, ',');
    for (double* x : {&r.observed, &r.predicted, &r.lower, &r.upper, &r.pit}) {
      std::getline(f, field, ',');
      *x = std::stod(field);
    }
    rows.push_back(r);
  }
  return rows;
}

// The table of units against the JSON of the same run: its rows are the units scored, its 95 %
// intervals give the 95 % coverage, and its PITs the PIT histogram.
void expect_units_match_the_metrics(const std::vector<UnitRow>& rows, const std::string& json) {
  const std::vector<double> coverage = json_list(json, "count_coverage"), pit = json_list(json, "count_pit_histogram");
  ASSERT_EQ(coverage.size(), 6u);
  ASSERT_EQ(pit.size(), 10u);
  double covered = 0;
  std::vector<double> bins(10, 0.0);
  for (const UnitRow& r : rows) {
    EXPECT_LE(r.lower, r.upper) << r.unit;
    EXPECT_GT(r.predicted, 0) << r.unit;
    ASSERT_TRUE(r.pit >= 0 && r.pit <= 1) << r.unit;
    covered += r.observed >= r.lower && r.observed <= r.upper;
    bins[std::min<size_t>(9, static_cast<size_t>(10 * r.pit))] += 1;
  }
  EXPECT_NEAR(covered / static_cast<double>(rows.size()), coverage[5], 1e-9);
  for (size_t b = 0; b < 10; ++b) EXPECT_NEAR(bins[b] / static_cast<double>(rows.size()), pit[b], 1e-9) << b;
}

// Fits of a few epochs, without the point estimates' spread: the walks are about the commands.
const std::string kQuickFit =
    " -q --set train.epochs=5 --set train.polish=0 --set model.inducing.count=10 --set model.point_uncertainty=none";

TEST(Walk, StaticCountryThroughEveryCommand) {
  const test::TempDir dir;
  const std::string d = dir.path.string();
  auto r = run(bin("vbagg-simulate") + " --kind country --out " + d + "/data --size 32x24 --units 10 --seed 4 -q");
  ASSERT_EQ(r.code, 0) << r.output;
  std::ofstream(d + "/run.yaml") << "data:\n  covariates: [data/temperature.tif, data/rainfall.tif]\n"
                                 << "  population: {path: data/population.tif}\n"
                                 << "  units: {path: data/units.gpkg, id_field: ID, response_field: cases}\n"
                                 << "train:\n  optimizer: lbfgs\n  holdout: {fraction: 0.3, seed: 1}\n";
  r = run(bin("vbagg-train") + " --config " + d + "/run.yaml --out " + d + "/fit" + kQuickFit);
  ASSERT_EQ(r.code, 0) << r.output;
  // Cloud-optimised, and with its progress lines (no -q).
  r = run(bin("vbagg-predict") + " --model " + d + "/fit/model.yaml --out " + d + "/maps --of COG");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("100 - done"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(d + "/maps/intensity_mean.tif"));
  EXPECT_TRUE(fs::exists(d + "/maps/units.gpkg"));

  const std::string eval =
      bin("vbagg-eval") + " --model " + d + "/fit/model.yaml -q --truth " + d + "/data/truth_intensity.tif";
  r = run(eval + " --split holdout --json " + d + "/holdout.json --report " + d + "/holdout.html --units-csv " + d +
          "/holdout_units.csv");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::vector<UnitRow> held = unit_rows(d + "/holdout_units.csv");
  EXPECT_EQ(held.size(), 3u) << "3 of 10 units held out";
  // The model's holdout units, each row's unit among them.
  const std::string model_text = read_text(d + "/fit/model.yaml");
  const std::string holdout_line = model_text.substr(model_text.find("  holdout: ["), 80);
  for (const UnitRow& u : held) {
    EXPECT_EQ(u.fold, "") << u.unit;
    EXPECT_NE(holdout_line.find(u.unit), std::string::npos) << u.unit << " is not in " << holdout_line;
  }
  expect_units_match_the_metrics(held, read_text(d + "/holdout.json"));
  const std::string html = read_text(d + "/holdout.html");
  for (const char* plot : {"calibration", "PIT histogram", "observed vs predicted"})
    EXPECT_NE(html.find(std::string("<img alt=\"") + plot + "\" src=\"data:image/png;base64,iVBOR"), std::string::npos)
        << plot;
  EXPECT_NE(html.find("<img alt=\"intensity sd\""), std::string::npos);
  EXPECT_NE(read_text(d + "/holdout.json").find("\"count_coverage\": ["), std::string::npos);
  // The score of the predictive distributions beside the expected totals' bag NLL.
  const double score = json_number(read_text(d + "/holdout.json"), "predictive_nll_mean");
  EXPECT_TRUE(std::isfinite(score) && score > 0) << score;

  r = run(eval + " --cv 2 --set train.epochs=3 --json " + d + "/cv.json --report " + d + "/cv.html --units-csv " + d +
          "/cv_units.csv");
  ASSERT_EQ(r.code, 0) << r.output;
  // Every unit once, with the fold that held it out.
  const std::vector<UnitRow> folded = unit_rows(d + "/cv_units.csv");
  std::set<std::string> units;
  for (const UnitRow& u : folded) {
    EXPECT_TRUE(u.fold == "1" || u.fold == "2") << u.unit << " fold " << u.fold;
    units.insert(u.unit);
  }
  EXPECT_EQ(folded.size(), 10u);
  EXPECT_EQ(units.size(), 10u);
  expect_units_match_the_metrics(folded, read_text(d + "/cv.json"));
  EXPECT_NE(r.output.find("2-fold spatially blocked cross-validation (10 units"), std::string::npos) << r.output;
  EXPECT_NE(read_text(d + "/cv.json").find("\"folds\": 2"), std::string::npos);
  EXPECT_NE(read_text(d + "/cv.html").find("<img alt=\"calibration\""), std::string::npos);
}

TEST(Walk, MonthlyCountryThroughEveryCommand) {
  const test::TempDir dir;
  const std::string d = dir.path.string();
  auto r =
      run(bin("vbagg-simulate") + " --kind country --out " + d + "/data --size 32x24 --units 8 --months 4 --seed 5 -q");
  ASSERT_EQ(r.code, 0) << r.output;
  r = run(bin("vbagg-train") + " --config " + d + "/data/seasonal.yaml --out " + d +
          "/fit --set data.time=2019-01..2019-03 --set train.holdout.periods=2019-03" + kQuickFit);
  ASSERT_EQ(r.code, 0) << r.output;
  r = run(bin("vbagg-predict") + " --model " + d + "/fit/model.yaml --out " + d +
          "/maps -q --style none --span 2019-01..2019-03");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(fs::exists(d + "/maps/intensity_mean_2019-01_2019-03.tif"));
  EXPECT_TRUE(fs::exists(d + "/maps/intensity_sd_2019-01_2019-03.tif"));

  r = run(bin("vbagg-eval") + " --model " + d + "/fit/model.yaml -q --split all --truth '" + d +
          "/data/truth_intensity_{period}.tif' --report " + d + "/report.html --unit U001");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(read_text(d + "/report.html").find("alt=\"seasonal curve of unit U001\""), std::string::npos);

  r = run(bin("vbagg-eval") + " --model " + d + "/fit/model.yaml -q --cv 3 --cv-by time --set train.epochs=3");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("3-fold cross-validation over blocks of consecutive periods (24 units"), std::string::npos)
      << r.output;
}

TEST(Walk, TwoTasksFromThreeSourcesThroughEveryCommand) {
  const test::TempDir dir;
  const std::string d = dir.path.string();
  auto r = run(bin("vbagg-simulate") + " --kind country --out " + d + "/data --size 32x24 --units 10 --seed 6 -q");
  ASSERT_EQ(r.code, 0) << r.output;
  // tasks.yaml: the units' and provinces' counts observe incidence, the survey clusters prevalence.
  r = run(bin("vbagg-train") + " --config " + d + "/data/tasks.yaml --out " + d +
          "/fit --set model.latents=2 --set model.fixed_effects=point --set train.schedule=constant" + kQuickFit);
  ASSERT_EQ(r.code, 0) << r.output;
  r = run(bin("vbagg-predict") + " --model " + d + "/fit/model.yaml --out " + d + "/maps -q --style none");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(fs::exists(d + "/maps/prevalence_intensity_mean.tif"));
  EXPECT_TRUE(fs::exists(d + "/maps/incidence_intensity_mean.tif"));
  r = run(bin("vbagg-eval") + " --model " + d + "/fit/model.yaml -q --cv 2 --set train.epochs=3 --json " + d +
          "/cv.json --units-csv " + d + "/cv_units.csv");
  ASSERT_EQ(r.code, 0) << r.output;
  std::set<std::string> sources;
  for (const UnitRow& u : unit_rows(d + "/cv_units.csv")) sources.insert(u.source);
  for (const char* source : {"units", "provinces", "clusters"}) {
    EXPECT_NE(read_text(d + "/cv.json").find(std::string("\"") + source + "\""), std::string::npos) << source;
    EXPECT_EQ(sources.count(source), 1u) << source << " has rows in the table of units";
  }
}

TEST(Walk, SwissRollSimulator) {
  const test::TempDir dir;
  const std::string d = dir.path.string();
  const auto r =
      run(bin("vbagg-simulate") + " --kind swissroll --out " + d + "/roll --bags 6 --bag-mean 10 --bag-sd 4 -q");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(read_text(d + "/roll/bags.csv").find("bag,size,count\n"), std::string::npos);
}

}  // namespace vbagg::walk_test
