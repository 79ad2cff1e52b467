// Several data sources in one fit (data.sources): the simulated country's units and provinces,
// and its survey clusters beside the units' survey, through train, predict and eval; and the
// configuration errors of a source list.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../io/fixtures.hpp"
#include "cli/config.hpp"
#include "cli/eval.hpp"
#include "cli/predict.hpp"
#include "cli/simulate.hpp"
#include "cli/train.hpp"
#include "io/gdal_handles.hpp"
#include "io/model_file.hpp"

namespace vbagg::cli {
namespace {

// run_eval refuses `args` with a ConfigError whose message contains `mention`.
void expect_eval_refused(const EvalArgs& args, const std::string& mention) {
  try {
    run_eval(args);
    ADD_FAILURE() << "accepted; expected an error mentioning \"" << mention << "\"";
  } catch (const ConfigError& err) {
    EXPECT_NE(std::string(err.what()).find(mention), std::string::npos) << err.what();
  }
}

class Sources : public ::testing::Test {
 protected:
  static inline test::TempDir* dir = nullptr;
  static void SetUpTestSuite() {
    spdlog::set_level(spdlog::level::warn);
    dir = new test::TempDir();
    CountryOptions o;
    o.width = 48;
    o.height = 36;
    o.units = 24;
    o.seed = 5;
    simulate_country(*dir / "data", o);
  }
  static void TearDownTestSuite() {
    delete dir;
    dir = nullptr;
  }
  static std::string path(const std::string& name) { return *dir / name; }

  // A configuration beside the data: the country's rasters and the given data.sources lines.
  static std::string config(const std::string& name, const std::string& sources, const std::string& more = "") {
    std::ofstream(path("data/" + name)) << "data:\n  covariates: [temperature.tif, rainfall.tif]\n"
                                        << "  population: {path: population.tif}\n"
                                        << sources << more;
    return path("data/" + name);
  }

  static std::string error_of(const std::string& config_path) {
    try {
      TrainArgs t;
      t.config_path = config_path;
      t.out = path("refused");
      run_train(t);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  }
};

TEST_F(Sources, UnitsAndProvincesInOneFit) {
  TrainArgs t;
  t.config_path = path("data/counts.yaml");
  t.out = path("fit_counts");
  t.sets = {"train.epochs=60", "train.holdout.fraction=0.25"};
  t.threads = 2;
  run_train(t);
  const io::ModelFile file = io::read_model_file(t.out + "/model.yaml");
  ASSERT_EQ(file.model.spec.num_sources(), 2);
  EXPECT_EQ(file.model.spec.source_name, "units");
  EXPECT_EQ(file.model.spec.more_sources[0].name, "provinces");
  EXPECT_EQ(file.model.more_sources.size(), 1u);
  // Both sources are held out in proportion; provinces' ids carry their source's name.
  size_t provinces = 0;
  for (const auto& id : file.train_units) provinces += id.rfind("provinces:", 0) == 0;
  for (const auto& id : file.holdout_units) provinces += id.rfind("provinces:", 0) == 0;
  EXPECT_EQ(provinces, 4u);  // max(2, 24 / 6)
  bool held_province = false;
  for (const auto& id : file.holdout_units) held_province |= id.rfind("provinces:", 0) == 0;
  EXPECT_TRUE(held_province);

  PredictArgs p;
  p.model_path = t.out + "/model.yaml";
  p.out = path("maps_counts");
  run_predict(p);
  const std::string csv = test::read_text(p.out + "/units.csv");
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "unit,source,split,observed,predicted,lower_0.025,upper_0.975,population,pixels");
  EXPECT_NE(csv.find("\nprovinces:P01,provinces,"), std::string::npos);
  EXPECT_NE(csv.find("\nU001,units,"), std::string::npos);
  io::DatasetPtr gpkg = io::open_vector(p.out + "/units.gpkg");
  ASSERT_NE(gpkg->GetLayerByName("units"), nullptr);
  ASSERT_NE(gpkg->GetLayerByName("provinces"), nullptr);
  EXPECT_EQ(gpkg->GetLayerByName("provinces")->GetFeatureCount(), 4);

