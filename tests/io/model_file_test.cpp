// The model file: exact round trip of every number, clear failures for broken or newer files.
#include "io/model_file.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "core/fit.hpp"
#include "fixtures.hpp"

namespace vbagg {
namespace {

using test::read_text;

io::ModelFile sample_file() {
  io::ModelFile f;
  Model& m = f.model;
  m.spec.likelihood = LikelihoodKind::normal;
  m.spec.link = Link::identity;
  m.spec.covariance = CovarianceMode::exact;
  m.spec.aggregation = Aggregation::mean;
  m.spec.learn_inducing = true;
  m.kernel = make_kernel("ard", "matern52", 2, 2);
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal;
  Vector th = m.kernel.params();
  for (Index i = 0; i < th.size(); ++i) th[i] = normal(rng) / 3.0;
  m.kernel.set_params(th);
  const Index M = 7;
  m.inducing = Matrix::NullaryExpr(4, M, [&](Index, Index) { return normal(rng) * 1e3 / 7.0; });
  m.q_mean = Vector::NullaryExpr(M, [&](Index) { return normal(rng); });
  m.q_chol = Matrix::Zero(M, M);
  for (Index j = 0; j < M; ++j)
    for (Index i = j; i < M; ++i) m.q_chol(i, j) = i == j ? std::exp(normal(rng)) : normal(rng) / 11.0;
  m.mean = 1.0 / 3.0;
  m.likelihood_params = Vector::Constant(1, -std::sqrt(2.0));
  m.jitter = 1e-6;
  f.covariates = {"lst day", "rain, mm"};
  f.standardization.mean = (Vector(2) << 0.1, 1e-17).finished();
  f.standardization.sd = (Vector(2) << 3.0, 7e20).finished();
  f.coordinates = 2;
  f.grid.width = 10;
  f.grid.height = 20;
  f.grid.transform = {0.1, 0.3, 0, -7.7, 0, -0.3};
  f.grid.crs_wkt = test::wkt_of_epsg(32737);
  f.train_units = {"a", "b: c", "007"};
  f.holdout_units = {"yes", "-1"};
  f.training = {12, "converged", -1234.5678901234567, NAN, 9.87};
  f.config = YAML::Load("data: {grid: population}\nmodel: {link: identity}");
  return f;
}

// sample_file() as a count model: exp link, nystrom covariance, the delta method.
io::ModelFile count_file(LikelihoodKind likelihood) {
  io::ModelFile f = sample_file();
  ModelSpec& spec = f.model.spec;
  spec.likelihood = likelihood;
  spec.link = Link::exp;
  spec.covariance = CovarianceMode::nystrom;
  spec.aggregation = Aggregation::sum;
  spec.expectation = Expectation::delta;
  return f;
}

// A negative binomial with the delta method, a linear mean and a unit effect: its dispersion,
// expectation, coefficients, the effect's spread and its training units come back exactly.
TEST(ModelFile, RoundTripsLikelihoodParametersAndLinearMean) {
  test::TempDir dir;
  io::ModelFile f = sample_file();
  f.model.spec.likelihood = LikelihoodKind::negative_binomial;
  f.model.spec.link = Link::exp;
  f.model.spec.aggregation = Aggregation::sum;
  f.model.spec.expectation = Expectation::delta;
  f.model.spec.linear_inputs = 2;
  f.model.spec.linear_prior_sd = 0.3;
  f.model.linear_mean = (Vector(2) << -0.1 / 3.0, 2.0 / 7.0).finished();
  f.model.likelihood_params = Vector::Constant(1, std::log(123.456));
  f.model.spec.unit_effect = true;
  f.model.unit_effect.log_sd = std::log(0.7);
  f.model.unit_effect.units = {"north: 1", "0042", "\u00e9st"};
  f.model.spec.unit_effect_prior_rate = -std::log(0.01) / 0.1;
  f.model.spec.kernel_prior = {0, std::log(0.27), std::log(281.5), 0.8};
  io::write_model_file(dir / "model.yaml", f);
  const io::ModelFile g = io::read_model_file(dir / "model.yaml");
  EXPECT_EQ(g.model.spec.likelihood, LikelihoodKind::negative_binomial);
  EXPECT_EQ(g.model.spec.expectation, Expectation::delta);
  EXPECT_EQ(g.model.spec.linear_inputs, 2);
  EXPECT_EQ(g.model.spec.linear_prior_sd, 0.3);
  EXPECT_EQ(g.model.linear_mean, f.model.linear_mean);
  EXPECT_EQ(g.model.likelihood_params, f.model.likelihood_params);
  EXPECT_TRUE(g.model.spec.unit_effect);
  EXPECT_EQ(g.model.unit_effect.units, f.model.unit_effect.units);
  EXPECT_EQ(g.model.spec.unit_effect_prior_rate, f.model.spec.unit_effect_prior_rate);
  EXPECT_EQ(g.model.spec.kernel_prior.part, 0);
  EXPECT_EQ(g.model.spec.kernel_prior.log_variance, f.model.spec.kernel_prior.log_variance);
  EXPECT_EQ(g.model.spec.kernel_prior.log_lengthscale, f.model.spec.kernel_prior.log_lengthscale);
  EXPECT_EQ(g.model.spec.kernel_prior.sd, 0.8);
  EXPECT_EQ(g.model.pack(), f.model.pack());
  EXPECT_EQ(g.model.param_names(), f.model.param_names());
  EXPECT_FALSE(g.model.spec.unit_effect_shared);

  // An effect shared by a unit's periods, with each training unit's effect as the fit left it.
  f.model.spec.covariance = CovarianceMode::nystrom;
  f.model.spec.unit_effect_shared = true;
  f.model.unit_effect.posterior = {{"north: 1", {-0.1 / 3.0, 0.02}}, {"\u00e9st", {2.0 / 7.0, 1.0 / 3.0}}};
  io::write_model_file(dir / "shared.yaml", f);
  const io::ModelFile h = io::read_model_file(dir / "shared.yaml");
  EXPECT_TRUE(h.model.spec.unit_effect_shared);
  ASSERT_EQ(h.model.unit_effect.posterior.size(), 2u);
  for (const auto& [unit, u] : f.model.unit_effect.posterior) {
    EXPECT_EQ(h.model.unit_effect.posterior.at(unit).mean, u.mean) << unit;
    EXPECT_EQ(h.model.unit_effect.posterior.at(unit).var, u.var) << unit;
  }
  std::string text = read_text(dir / "shared.yaml");
  text.replace(text.find("0.02]"), 5, "-0.02]");
  std::ofstream(dir / "broken.yaml") << text;
  try {
    io::read_model_file(dir / "broken.yaml");
    ADD_FAILURE() << "a negative variance was read";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("variance that is not positive"), std::string::npos) << e.what();
  }

