// Bad input answered with exit code 1 (data) or 2 (usage/configuration) and one line naming the
// culprit; --help of every app explains every option; the configuration reference is current.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../io/fixtures.hpp"
#include "io/model_file.hpp"
#include "run.hpp"

namespace vbagg {
namespace {

namespace fs = std::filesystem;
using test::bin;
using test::run;

struct Project {
  test::TempDir dir;
  std::string d = dir.path.string();
  Project() {
    const auto r = run(bin("vbagg-simulate") + " --kind country --out " + d + " --size 40x30 --units 8 --seed 5 -q");
    EXPECT_EQ(r.code, 0) << r.output;
  }
  std::string config(const std::string& extra) {
    std::ofstream f(d + "/run.yaml");
    f << "data:\n  covariates:\n    - path: temperature.tif\n    - path: rainfall.tif\n"
      << "  population:\n    path: population.tif\n"
      << "  units:\n    path: units.gpkg\n    id_field: ID\n    response_field: cases\n"
      << "train:\n  epochs: 3\n"
      << extra;
    return d + "/run.yaml";
  }
  test::RunResult train(const std::string& args) { return run(bin("vbagg-train") + " " + args); }
};

// Every error is short: a dozen lines at most, however many units or keys are at fault.
constexpr long kMaxErrorLines = 12;

void expect_error(const test::RunResult& r, int code, const std::vector<std::string>& mentions) {
  EXPECT_EQ(r.code, code) << r.output;
  for (const auto& m : mentions) EXPECT_NE(r.output.find(m), std::string::npos) << "'" << m << "' not in: " << r.output;
  EXPECT_LE(std::count(r.output.begin(), r.output.end(), '\n'), kMaxErrorLines) << r.output;
}

TEST(Errors, MissingConfigFile) {
  expect_error(run(bin("vbagg-train") + " --config /nonexistent/run.yaml"), 2,
               {"/nonexistent/run.yaml", "does not exist"});
}

TEST(Errors, UnknownKeyNamesFileLineAndAllowedKeys) {
  Project p;
  const std::string cfg = p.config("model:\n  kernal: ard\n");
  expect_error(p.train("--config " + cfg), 2,
               {"run.yaml:14", "unknown key 'model.kernal'", "allowed in 'model'", "kernel"});
}

TEST(Errors, WrongTypeNamesTheKey) {
  Project p;
  const std::string cfg = p.config("model:\n  inducing:\n    count: many\n");
  expect_error(p.train("--config " + cfg), 2, {"run.yaml:15", "model.inducing.count must be an integer, got 'many'"});
}

TEST(Errors, UnknownLinkListsAllowedValues) {
  Project p;
  const std::string cfg = p.config("");
  expect_error(p.train("--config " + cfg + " --set model.link=cube"), 2,
               {"model.link", "'cube'", "allowed: auto, exp, square, identity, logit"});
  expect_error(p.train("--config " + cfg + " --set model.link=identity"), 2,
               {"identity", "negative_binomial allows: exp, square"});
}

TEST(Errors, MissingRasterNamesTheFile) {
  Project p;
  fs::remove(p.d + "/rainfall.tif");
  expect_error(p.train("--config " + p.config("") + " --out " + p.d + "/o"), 1, {"rainfall.tif"});
}

// A thousand point features: one line for the reason, and the full list in a file it names.
TEST(Errors, ManyBadUnitsAreOneLineAndAFile) {
  Project p;
  std::vector<test::Feature> points;
  for (int k = 0; k < 1000; ++k)
    points.push_back(
        {"p" + std::to_string(k), 1.0, "POINT(" + std::to_string(34.1 + 0.001 * k) + " " + std::to_string(0.5) + ")"});
  test::write_units(p.d + "/points.gpkg", "GPKG", 4326, points);
  std::string cfg = p.config("");
  {
    std::string text = test::read_text(cfg);
    text.replace(text.find("units.gpkg"), 10, "points.gpkg");
    std::ofstream(cfg) << text;
  }
  const std::string out = p.d + "/o";
  expect_error(p.train("--config " + cfg + " --out " + out), 1,
               {"1000 of 1000 units",
                "1000 units: geometry is a Point, not a polygon; survey points need data.units.point_buffer: 'p0', "
                "'p1', 'p2', 'p3', 'p4' and 995 more",
                out + "/unusable_units.csv"});
  std::ifstream list(out + "/unusable_units.csv");
  std::string line;
  int rows = 0;
  while (std::getline(list, line)) ++rows;
  EXPECT_EQ(rows, 1001);
}

// A covariate that is nodata everywhere is named with its file, not blamed on every unit.
TEST(Errors, AllNodataCovariateIsNamed) {
  Project p;
  test::RasterSpec s;
  s.width = 40;
  s.height = 30;
  s.x0 = 34.0;
  s.y0 = 1.0;
  s.dx = s.dy = 0.05;
  s.nodata = -9999;
  test::write_raster(p.d + "/rainfall.tif", s, {std::vector<double>(40 * 30, -9999)});
  expect_error(p.train("--config " + p.config("") + " --out " + p.d + "/o"), 1,
               {"covariate 'rainfall' ('" + p.d + "/rainfall.tif') has no value at any of the units'"});
}

TEST(Errors, UnwritableOutputFolder) {
  Project p;
  std::ofstream(p.d + "/afile") << "x";
  expect_error(p.train("--config " + p.config("") + " --out " + p.d + "/afile/sub"), 1, {"afile/sub"});
}

TEST(Errors, OutputThatWouldOverwriteAnInputIsRefused) {
  Project p;
  // A covariate named model.yaml in the output folder would be overwritten by the model.
  fs::copy_file(p.d + "/rainfall.tif", p.d + "/model.yaml");
  std::ofstream(p.d + "/run.yaml", std::ios::app) << "";
  const std::string cfg = p.config("");
  std::string text = test::read_text(cfg);
  text.replace(text.find("rainfall.tif"), 12, "model.yaml");
  std::ofstream(cfg) << text;
  expect_error(p.train("--config " + cfg + " --out " + p.d), 2, {"would overwrite the input", "model.yaml"});
}

TEST(Errors, BrokenAndNewerModelFiles) {
  test::TempDir dir;
  std::ofstream(dir / "newer.yaml") << "format: vbagg-model\nversion: 99\n";
  expect_error(run(bin("vbagg-predict") + " --model " + (dir / "newer.yaml") + " --out " + (dir / "o")), 1,
               {"format version 99", "reads up to 1"});
  std::ofstream(dir / "broken.yaml") << "format: vbagg-model\nversion: 1\nmodel: {likelihood: poisson}\n";
  expect_error(run(bin("vbagg-eval") + " --model " + (dir / "broken.yaml")), 1,
               {"broken.yaml", "is broken", "model.link"});
  std::ofstream(dir / "other.yaml") << "a: 1\n";
  expect_error(run(bin("vbagg-eval") + " --model " + (dir / "other.yaml")), 1, {"not a vbagg model file"});
}

// Prediction killed (VBAGG_FAULT, app.hpp) after its strips are written, or after two of its maps
// are finished: whatever stands under a final name is complete, the rest is temporary, and a
// rerun succeeds and leaves nothing stale.
TEST(Errors, KilledPredictionLeavesNoPartialFileAndRerunSucceeds) {
  Project p;
  auto r = p.train("--config " + p.config("model:\n  inducing: {count: 30}\n") + " --out " + p.d + "/fit -q");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string predict = bin("vbagg-predict") + " --model " + p.d + "/fit/model.yaml --out " + p.d + "/maps -q";
  for (const auto& [fault, complete_maps] : std::vector<std::pair<std::string, int>>{{"strip:1", 0}, {"map:2", 2}}) {
    r = run("VBAGG_FAULT=" + fault + " " + predict);
    EXPECT_EQ(r.code, 137) << fault << ": the run should have been killed: " << r.output;
    int maps = 0;
    for (const auto& e : fs::directory_iterator(p.d + "/maps")) {
      const std::string name = e.path().filename().string();
      if (name[0] == '.') continue;  // a killed run's temporary file, cleaned by the next run
      EXPECT_NE(name, "units.csv") << fault;
      ASSERT_EQ(name.substr(name.size() - 4), ".tif") << name;
      io::DatasetPtr ds = io::open_raster(e.path().string());
      EXPECT_NE(ds->GetRasterBand(1)->GetMetadataItem("STATISTICS_MEAN"), nullptr) << name;
      ++maps;
    }
    EXPECT_EQ(maps, complete_maps) << fault;
    fs::remove_all(p.d + "/maps");
  }
  r = run("VBAGG_FAULT=map:2 " + predict);
  ASSERT_EQ(r.code, 137) << r.output;
  r = run(predict);
  ASSERT_EQ(r.code, 0) << r.output;
  for (const auto& e : fs::directory_iterator(p.d + "/maps"))
    EXPECT_EQ(e.path().filename().string().find(".part-"), std::string::npos) << "stale " << e.path();
  EXPECT_TRUE(fs::exists(p.d + "/maps/intensity_mean.tif"));
  EXPECT_TRUE(fs::exists(p.d + "/maps/units.csv"));
}

// Every option of every app appears in its --help with an explanation.
TEST(Help, EveryOptionIsExplained) {
  const std::map<std::string, std::vector<std::string>> options = {
      {"vbagg-train",
       {"--config", "--set", "--out", "--threads", "--markdown-config", "--quiet", "--verbose", "--version"}},
      {"vbagg-predict",
       {"--model", "--config", "--set", "--out", "--quantiles", "--exceedance", "--of", "--co", "--threads",
        "--version"}},
      {"vbagg-eval",
       {"--model", "--config", "--set", "--split", "--truth", "--json", "--report", "--threads", "--version"}},
      {"vbagg-simulate",
       {"--kind", "--out", "--seed", "--size", "--units", "--covariates", "--unit-noise", "--survey-noise",
        "--field-frequencies", "--field-kernel", "--covariate-effects", "--months", "--bags", "--bag-mean", "--bag-sd",
        "--version"}}};
  for (const auto& [app, opts] : options) {
    const auto r = run(bin(app) + " --help");
    EXPECT_EQ(r.code, 0) << app;
    for (const auto& o : opts) {
      const auto at = r.output.find(o);
      ASSERT_NE(at, std::string::npos) << app << " " << o;
      const std::string line = r.output.substr(at, r.output.find('\n', at) - at);
      EXPECT_GT(line.size(), o.size() + 12) << app << ": no explanation for " << o << ": " << line;
    }
  }
}

// Every app names the release, exits 0 and does nothing else.
TEST(Help, EveryAppAnswersVersion) {
  for (const char* app : {"vbagg-train", "vbagg-predict", "vbagg-eval", "vbagg-simulate"}) {
    const auto r = run(bin(app) + " --version");
    EXPECT_EQ(r.code, 0) << app;
    EXPECT_EQ(r.output, "vbagg " VBAGG_VERSION "\n") << app;
  }
}

}  // namespace
}  // namespace vbagg