  EvalArgs e;
  e.model_path = t.out + "/model.yaml";
  e.split = "all";
  e.truth = path("data/truth_intensity.tif");
  const Metrics r = run_eval(e).metrics;
  EXPECT_EQ(r.source, "units");
  EXPECT_EQ(r.units, 24);
  ASSERT_EQ(r.more_sources.size(), 1u);
  EXPECT_EQ(r.more_sources[0].source, "provinces");
  EXPECT_EQ(r.more_sources[0].units, 4);
  // Each source beats its own constant baseline.
  EXPECT_LT(r.bag_nll_mean, r.baseline_bag_nll_mean);
  EXPECT_LT(r.more_sources[0].bag_nll_mean, r.more_sources[0].baseline_bag_nll_mean);
  EXPECT_GT(r.pixel_correlation, 0.9);
  const std::string json = metrics_json(r);
  EXPECT_NE(json.find("\"more_sources\": ["), std::string::npos);
  EXPECT_NE(json.find("\"source\": \"provinces\""), std::string::npos);
}

TEST_F(Sources, CrossValidationPoolsEachSource) {
  TrainArgs t;
  t.config_path = path("data/counts.yaml");
  t.out = path("fit_counts_cv");
  t.sets = {"train.epochs=30"};
  t.threads = 2;
  run_train(t);
  EvalArgs e;
  e.model_path = t.out + "/model.yaml";
  e.folds = 2;
  e.json = path("cv.json");
  const EvalResult r = run_eval(e);
  // Every unit of every source is held out once.
  EXPECT_EQ(r.metrics.units, 24);
  ASSERT_EQ(r.metrics.more_sources.size(), 1u);
  EXPECT_EQ(r.metrics.more_sources[0].source, "provinces");
  EXPECT_EQ(r.metrics.more_sources[0].units, 4);
  EXPECT_EQ(r.metrics.more_sources[0].count_coverage.size(), r.metrics.levels.size());
  EXPECT_NE(r.table.find("source 'provinces' (4 units held out)"), std::string::npos) << r.table;
  EXPECT_NE(test::read_text(e.json).find("\"more_sources\": ["), std::string::npos);
  // The units place the blocks: each unit is held out in the fold the units' fit alone holds it
  // out in, whatever the provinces' centroids.
  TrainArgs alone = t;
  alone.config_path = path("data/data.yaml");
  alone.out = path("fit_units_cv");
  run_train(alone);
  EvalArgs ea = e;
  ea.model_path = alone.out + "/model.yaml";
  ea.json.clear();
  const Metrics units_alone = run_eval(ea).metrics;
  ASSERT_EQ(units_alone.unit_ids, r.metrics.unit_ids);
  EXPECT_EQ(units_alone.fold, r.metrics.fold);
  EXPECT_GT(std::count(r.metrics.fold.begin(), r.metrics.fold.end(), 0), 0);
  EXPECT_GT(std::count(r.metrics.fold.begin(), r.metrics.fold.end(), 1), 0);
  // --cv-blocks names the source that places them: the provinces, each fold holding some out.
  EvalArgs by_provinces = e;
  by_provinces.json.clear();
  by_provinces.cv_blocks = "units";
  EXPECT_EQ(run_eval(by_provinces).metrics.fold, r.metrics.fold);
  by_provinces.cv_blocks = "provinces";
  const Metrics p = run_eval(by_provinces).metrics;
  ASSERT_EQ(p.more_sources.size(), 1u);
  const std::vector<int>& province_fold = p.more_sources[0].fold;
  ASSERT_EQ(province_fold.size(), 4u);
  EXPECT_GT(std::count(province_fold.begin(), province_fold.end(), 0), 0);
  EXPECT_GT(std::count(province_fold.begin(), province_fold.end(), 1), 0);
  EXPECT_EQ(p.units, 24);
  by_provinces.cv_blocks = "districts";  // an unknown source
  expect_eval_refused(by_provinces, "its sources: 'units', 'provinces'");
  by_provinces.cv_blocks = "provinces";
  by_provinces.cv_by = "time";
  EXPECT_THROW(run_eval(by_provinces), ConfigError);
  ea.cv_blocks = "units";
  EXPECT_THROW(run_eval(ea), ConfigError);  // one source places the blocks anyway
}

TEST_F(Sources, SurveyClustersAndTheUnitsSurvey) {
  TrainArgs t;
  t.config_path = path("data/survey.yaml");
  t.out = path("fit_survey");
  t.sets = {"train.epochs=60"};
  t.threads = 2;
  run_train(t);
  const io::ModelFile file = io::read_model_file(t.out + "/model.yaml");
  ASSERT_EQ(file.model.spec.num_sources(), 2);
  EXPECT_EQ(file.model.spec.likelihood, LikelihoodKind::binomial);
  EXPECT_EQ(file.model.spec.more_sources[0].likelihood, LikelihoodKind::binomial);
  EvalArgs e;
  e.model_path = t.out + "/model.yaml";
  e.split = "all";
  e.truth = path("data/truth_prevalence.tif");
  const Metrics r = run_eval(e).metrics;
  EXPECT_EQ(r.source, "clusters");
  EXPECT_EQ(r.pixels, 48);  // one pixel per cluster
  EXPECT_GT(r.pixel_correlation, 0.8);
}

TEST_F(Sources, IncidenceAndPrevalenceOnSharedLatentFields) {
  // tasks.yaml: units and provinces observe incidence, the survey clusters prevalence.
  const std::string tasks = test::read_text(path("data/tasks.yaml"));
  TrainArgs t;
  t.config_path = config("tasks2.yaml", tasks.substr(tasks.find("  sources:")), "model: {latents: 2}\n");
  t.out = path("fit_tasks");
  // A short fit: point fixed effects at constant steps. The defaults for several tasks (variational
  // fixed effects annealed over 1000 epochs, settings_test) are measured by tasks.sh.
  t.sets = {"train.epochs=40", "model.fixed_effects=point", "train.schedule=constant"};
  t.threads = 2;
  run_train(t);
  const io::ModelFile file = io::read_model_file(t.out + "/model.yaml");
  const Model& m = file.model;
  EXPECT_EQ(m.spec.tasks, (std::vector<std::string>{"incidence", "prevalence"}));
  EXPECT_EQ(m.spec.latents, 2);
  EXPECT_EQ(m.num_latents(), 2);
  EXPECT_EQ(m.mixing.rows(), 2);
  EXPECT_EQ(m.spec.source(2).task, 1);
  EXPECT_EQ(m.spec.source(2).link, Link::logit);
  EXPECT_EQ(m.spec.source(1).link, Link::exp);
  // The file keeps every parameter: written again, it reads back the same.
  io::write_model_file(path("tasks_again.yaml"), file);
  EXPECT_EQ(io::read_model_file(path("tasks_again.yaml")).model.pack(), m.pack());

  PredictArgs p;
  p.model_path = t.out + "/model.yaml";
  p.out = path("maps_tasks");
  run_predict(p);
  for (const std::string task : {"incidence", "prevalence"}) {
    SCOPED_TRACE(task);
    io::DatasetPtr ds = io::open_raster(p.out + "/" + task + "_intensity_mean.tif");
    EXPECT_STREQ(ds->GetMetadataItem("VBAGG_TASK"), task.c_str());
    const std::string corr = ds->GetMetadataItem("VBAGG_TASK_CORRELATIONS");
    EXPECT_EQ(corr.rfind("incidence~prevalence=", 0), 0u) << corr;
    EXPECT_TRUE(std::filesystem::exists(p.out + "/" + task + "_intensity_q0.975.tif"));
  }
  EXPECT_FALSE(std::filesystem::exists(p.out + "/intensity_mean.tif"));
  // Prevalence maps hold proportions; incidence maps rates per person.
  std::vector<float> prevalence, incidence;
  for (auto [file_name, values] : {std::pair{"prevalence_intensity_mean.tif", &prevalence},
                                   std::pair{"incidence_intensity_mean.tif", &incidence}}) {
    io::DatasetPtr ds = io::open_raster(p.out + "/" + file_name);
    GDALRasterBand* band = ds->GetRasterBand(1);
    values->resize(static_cast<size_t>(band->GetXSize()) * static_cast<size_t>(band->GetYSize()));
    ASSERT_EQ(band->RasterIO(GF_Read, 0, 0, band->GetXSize(), band->GetYSize(), values->data(), band->GetXSize(),
                             band->GetYSize(), GDT_Float32, 0, 0),
              CE_None);
  }
  double prev_mean = 0, inc_mean = 0;
  int n = 0;
  for (size_t i = 0; i < prevalence.size(); ++i)
    if (prevalence[i] != -9999.0f && incidence[i] != -9999.0f) {  // the maps' nodata
      EXPECT_GT(prevalence[i], 0.0f);
      EXPECT_LT(prevalence[i], 1.0f);
      prev_mean += prevalence[i];
      inc_mean += incidence[i];
      ++n;
    }
  ASSERT_GT(n, 0);
  EXPECT_GT(prev_mean / n, 2 * inc_mean / n);  // the simulated prevalence is several times the incidence

  // Each task's truth is compared with its own predictions.
  EvalArgs e;
  e.model_path = t.out + "/model.yaml";
  e.split = "all";
  e.truth = path("data/truth_prevalence.tif");
  e.truth_task = "prevalence";
  const Metrics prev = run_eval(e).metrics;
  EXPECT_GT(prev.pixel_correlation, 0.8);
  EXPECT_TRUE(std::isnan(prev.baseline_pixel_mse));  // the units' rate is no prevalence
  e.truth = path("data/truth_intensity.tif");
  e.truth_task = "";
  const Metrics inc = run_eval(e).metrics;
  EXPECT_GT(inc.pixel_correlation, 0.8);
  EXPECT_LT(inc.pixel_mse, inc.baseline_pixel_mse);
  e.truth_task = "rainfall";  // an unknown task
  expect_eval_refused(e, "incidence, prevalence");
}

TEST_F(Sources, EverySourceUsesItsOwnCovariatesWhenItHasThem) {
  // The provinces' "other year": the same covariate names from other files (here, copies).
  for (const char* f : {"temperature", "rainfall"})
    std::filesystem::copy_file(path(std::string("data/") + f + ".tif"), path(std::string("data/other_") + f + ".tif"),
                               std::filesystem::copy_options::overwrite_existing);
  const std::string own = config("own_covariates.yaml",
                                 "  sources:\n"
                                 "    - {name: units, path: units.gpkg, id_field: ID, response_field: cases}\n"
                                 "    - name: provinces\n      path: provinces.gpkg\n      id_field: ID\n"
                                 "      response_field: cases\n"
                                 "      covariates: [{path: other_temperature.tif, name: temperature},\n"
                                 "                   {path: other_rainfall.tif, name: rainfall}]\n",
                                 "train: {epochs: 5}\n");
  TrainArgs t;
  t.config_path = own;
  t.out = path("fit_own");
  run_train(t);
  EXPECT_EQ(io::read_model_file(t.out + "/model.yaml").model.spec.num_sources(), 2);
  // Other covariate names are refused, naming the source.
  const std::string other = config("other_names.yaml",
                                   "  sources:\n"
                                   "    - {name: units, path: units.gpkg, id_field: ID, response_field: cases}\n"
                                   "    - name: provinces\n      path: provinces.gpkg\n      id_field: ID\n"
                                   "      response_field: cases\n"
                                   "      covariates: [other_temperature.tif, other_rainfall.tif]\n");
  EXPECT_NE(error_of(other).find("source 'provinces' has the covariates"), std::string::npos) << error_of(other);
}

TEST_F(Sources, ConfigurationErrorsNameTheSource) {
  const std::string units = "    - {name: units, path: units.gpkg, id_field: ID, response_field: cases}\n";
  auto refused = [&](const std::string& name, const std::string& sources, const std::string& expected,
                     const std::string& more = "") {
    const std::string message = error_of(config(name, sources, more));
    EXPECT_NE(message.find(expected), std::string::npos) << name << ": " << message;
  };
  refused("both.yaml", "  units: {path: units.gpkg, id_field: ID, response_field: cases}\n  sources:\n" + units,
          "not both");
  refused("unnamed.yaml",
          "  sources:\n" + units + "    - {path: provinces.gpkg, id_field: ID, response_field: cases}\n",
          "data.sources[1].name is required");
  refused("twice.yaml",
          "  sources:\n" + units + "    - {name: units, path: provinces.gpkg, id_field: ID, response_field: cases}\n",
          "'units' is used by an earlier source");
  refused("unknown.yaml", "  sources:\n" + units + "    - {name: p, path: provinces.gpkg, id_field: ID, cases: x}\n",
          "unknown key 'data.sources[1].cases'");
  refused("missing.yaml", "  sources:\n" + units + "    - {name: p, path: provinces.gpkg, id_field: ID}\n",
          "data.sources[1].response_field is required");
  refused("likelihood.yaml",
          "  sources:\n" + units +
              "    - {name: p, path: provinces.gpkg, id_field: ID, response_field: cases, "
              "likelihood: nonsense}\n",
          "'nonsense' is not allowed");
  // A prevalence survey beside counts needs another link, so a task of its own.
  refused("mixed.yaml",
          "  sources:\n" + units +
              "    - {name: survey, path: units.gpkg, id_field: ID, response_field: positive, trials_field: tested}\n",
          "a task has one link");
  // Tasks mix the latent fields of a variational model.
  refused("tasks_nystrom.yaml",
          "  sources:\n" + units +
              "    - {name: survey, path: units.gpkg, id_field: ID, response_field: positive, trials_field: tested, "
              "task: prevalence}\n",
          "shared latent fields need a variational model", "model: {kind: nystrom}\n");
  refused("latents.yaml", "  sources:\n" + units, "model.latents", "model: {latents: 0}\n");
  refused("first_covariates.yaml",
          "  sources:\n    - {name: units, path: units.gpkg, id_field: ID, response_field: cases, covariates: "
          "[temperature.tif]}\n    - {name: p, path: provinces.gpkg, id_field: ID, response_field: cases}\n",
          "data.sources[0] is the primary source");
  refused("constant.yaml",
          "  sources:\n" + units + "    - {name: p, path: provinces.gpkg, id_field: ID, response_field: cases}\n",
          "model.kind constant is a rate per unit of one source", "model: {kind: constant}\n");
}

TEST_F(Sources, OneSourceListIsTheSingleSourceRun) {
  // data.sources with one entry reads like data.units: no source column, one "units" layer.
  const std::string one =
      config("one.yaml", "  sources:\n    - {path: units.gpkg, id_field: ID, response_field: cases}\n",
             "train: {epochs: 5}\n");
  TrainArgs t;
  t.config_path = one;
  t.out = path("fit_one");
  run_train(t);
  const io::ModelFile file = io::read_model_file(t.out + "/model.yaml");
  EXPECT_EQ(file.model.spec.num_sources(), 1);
  EXPECT_TRUE(file.model.spec.source_name.empty());
  PredictArgs p;
  p.model_path = t.out + "/model.yaml";
  p.out = path("maps_one");
  run_predict(p);
  const std::string csv = test::read_text(p.out + "/units.csv");
  EXPECT_EQ(csv.substr(0, csv.find(',', 5)), "unit,split");
  // The saved configuration reads back (no data.units defaults beside data.sources).
  EXPECT_NO_THROW(Config::load(t.out + "/run.resolved.yaml", {}));
}

}  // namespace
}  // namespace vbagg::cli