  // A unit's loading on the field's draws (one entry per entry of q) and its shift come back
  // exactly; a loading of another length is a broken file that names the unit.
  UnitEffectMoments& moving = f.model.unit_effect.posterior.at("north: 1");
  moving.shift = 1.0 / 3.0;
  moving.loading = Vector::LinSpaced(f.model.num_q(), -0.7, 0.3) / 7.0;
  io::write_model_file(dir / "loaded.yaml", f);
  const io::ModelFile l = io::read_model_file(dir / "loaded.yaml");
  EXPECT_EQ(l.model.unit_effect.posterior.at("north: 1").shift, moving.shift);
  EXPECT_EQ(l.model.unit_effect.posterior.at("north: 1").loading, moving.loading);
  EXPECT_EQ(l.model.unit_effect.posterior.at("\u00e9st").loading.size(), 0);
  moving.loading.conservativeResize(f.model.num_q() - 1);
  io::write_model_file(dir / "short.yaml", f);
  try {
    io::read_model_file(dir / "short.yaml");
    ADD_FAILURE() << "a loading of the wrong length was read";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("unit_effect.posterior.north: 1' has a loading of"), std::string::npos)
        << e.what();
  }
}

// A joint fit of three sources: each source's likelihood, expectation, parameters and unit effect
// come back, and the first source's stay where a one-source file keeps them.
TEST(ModelFile, RoundTripsEverySource) {
  test::TempDir dir;
  io::ModelFile f = count_file(LikelihoodKind::negative_binomial);
  Model& m = f.model;
  m.spec.unit_effect = true;
  m.spec.source_name = "districts";
  m.likelihood_params = Vector::Constant(1, std::log(40.0));
  m.unit_effect = {std::log(0.3), {"D1", "D2"}, {}};
  m.spec.more_sources = {{"provinces", LikelihoodKind::negative_binomial, Expectation::delta, Aggregation::sum, true},
                         {"indicator", LikelihoodKind::exponential, Expectation::bound, Aggregation::sum, false}};
  m.more_sources = {{Vector::Constant(1, std::log(7.5)), {std::log(0.9), {"provinces:P1"}, {}}}, {Vector(), {}}};
  io::write_model_file(dir / "model.yaml", f);
  const io::ModelFile g = io::read_model_file(dir / "model.yaml");
  ASSERT_EQ(g.model.spec.num_sources(), 3);
  EXPECT_EQ(g.model.spec.source_name, "districts");
  EXPECT_EQ(g.model.spec.more_sources[0].name, "provinces");
  EXPECT_TRUE(g.model.spec.more_sources[0].unit_effect);
  EXPECT_EQ(g.model.spec.more_sources[1].likelihood, LikelihoodKind::exponential);
  EXPECT_EQ(g.model.spec.more_sources[1].expectation, Expectation::bound);
  EXPECT_FALSE(g.model.spec.more_sources[1].unit_effect);
  EXPECT_EQ(g.model.more_sources[0].unit_effect.units, std::vector<std::string>{"provinces:P1"});
  EXPECT_EQ(g.model.unit_effect.units, m.unit_effect.units);
  EXPECT_EQ(g.model.pack(), m.pack());
  EXPECT_EQ(g.model.param_names(), m.param_names());
  // A source named twice is a broken file.
  std::string text = read_text(dir / "model.yaml");
  text.replace(text.find("source: indicator"), 17, "source: provinces");
  EXPECT_THROW(io::parse_model_file(text, "m.yaml"), DataError);
}