namespace vbagg {
namespace {

// Training killed after its first epoch, in the middle of the fit, or after model.yaml is written
// but before the rest: no model.yaml or a complete one, and a rerun works. The fits skip the
// point estimates' spread, which took most of their time under the sanitizers.
TEST(Errors, KilledTrainingLeavesNoPartialModel) {
  Project p;
  const std::string cfg = p.config("model:\n  inducing: {count: 60}\n  point_uncertainty: none\n");
  const std::string train =
      bin("vbagg-train") + " --config " + cfg + " --out " + p.d + "/fit -q --set train.epochs=400";
  for (const auto& [fault, model_written] :
       std::vector<std::pair<std::string, bool>>{{"epoch:1", false}, {"epoch:40", false}, {"output:1", true}}) {
    const auto r = run("VBAGG_FAULT=" + fault + " " + train);
    EXPECT_EQ(r.code, 137) << fault << ": " << r.output;
    EXPECT_EQ(fs::exists(p.d + "/fit/model.yaml"), model_written) << fault;
    if (model_written) {
      EXPECT_NO_THROW(io::read_model_file(p.d + "/fit/model.yaml"));
    }
    EXPECT_FALSE(fs::exists(p.d + "/fit/history.csv")) << fault;
  }
  const auto r = run(train);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NO_THROW(io::read_model_file(p.d + "/fit/model.yaml"));
  EXPECT_TRUE(fs::exists(p.d + "/fit/history.csv"));
  for (const auto& e : fs::directory_iterator(p.d + "/fit"))
    EXPECT_EQ(e.path().filename().string().find(".part-"), std::string::npos) << "stale " << e.path();
}

}  // namespace
}  // namespace vbagg

