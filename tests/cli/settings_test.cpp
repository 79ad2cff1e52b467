// The typed settings, in process: settings_of reads every key of the parameter table outside
// data.*, overrides arrive as typed values, and model_spec turns them into the core's spec.
#include "cli/settings.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "cli/model_setup.hpp"
#include "cli/params.hpp"

namespace vbagg::cli {
namespace {

Config defaults_with(const std::vector<std::string>& overrides) {
  return Config::parse("", "", ".", overrides, RequiredData::none);
}

TEST(Settings, ReadEveryKeyOfTheTableOutsideData) {
  std::vector<std::string> read;
  settings_of(defaults_with({}), &read);
  std::vector<std::string> table;
  for (const Param& p : all_params())
    if (p.key.rfind("data.", 0) != 0) table.push_back(p.key);
  std::sort(read.begin(), read.end());
  std::sort(table.begin(), table.end());
  EXPECT_EQ(read, table);
}

TEST(Settings, OverridesArriveTyped) {
  const Settings s = settings_of(
      defaults_with({"model.kind=bag_pixel", "train.optimizer=adam", "model.unit_effect=false",
                     "predict.quantiles=[0.1, 0.9]", "model.mean_function=constant", "train.holdout.seed=7"}));
  EXPECT_EQ(s.model.kind, ModelKind::bag_pixel);
  ASSERT_TRUE(s.train.optimizer.has_value());
  EXPECT_EQ(*s.train.optimizer, Optimizer::adam);
  ASSERT_TRUE(s.model.unit_effect.has_value());
  EXPECT_FALSE(*s.model.unit_effect);
  EXPECT_EQ(s.predict.quantiles, (std::vector<double>{0.1, 0.9}));
  EXPECT_FALSE(s.model.linear_mean);
  EXPECT_EQ(s.train.holdout_seed, 7u);
  const Settings d = settings_of(defaults_with({}));
  EXPECT_FALSE(d.train.optimizer.has_value());  // auto
  EXPECT_FALSE(d.model.unit_effect.has_value());
}

// model.point_uncertainty: auto estimates the spread for the variational model of an L-BFGS-sized
// problem, none never; laplace where it is not defined is refused.
TEST(Settings, PointUncertaintyFollowsTheModel) {
  EXPECT_TRUE(fit_options(settings_of(defaults_with({})), 1, 1000).point_spread);
  EXPECT_FALSE(fit_options(settings_of(defaults_with({})), 1, kFullBatchPixels + 1).point_spread);
  EXPECT_TRUE(fit_options(settings_of(defaults_with({"model.point_uncertainty=laplace"})), 1, kFullBatchPixels + 1)
                  .point_spread);
  EXPECT_FALSE(fit_options(settings_of(defaults_with({"model.point_uncertainty=none"})), 1, 1000).point_spread);
  EXPECT_FALSE(fit_options(settings_of(defaults_with({"model.kind=bag_pixel"})), 1, 1000).point_spread);
  EXPECT_TRUE(
      fit_options(settings_of(defaults_with({"model.kind=bag_pixel", "model.point_uncertainty=laplace"})), 1, 1000)
          .point_spread);
  EXPECT_THROW(
      fit_options(settings_of(defaults_with({"model.expectation=sample", "model.point_uncertainty=laplace"})), 1, 1000),
      ConfigError);
  EXPECT_THROW(fit_options(settings_of(defaults_with(
                               {"model.kind=nystrom", "model.likelihood=poisson", "model.point_uncertainty=laplace"})),
                           1, 1000),
               ConfigError);
  EXPECT_THROW(settings_of(defaults_with({"model.point_uncertainty=bootstrap"})), ConfigError);
}

// Periods and spans read as text or as a YAML list of texts.
TEST(Settings, PeriodsAndSpansAreTextsOrLists) {
  const Settings s = settings_of(defaults_with(
      {"train.holdout.periods=[2020-10, 2020-12]", "predict.spans=[2019-01..2019-12, 2020-01..2020-06]"}));
  EXPECT_EQ(s.train.holdout_periods, "2020-10, 2020-12");
  EXPECT_EQ(s.predict.spans, (std::vector<std::string>{"2019-01..2019-12", "2020-01..2020-06"}));
  const Config c = defaults_with({"data.time=[2019-01, 2019-02, 2019-06]"});
  EXPECT_EQ(c.text("data.time"), "2019-01, 2019-02, 2019-06");
  EXPECT_EQ(io::parse_time_axis(c.text("data.time")).size(), 3u);
  EXPECT_THROW(defaults_with({"data.time=[[2019-01]]"}), ConfigError);
  EXPECT_THROW(defaults_with({"model.kernel.time=[seasonal]"}), ConfigError);  // a choice is never a list
}

// The unit effect's scope: shared by a unit's periods where data.time gives periods and the model
// defines it, an effect per unit and period otherwise.
TEST(Settings, UnitEffectScopeFollowsThePeriods) {
  EXPECT_FALSE(model_spec(settings_of(defaults_with({}))).unit_effect_shared);  // no periods
  EXPECT_TRUE(model_spec(settings_of(defaults_with({"data.time=2019-01..2019-06"}))).unit_effect_shared);
  EXPECT_TRUE(model_spec(settings_of(defaults_with({"data.time=[2019-01, 2019-03]"}))).unit_effect_shared);
  EXPECT_FALSE(model_spec(settings_of(defaults_with({"data.time=2019-01..2019-06", "model.unit_effect_scope=period"})))
                   .unit_effect_shared);
  EXPECT_FALSE(model_spec(settings_of(defaults_with({"data.time=2019-01..2019-06", "model.covariance=exact"})))
                   .unit_effect_shared);  // auto: not defined there
  EXPECT_THROW(model_spec(settings_of(defaults_with(
                   {"data.time=2019-01..2019-06", "model.covariance=exact", "model.unit_effect_scope=unit"}))),
               ConfigError);
}

// model.unit_effect_prior_sd / _prob: P(sigma > sd) = prob under sigma ~ Exponential(rate).
TEST(Settings, UnitEffectPriorIsTheRateOfItsSdAndProbability) {
  const ModelSpec s =
      model_spec(settings_of(defaults_with({"model.unit_effect_prior_sd=0.2", "model.unit_effect_prior_prob=0.05"})));
  EXPECT_NEAR(std::exp(-s.unit_effect_prior_rate * 0.2), 0.05, 1e-12);
  EXPECT_EQ(model_spec(settings_of(defaults_with({"model.unit_effect_prior_sd=0"}))).unit_effect_prior_rate, 0);
  EXPECT_THROW(settings_of(defaults_with({"model.unit_effect_prior_prob=1"})), ConfigError);
  EXPECT_THROW(settings_of(defaults_with({"model.unit_effect_prior_sd=-0.1"})), ConfigError);
}

// train.epochs 0: a space-time L-BFGS fit gets a budget before its polish, and the longer one its
// unit effects need when no polish follows.
TEST(Settings, EpochBudgetFollowsThePeriodsAndTheOptimizer) {
  const Settings months = settings_of(defaults_with({"data.time=2019-01..2019-06"}));
  EXPECT_EQ(fit_options(months, 1, 1000).epochs, kSpaceTimeEpochsBeforePolish);  // L-BFGS, then the polish
  EXPECT_EQ(fit_options(months, 1, 1000).polish, kAutoPolish);
  const Settings unpolished = settings_of(defaults_with({"data.time=2019-01..2019-06", "train.polish=0"}));
  EXPECT_EQ(fit_options(unpolished, 1, 1000).epochs, 1500);
  EXPECT_EQ(fit_options(unpolished, 1, 1000).polish, 0);
  // A polish set outright keeps the shorter budget; a MAP estimate has none, so it gets the longer.
  EXPECT_EQ(fit_options(settings_of(defaults_with({"data.time=2019-01..2019-06", "train.polish=50"})), 1, 1000).epochs,
            kSpaceTimeEpochsBeforePolish);
  const Settings map_months =
      settings_of(defaults_with({"data.time=2019-01..2019-06", "model.kind=nystrom", "model.likelihood=poisson"}));
  EXPECT_EQ(fit_options(map_months, 1, 1000).epochs, 1500);
  EXPECT_EQ(fit_options(map_months, 1, 1000).polish, 0);
  EXPECT_EQ(fit_options(months, 1, kFullBatchPixels + 1).epochs, 300);  // natgrad
  // One period: the shorter L-BFGS when the polish follows, the longer one alone.
  EXPECT_EQ(fit_options(settings_of(defaults_with({})), 1, 1000).epochs, kEpochsBeforePolish);
  EXPECT_EQ(fit_options(settings_of(defaults_with({"train.polish=0"})), 1, 1000).epochs, 300);
  EXPECT_EQ(fit_options(settings_of(defaults_with({"model.kind=nystrom", "model.likelihood=poisson"})), 1, 1000).epochs,
            300);
  EXPECT_EQ(fit_options(settings_of(defaults_with({"data.time=2019-01..2019-06", "train.epochs=7"})), 1, 1000).epochs,
            7);
}

// train.lbfgs_memory reaches the optimiser; a memory of no steps is refused by name.
TEST(Settings, LbfgsMemoryReachesTheFitAndIsAtLeastOne) {
  EXPECT_EQ(fit_options(settings_of(defaults_with({})), 1, 1000).lbfgs_memory, 10);
  EXPECT_EQ(fit_options(settings_of(defaults_with({"train.lbfgs_memory=30"})), 1, 1000).lbfgs_memory, 30);
  try {
    settings_of(defaults_with({"train.lbfgs_memory=0"}));
    FAIL() << "a memory of 0 was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("train.lbfgs_memory"), std::string::npos) << e.what();
  }
}

// model.inducing.count auto: one per three training units of the source with the most, 32 to 200;
// units held out, and the other sources' units, do not count. A set count is kept as it is.
TEST(Settings, InducingPointsFollowTheDensestSource) {
  const Settings automatic = settings_of(defaults_with({}));
  // 300 units: 96 districts, 16 provinces and 188 survey clusters, source after source.
  std::vector<io::UnitSummary> units(300);
  for (size_t a = 96; a < 300; ++a) units[a].source = a < 112 ? 1 : 2;
  std::vector<Index> every(300);
  for (Index a = 0; a < 300; ++a) every[static_cast<size_t>(a)] = a;
  EXPECT_EQ(inducing_count(automatic, units, every), 63);  // (188 + 2) / 3, not (300 + 2) / 3
  std::vector<Index> no_clusters(every.begin(), every.begin() + 112);
  EXPECT_EQ(inducing_count(automatic, units, no_clusters), 32);  // (96 + 2) / 3, not (112 + 2) / 3 = 38
  std::vector<Index> few(every.begin() + 112, every.begin() + 112 + 60);
  EXPECT_EQ(inducing_count(automatic, units, few), 32);  // at least 32
  const std::vector<io::UnitSummary> one(900);           // one source: every training unit counts
  std::vector<Index> many(900);
  for (Index a = 0; a < 900; ++a) many[static_cast<size_t>(a)] = a;
  EXPECT_EQ(inducing_count(automatic, one, std::vector<Index>(many.begin(), many.begin() + 150)), 50);
  EXPECT_EQ(inducing_count(automatic, one, many), 200);  // at most 200
  EXPECT_EQ(inducing_count(settings_of(defaults_with({"model.inducing.count=7"})), units, every), 7);
}

// model.kernel.space_prior_sd's centres come from the data: the variance of the first source's
// training units' log rates (half a case added) that their mean covariates leave, and a quarter of
// the diagonal of the box around every unit's pixels, held-out units and other sources included.
// None without the setting or a space kernel.
io::BuiltData units_of_one_pixel(const std::vector<double>& covariate, const std::vector<double>& cases,
                                 const std::vector<double>& people, const std::vector<int>& sources) {
  io::BuiltData built;
  built.covariates = {"temperature"};
  built.num_coordinates = 2;
  const Index n = static_cast<Index>(cases.size());
  Dataset& d = built.dataset;
  d.inputs = Matrix::Zero(3, n);
  d.population.resize(n);
  d.coverage = Vector::Ones(n);
  for (Index a = 0; a <= n; ++a) d.offsets.push_back(a);
  d.response.resize(n);
  for (Index a = 0; a < n; ++a) {
    const auto k = static_cast<size_t>(a);
    // Pixels along a line from (0, 0) to (30, 40) km: a diagonal of 50 km.
    d.inputs.col(a) << covariate[k], 30.0 * static_cast<double>(a) / static_cast<double>(n - 1),
        40.0 * static_cast<double>(a) / static_cast<double>(n - 1);
    d.population[a] = people[k];
    d.response[a] = cases[k];
    io::UnitSummary u;
    u.response = cases[k];
    u.population = people[k];
    u.source = sources[k];
    built.units.push_back(u);
  }
  return built;
}

TEST(Settings, SpacePriorIsCentredOnTheData) {
  const Kernel kernel = make_kernel("ard", "matern52", 1, 2);
  const Settings with_prior = settings_of(defaults_with({"model.kernel.space_prior_sd=0.5"}));  // on by default
  // Too few units to fit the covariate: the variance of the source's training units about their mean.
  io::BuiltData few = units_of_one_pixel({1, 2, 3, 4}, {9.5, 99.5, 19.5, 1e6}, {1000, 2000, 500, 10}, {0, 0, 1, 0});
  const std::vector<Index> train = {0, 1, 2};  // unit 2 is another source's, unit 3 held out
  EXPECT_EQ(space_kernel_prior(settings_of(defaults_with({"model.kernel.space_prior=false"})), few, kernel, train).part,
            -1);
  EXPECT_EQ(space_kernel_prior(settings_of(defaults_with({})), few, kernel, train).part, 1);  // auto, one period
  const ModelSpec::KernelPrior p = space_kernel_prior(with_prior, few, kernel, train);
  EXPECT_EQ(p.part, 1);
  EXPECT_DOUBLE_EQ(p.sd, 0.5);
  const double a = std::log(10.0 / 1000), b = std::log(100.0 / 2000), mean = (a + b) / 2;
  EXPECT_NEAR(p.log_variance, std::log((a - mean) * (a - mean) + (b - mean) * (b - mean)), 1e-12);
  EXPECT_NEAR(p.log_lengthscale, std::log(50.0 / 4), 1e-12);
  // Enough units: what a straight line in the covariate leaves, by the closed form of simple
  // regression with n - 2 degrees of freedom.
  const std::vector<double> x = {0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5}, e = {0.3, -0.2, 0.1, -0.4, 0.25, 0.05, -0.1};
  std::vector<double> cases, people(x.size(), 1000);
  for (size_t k = 0; k < x.size(); ++k) cases.push_back(1000 * std::exp(-4 + 0.8 * x[k] + e[k]) - 0.5);
  const io::BuiltData many = units_of_one_pixel(x, cases, people, std::vector<int>(x.size(), 0));
  const std::vector<Index> all = {0, 1, 2, 3, 4, 5, 6};
  double xm = 0, ym = 0;
  std::vector<double> y;
  for (size_t k = 0; k < x.size(); ++k) y.push_back(-4 + 0.8 * x[k] + e[k]);
  for (size_t k = 0; k < x.size(); ++k) {
    xm += x[k] / 7;
    ym += y[k] / 7;
  }
  double sxy = 0, sxx = 0;
  for (size_t k = 0; k < x.size(); ++k) {
    sxy += (x[k] - xm) * (y[k] - ym);
    sxx += (x[k] - xm) * (x[k] - xm);
  }
  double rss = 0;
  for (size_t k = 0; k < x.size(); ++k) rss += std::pow(y[k] - ym - sxy / sxx * (x[k] - xm), 2);
  ASSERT_GT(rss / 5, 0.01);
  EXPECT_NEAR(space_kernel_prior(with_prior, many, kernel, all).log_variance, std::log(rss / 5), 1e-9);
  // Units that agree: the variance's floor, a field of sd 0.1.
  few.units[1].response = 19.5;
  EXPECT_NEAR(space_kernel_prior(with_prior, few, kernel, train).log_variance, std::log(0.01), 1e-12);
  // No space kernel, no prior.
  EXPECT_EQ(space_kernel_prior(with_prior, few, make_kernel("ard", "none", 1, 2), train).part, -1);
  // Periods: none unless asked for (the space part is then part 1 of ard + space x time).
  few.time = io::parse_time_axis("2020-01..2020-03");
  EXPECT_EQ(space_kernel_prior(with_prior, few, kernel, train).part, -1);
  EXPECT_EQ(space_kernel_prior(settings_of(defaults_with({"model.kernel.space_prior=true"})), few, kernel, train).part,
            1);
  EXPECT_THROW(space_kernel_prior(settings_of(defaults_with({"model.kernel.space_prior_sd=0"})),
                                  units_of_one_pixel({1, 2}, {3, 4}, {10, 10}, {0, 0}), kernel, {0, 1}),
               ConfigError);
}

// Several tasks: variational fixed effects, annealed over 1000 epochs unless set; one task keeps
// point fixed effects and constant steps.
TEST(Settings, SeveralTasksGetVariationalFixedEffectsAndAnnealedSteps) {
  const std::string tasks =
      "data:\n  sources:\n"
      "    - {name: units, path: units.gpkg, id_field: ID, response_field: cases}\n"
      "    - {name: clusters, path: clusters.gpkg, id_field: ID, response_field: positive, trials_field: tested, "
      "task: prevalence}\n";
  auto with = [&](const std::vector<std::string>& overrides) {
    return settings_of(Config::parse(tasks, "tasks.yaml", ".", overrides, RequiredData::none));
  };
  const Settings joint = with({});
  EXPECT_EQ(model_spec(joint).num_tasks(), 2);
  EXPECT_EQ(model_spec(joint).fixed_effects, FixedEffects::variational);
  // Every source's term deterministic (the clusters' binomial by its delta method): L-BFGS, and
  // the polish after a shorter budget, as for one source.
  EXPECT_EQ(choose_optimizer(joint, 1000), Optimizer::lbfgs);
  EXPECT_EQ(fit_options(joint, 1, 1000).epochs, kEpochsBeforePolish);
  EXPECT_EQ(fit_options(joint, 1, 1000).polish, std::min(kAutoPolish, kEpochsBeforePolish));
  EXPECT_EQ(fit_options(with({"train.polish=0"}), 1, 1000).epochs, 300);
  // Sampled: Adam, with the annealed steps over 1000 epochs.
  const Settings sampled = with({"model.expectation=sample"});
  ASSERT_EQ(choose_optimizer(sampled, 1000), Optimizer::adam);
  EXPECT_EQ(fit_options(sampled, 1, 1000).schedule, Schedule::anneal);
  EXPECT_EQ(fit_options(sampled, 1, 1000).epochs, 1000);
  const Settings set = with({"model.fixed_effects=point", "train.schedule=constant", "train.epochs=50"});
  EXPECT_EQ(model_spec(set).fixed_effects, FixedEffects::point);
  EXPECT_EQ(fit_options(set, 1, 1000).schedule, Schedule::constant);
  EXPECT_EQ(fit_options(set, 1, 1000).epochs, 50);
  const Settings one = settings_of(defaults_with({"train.optimizer=adam"}));
  EXPECT_EQ(model_spec(one).fixed_effects, FixedEffects::point);
  EXPECT_EQ(fit_options(one, 1, 1000).schedule, Schedule::constant);
  EXPECT_EQ(fit_options(one, 1, 1000).epochs, 300);
}

TEST(Settings, ModelSpecResolvesAutoAndRefusesUndefinedModels) {
  ModelSpec s = model_spec(settings_of(defaults_with({})));
  EXPECT_EQ(s.likelihood, LikelihoodKind::negative_binomial);
  EXPECT_TRUE(s.unit_effect);  // auto: defined for a count likelihood with the delta method
  s = model_spec(settings_of(defaults_with({"model.expectation=bound"})));
  EXPECT_FALSE(s.unit_effect);  // auto: the exp link's bound has no unit effect
  s = model_spec(settings_of(defaults_with({"model.kind=nystrom", "model.likelihood=poisson"})));
  EXPECT_TRUE(s.map_estimate);
  EXPECT_FALSE(s.unit_effect);
  EXPECT_THROW(
      model_spec(settings_of(defaults_with({"model.kind=constant", "model.likelihood=normal", "model.link=identity"}))),
      ConfigError);
  EXPECT_EQ(choose_optimizer(settings_of(defaults_with({"model.expectation=sample"})), 10), Optimizer::adam);
  EXPECT_EQ(choose_optimizer(settings_of(defaults_with({})), kFullBatchPixels + 1), Optimizer::natgrad);
  // Full batch: L-BFGS and, where measured (a variational model), the polish after it; L-BFGS
  // without it for a MAP estimate, Adam above the full-batch size.
  const Settings defaults = settings_of(defaults_with({}));
  EXPECT_EQ(choose_optimizer(defaults, kFullBatchPixels), Optimizer::lbfgs);
  // One period's L-BFGS budget bounds its polish too.
  EXPECT_EQ(fit_options(defaults, 1, 1000).polish, std::min(kAutoPolish, kEpochsBeforePolish));
  EXPECT_EQ(fit_options(defaults, 1, kFullBatchPixels + 1).polish, 0);  // natgrad
  EXPECT_EQ(fit_options(settings_of(defaults_with({"train.polish=7"})), 1, 1000).polish, 7);
  // A fit told to stop early is polished as briefly; a polish set outright keeps its length.
  EXPECT_EQ(fit_options(settings_of(defaults_with({"train.epochs=20"})), 1, 1000).polish, 20);
  EXPECT_EQ(fit_options(settings_of(defaults_with({"train.epochs=20", "train.polish=50"})), 1, 1000).polish, 50);
  EXPECT_EQ(fit_options(settings_of(defaults_with({"train.epochs=900"})), 1, 1000).polish, kAutoPolish);
  EXPECT_EQ(fit_options(settings_of(defaults_with({"train.polish=0"})), 1, 1000).polish, 0);
  EXPECT_THROW(defaults_with({"train.polish=some"}), ConfigError);
  const Settings map = settings_of(defaults_with({"model.kind=nystrom", "model.likelihood=poisson"}));
  EXPECT_EQ(choose_optimizer(map, 1000), Optimizer::lbfgs);
  EXPECT_EQ(fit_options(map, 1, 1000).polish, 0);
  EXPECT_EQ(choose_optimizer(map, kFullBatchPixels + 1), Optimizer::adam);
  EXPECT_THROW(parse_optimizer("newton"), ConfigError);
}

}  // namespace
}  // namespace vbagg::cli