// Shared latent fields: the tasks, each source's task and link, the further latents' kernels, the
// split of the inducing inputs, the mixing weights, the task intercepts and every task's linear mean
// come back exactly; a split that does not add up is refused by name.
TEST(ModelFile, RoundTripsSharedLatentFields) {
  test::TempDir dir;
  io::ModelFile f = count_file(LikelihoodKind::poisson);
  Model& m = f.model;
  m.spec.source_name = "districts";
  m.spec.tasks = {"incidence", "prevalence"};
  m.spec.latents = 2;
  SourceSpec survey{"survey", LikelihoodKind::binomial, Expectation::sample, Aggregation::sum, false, Link::logit, 1};
  m.spec.more_sources = {survey};
  m.likelihood_params = Vector();
  m.more_sources = {{Vector(), {}}};
  Kernel k = m.kernel;
  k.parts()[0].log_variance = 0.25;
  m.more_kernels = {k};
  m.inducing_sizes = {4, 3};
  m.mixing = (Matrix(2, 2) << 1.0 / 3.0, -0.5, 0.75, 1e-3).finished();
  m.task_means = Vector::Constant(1, -1.0 / 7.0);
  m.spec.linear_inputs = 2;
  m.linear_mean = (Vector(4) << 0.1, -0.2, 0.3, 1.0 / 9.0).finished();
  io::write_model_file(dir / "model.yaml", f);
  const io::ModelFile g = io::read_model_file(dir / "model.yaml");
  EXPECT_EQ(g.model.spec.tasks, m.spec.tasks);
  EXPECT_EQ(g.model.spec.latents, 2);
  EXPECT_EQ(g.model.spec.more_sources[0].task, 1);
  EXPECT_EQ(g.model.spec.more_sources[0].link, Link::logit);
  EXPECT_EQ(g.model.inducing_sizes, m.inducing_sizes);
  EXPECT_EQ(g.model.more_kernels[0].params(), k.params());
  EXPECT_EQ(g.model.pack(), m.pack());
  EXPECT_EQ(g.model.param_names(), m.param_names());
  std::string text = read_text(dir / "model.yaml");
  const std::string split = "latent_inducing: [4, 3]";
  ASSERT_NE(text.find(split), std::string::npos) << text;
  text.replace(text.find(split), split.size(), "latent_inducing: [4, 4]");
  try {
    io::parse_model_file(text, "m.yaml");
    ADD_FAILURE() << "a wrong split was accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("latent_inducing"), std::string::npos) << e.what();
  }
}