namespace vbagg {
namespace {

TEST(Errors, PredictionThatWouldOverwriteAnInputIsRefused) {
  Project p;
  auto r = p.train("--config " + p.config("model:\n  inducing: {count: 10}\n") + " --out " + p.d + "/fit -q");
  ASSERT_EQ(r.code, 0) << r.output;
  // A covariate stored as latent_mean.tif in the folder the maps would go to.
  fs::create_directories(p.d + "/maps");
  fs::copy_file(p.d + "/rainfall.tif", p.d + "/maps/latent_mean.tif");
  std::ofstream(p.d + "/other.yaml") << "data:\n  covariates:\n    - path: temperature.tif\n"
                                     << "    - {path: maps/latent_mean.tif, name: rainfall}\n"
                                     << "  population: {path: population.tif}\n"
                                     << "  units: {path: units.gpkg, id_field: ID, response_field: cases}\n";
  const auto before = fs::file_size(p.d + "/maps/latent_mean.tif");
  expect_error(run(bin("vbagg-predict") + " --model " + p.d + "/fit/model.yaml --config " + p.d + "/other.yaml --out " +
                   p.d + "/maps"),
               2, {"would overwrite the input", "latent_mean.tif"});
  EXPECT_EQ(fs::file_size(p.d + "/maps/latent_mean.tif"), before);
}

}  // namespace
}  // namespace vbagg
