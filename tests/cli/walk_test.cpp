// Every command's code on the smallest countries that reach it, in seconds: the HTML report and its
// plots, cross-validation over space, over time and over several sources, the span maps, two tasks'
// maps, and the monthly and swiss-roll simulators.
// The EndToEnd and SpaceTime suites check the same commands' results on larger fits; these walks
// are what the sanitizer build runs in their place (tests/CMakeLists.txt, label `long`).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "../io/fixtures.hpp"
#include "run.hpp"

namespace vbagg::walk_test {

namespace fs = std::filesystem;
using test::bin;
using test::read_text;
using test::run;

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
  r = run(eval + " --split holdout --json " + d + "/holdout.json --report " + d + "/holdout.html");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string html = read_text(d + "/holdout.html");
  for (const char* plot : {"calibration", "PIT histogram", "observed vs predicted"})
    EXPECT_NE(html.find(std::string("<img alt=\"") + plot + "\" src=\"data:image/png;base64,iVBOR"), std::string::npos)
        << plot;
  EXPECT_NE(html.find("<img alt=\"intensity sd\""), std::string::npos);
  EXPECT_NE(read_text(d + "/holdout.json").find("\"count_coverage\": ["), std::string::npos);

  r = run(eval + " --cv 2 --set train.epochs=3 --json " + d + "/cv.json --report " + d + "/cv.html");
  ASSERT_EQ(r.code, 0) << r.output;
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
          "/cv.json");
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* source : {"units", "provinces", "clusters"})
    EXPECT_NE(read_text(d + "/cv.json").find(std::string("\"") + source + "\""), std::string::npos) << source;
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