// Variational fixed effects: q carries 1 + d more entries, and the file says how many; a file whose
// q does not match its fixed effects is refused by name.
TEST(ModelFile, RoundTripsVariationalFixedEffects) {
  test::TempDir dir;
  io::ModelFile f = sample_file();
  Model& m = f.model;
  m.spec.fixed_effects = FixedEffects::variational;
  m.spec.linear_inputs = 2;
  m.spec.linear_prior_sd = 0.6;
  const Index Mq = m.num_q();
  ASSERT_EQ(Mq, m.num_inducing() + 3);
  m.q_mean = Vector::LinSpaced(Mq, -1.0, 1.0 / 3.0);
  m.q_chol = Matrix::Identity(Mq, Mq) / 7.0;
  m.q_chol(Mq - 1, 0) = 0.1;
  io::write_model_file(dir / "model.yaml", f);
  const io::ModelFile g = io::read_model_file(dir / "model.yaml");
  EXPECT_EQ(g.model.spec.fixed_effects, FixedEffects::variational);
  EXPECT_EQ(g.model.spec.linear_inputs, 2);
  EXPECT_EQ(g.model.spec.linear_prior_sd, 0.6);
  EXPECT_EQ(g.model.linear_mean.size(), 0);
  EXPECT_EQ(g.model.pack(), f.model.pack());

  std::string text = read_text(dir / "model.yaml");
  const std::string key = "linear_inputs: 2";
  ASSERT_NE(text.find(key), std::string::npos);
  text.replace(text.find(key), key.size(), "linear_inputs: 3");
  std::ofstream(dir / "bad.yaml") << text;
  try {
    io::read_model_file(dir / "bad.yaml");
    FAIL() << "a q of the wrong size was read";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("q_mean"), std::string::npos) << e.what();
  }
}

bool bit_equal(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), sizeof(double) * a.size()) == 0;
}

// A good model file's text with one edit (the first `from` replaced by `to`) must be refused with
// a DataError mentioning `mention`.
struct ModelFileEdits {
  const test::TempDir& dir;
  std::string good;
  void operator()(const std::string& from, const std::string& to, const std::string& mention) const {
    std::string text = good;
    const auto at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    std::ofstream(dir / "bad.yaml") << text;
    try {
      io::read_model_file(dir / "bad.yaml");
      FAIL() << "accepted a file with " << to;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(mention), std::string::npos) << e.what();
    }
  }
};

// The point estimates' spread: its directions to the bit, its sds by name, and a direction of the
// wrong length named.
TEST(ModelFile, RoundTripsThePointSpread) {
  test::TempDir dir;
  io::ModelFile f = count_file(LikelihoodKind::negative_binomial);
  Model& m = f.model;
  m.likelihood_params = Vector::Constant(1, 2.5);
  const Index F = m.num_params() - m.num_q() - m.num_q() * (m.num_q() + 1) / 2 - 1 - m.inducing.size();
  ASSERT_EQ(F, 1 + m.kernel.num_params());
  std::mt19937_64 rng(9);
  std::normal_distribution<double> normal;
  m.spread.field = Matrix::NullaryExpr(F, 3, [&](Index, Index) { return normal(rng) / 3.0; });
  m.spread.q_mean = Matrix::NullaryExpr(m.num_q(), 3, [&](Index, Index) { return normal(rng) / 7.0; });
  m.spread.names = {"mean", "log_dispersion"};
  m.spread.sd = (Vector(2) << 0.125, 1.0 / 3.0).finished();
  io::write_model_file(dir / "model.yaml", f);
  const io::ModelFile g = io::read_model_file(dir / "model.yaml");
  EXPECT_TRUE(bit_equal(g.model.spread.field, m.spread.field));
  EXPECT_TRUE(bit_equal(g.model.spread.q_mean, m.spread.q_mean));
  EXPECT_EQ(g.model.spread.names, m.spread.names);
  EXPECT_TRUE(bit_equal(g.model.spread.sd, m.spread.sd));
  // A file without one reads as no spread.
  io::ModelFile plain = f;
  plain.model.spread = PointSpread();
  io::write_model_file(dir / "plain.yaml", plain);
  EXPECT_EQ(read_text(dir / "plain.yaml").find("point_spread"), std::string::npos);
  EXPECT_EQ(io::read_model_file(dir / "plain.yaml").model.spread.directions(), 0);

  const ModelFileEdits expect_broken{dir, read_text(dir / "model.yaml")};
  expect_broken("    field:\n      - [", "    field:\n      - [0.5, ", "model.point_spread.field[0]");
}

TEST(ModelFile, RoundTripsExactly) {
  test::TempDir dir;
  const io::ModelFile f = sample_file();
  io::write_model_file(dir / "model.yaml", f);
  const io::ModelFile g = io::read_model_file(dir / "model.yaml");
  EXPECT_TRUE(bit_equal(f.model.inducing, g.model.inducing));
  EXPECT_TRUE(bit_equal(f.model.q_mean, g.model.q_mean));
  EXPECT_TRUE(bit_equal(f.model.q_chol, g.model.q_chol));
  EXPECT_TRUE(bit_equal(f.model.kernel.params(), g.model.kernel.params()));
  EXPECT_TRUE(bit_equal(f.standardization.sd, g.standardization.sd));
  EXPECT_TRUE(bit_equal(f.standardization.mean, g.standardization.mean));
  EXPECT_EQ(f.model.mean, g.model.mean);
  EXPECT_EQ(f.model.likelihood_params, g.model.likelihood_params);
  EXPECT_EQ(f.model.jitter, g.model.jitter);
  EXPECT_EQ(f.model.pack(), g.model.pack());
  EXPECT_EQ(g.model.spec.likelihood, LikelihoodKind::normal);
  EXPECT_EQ(g.model.spec.aggregation, Aggregation::mean);
  EXPECT_TRUE(g.model.spec.learn_inducing);
  EXPECT_EQ(g.model.spec.linear_inputs, 0);
  EXPECT_EQ(g.covariates, f.covariates);
  EXPECT_EQ(g.train_units, f.train_units);
  EXPECT_EQ(g.holdout_units, f.holdout_units);
  EXPECT_EQ(g.grid.transform, f.grid.transform);
  EXPECT_TRUE(io::same_crs(g.grid.crs_wkt, f.grid.crs_wkt));
  EXPECT_EQ(g.training.elbo, f.training.elbo);
  EXPECT_TRUE(std::isnan(g.training.best_holdout_nll));
  EXPECT_EQ(g.config["model"]["link"].as<std::string>(), "identity");
}

// A space-time model: its product kernel (terms, factors, the fixed variance) and its periods.
TEST(ModelFile, RoundTripsSpaceTime) {
  test::TempDir dir;
  io::ModelFile f = sample_file();
  Model& m = f.model;
  m.kernel = make_kernel("ard", "matern52", 2, 2, "seasonal+trend");
  Vector th = m.kernel.params();
  for (Index i = 0; i < th.size(); ++i) th[i] = 0.1 * static_cast<double>(i) - 0.3;
  m.kernel.set_params(th);
  m.inducing.conservativeResize(4 + kTimeInputs, Eigen::NoChange);
  m.inducing.bottomRows(kTimeInputs).setConstant(0.25);
  f.time = io::parse_time_axis("2019-11..2020-02");
  io::write_model_file(dir / "model.yaml", f);
  const io::ModelFile g = io::read_model_file(dir / "model.yaml");
  EXPECT_EQ(g.time.labels(), f.time.labels());
  EXPECT_EQ(g.model.kernel.terms(), m.kernel.terms());
  ASSERT_EQ(g.model.kernel.parts().size(), m.kernel.parts().size());
  for (size_t c = 0; c < m.kernel.parts().size(); ++c)
    EXPECT_EQ(g.model.kernel.parts()[c].fixed_variance, m.kernel.parts()[c].fixed_variance) << c;
  EXPECT_TRUE(bit_equal(g.model.kernel.params(), m.kernel.params()));
  EXPECT_EQ(g.model.pack(), m.pack());

  // Terms that leave out a part, and periods that do not match the inputs, are broken.
  const ModelFileEdits expect_broken{dir, read_text(dir / "model.yaml")};
  expect_broken("term: 1\n      factor: 1", "term: 3\n      factor: 1", "term");
  expect_broken("periods:", "old_periods:", "do not match");
  expect_broken("[2019-11,", "[2019-13,", "not a period");
}

TEST(ModelFile, BrokenEntriesAreNamed) {
  test::TempDir dir;
  io::write_model_file(dir / "model.yaml", sample_file());
  const ModelFileEdits expect_broken{dir, read_text(dir / "model.yaml")};
  expect_broken("q_mean:", "q_means:", "missing 'model.q_mean'");
  expect_broken("link: identity\n  covariance", "link: cube\n  covariance", "unknown link 'cube'");
  expect_broken("version: 1", "version: 2", "format version 2");
  expect_broken("coordinates: 2", "coordinates: 3", "do not match");
  expect_broken("width: 10", "width: ten", "'grid.width' has the wrong type");
  expect_broken("learn_inducing:", "unit_effect_prior_rate: -2\n  learn_inducing:",
                "'model.unit_effect_prior_rate' must be a positive number");
  expect_broken(
      "learn_inducing:", "kernel_prior: {part: 9, log_variance: 0, log_lengthscale: 1, sd: 1}\n  learn_inducing:",
      "'model.kernel_prior.part' is not a part of 'model.kernel'");
  expect_broken(
      "learn_inducing:", "kernel_prior: {part: 0, log_variance: 0, log_lengthscale: 1, sd: -1}\n  learn_inducing:",
      "'model.kernel_prior' needs a part of at least 0, a positive sd and finite centres");
}

}  // namespace
}  // namespace vbagg

namespace vbagg {
namespace {

// Inputs the fuzzers found: each must be answered with DataError, never a crash or another
// exception.
TEST(ModelFile, FuzzRegressions) {
  const std::string dir = std::string(VBAGG_SOURCE_DIR) + "/tests/io/fuzz_regressions";
  int checked = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    SCOPED_TRACE(e.path().string());
    EXPECT_THROW(io::read_model_file(e.path().string()), DataError);
    ++checked;
  }
  EXPECT_GE(checked, 1);
}

}  // namespace
}  // namespace vbagg
