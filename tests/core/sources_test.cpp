// Joint fits of several data sources (docs/sources.md): the joint ELBO is one KL plus each source's
// bag terms under that source's own likelihood and parameters, with gradients that match finite
// differences, and a model of one source is exactly today's model.
#include <gtest/gtest.h>

#include "core/fit.hpp"
#include "core/init.hpp"
#include "core/param_layout.hpp"
#include "core/predict.hpp"
#include "test_util.hpp"

namespace vbagg::sources_test {

const Index kD = 3;

SourceSpec source(const std::string& name, LikelihoodKind lik, Expectation ex, bool unit_effect = false) {
  SourceSpec s;
  s.name = name;
  s.likelihood = lik;
  s.expectation = ex;
  s.unit_effect = unit_effect;
  return s;
}

// Three count-like sources under the exp link: negative binomial with the delta method and a unit
// effect (districts), Poisson with the bound (provinces), exponential values (a third indicator).
ModelSpec three_sources() {
  ModelSpec spec =
      test::spec_of(LikelihoodKind::negative_binomial, Link::exp, CovarianceMode::nystrom, Expectation::delta);
  spec.unit_effect = true;
  spec.source_name = "districts";
  spec.learn_inducing = true;
  spec.linear_inputs = 1;
  spec.more_sources = {source("provinces", LikelihoodKind::poisson, Expectation::bound),
                       source("indicator", LikelihoodKind::exponential, Expectation::bound)};
  return spec;
}

Dataset three_source_data(unsigned seed) {
  return join_sources({test::random_dataset(4, 2, 9, kD, LikelihoodKind::negative_binomial, seed),
                       test::random_dataset(2, 10, 20, kD, LikelihoodKind::poisson, seed + 1),
                       test::random_dataset(3, 1, 6, kD, LikelihoodKind::exponential, seed + 2)});
}

Model joint_model(const ModelSpec& spec, unsigned seed) {
  Model m = test::random_model(spec, make_kernel("ard", "none", kD, 0), 4, kD, seed);
  m.likelihood_params = Vector::Constant(1, 0.7);  // log r of the negative binomial
  m.more_sources.resize(spec.more_sources.size());
  m.more_sources[1].unit_effect.log_sd = 0;  // unused: the exponential source has no effect
  return m;
}

TEST(Sources, JointElboIsOneKlPlusEachSourcesTerms) {
  const ModelSpec spec = three_sources();
  const Dataset data = three_source_data(5);
  const Model model = joint_model(spec, 6);
  ASSERT_EQ(data.num_bags(), 9);
  const ObjectiveValue joint = elbo(model, data, nullptr);
  double terms = 0;
  for (Index s = 0; s < spec.num_sources(); ++s) {
    const Dataset own = subset_bags(data, data.bags_of_source(static_cast<int>(s)));
    const ObjectiveValue v = elbo(model.for_source(s), own, nullptr);
    EXPECT_NEAR(v.kl, joint.kl, 1e-12 * std::abs(joint.kl));
    terms += v.data_term;
  }
  EXPECT_NEAR(joint.data_term, terms, 1e-10 * std::abs(terms));
  EXPECT_NEAR(joint.elbo, terms - joint.kl, 1e-10 * std::abs(terms));
}

TEST(Sources, JointGradientMatchesFiniteDifferences) {
  const ModelSpec spec = three_sources();
  const Dataset data = three_source_data(7);
  Model model = joint_model(spec, 8);
  // A minibatch mixing the sources, scaled.
  const std::vector<Index> bags = {5, 0, 8, 2, 4};
  const double scale = 9.0 / 5.0;
  Vector analytic;
  elbo(model, data, bags, scale, &analytic);
  const Vector numeric = test::numeric_gradient(model, data, bags, scale);
  std::string worst;
  EXPECT_LE(test::gradient_error(model, analytic, numeric, &worst), 1e-6) << worst;
  // Each source's own parameters are named after it and move only its bags' terms.
  const auto names = model.param_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "log_dispersion"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "unit_effect.log_sd"), names.end());
  EXPECT_EQ(param_slice(model, ParamBlockId::likelihood).size, 1);
  EXPECT_EQ(param_slice(model, ParamBlockId::unit_effect).size, 1);
}

TEST(Sources, BinomialSourcesAtPointsAndRegionsShareTheField) {
  // Survey clusters and regional surveys of one prevalence: two binomial sources, sampled.
  ModelSpec spec = test::spec_of(LikelihoodKind::binomial, Link::logit, CovarianceMode::nystrom, Expectation::sample);
  spec.samples = 3;
  spec.source_name = "clusters";
  spec.more_sources = {source("regions", LikelihoodKind::binomial, Expectation::sample)};
  spec.more_sources[0].link = Link::logit;
  const Dataset data = join_sources({test::random_dataset(4, 1, 1, kD, LikelihoodKind::binomial, 3),
                                     test::random_dataset(2, 5, 12, kD, LikelihoodKind::binomial, 4)});
  Model model = test::random_model(spec, make_kernel("rbf", "none", kD, 0), 4, kD, 9);
  model.more_sources.resize(1);
  Vector analytic;
  ObjectiveOptions opt;
  opt.draw_seed = 11;
  elbo(model, data, {0, 1, 2, 3, 4, 5}, 1.0, &analytic, opt);
  const Vector theta = model.pack();
  for (Index i : {Index{0}, Index{5}, theta.size() - 1}) {
    auto at = [&](double step) {
      Vector t = theta;
      t[i] += step;
      model.unpack(t);
      return elbo(model, data, {0, 1, 2, 3, 4, 5}, 1.0, nullptr, opt).elbo;
    };
    const double numeric = (at(1e-5) - at(-1e-5)) / 2e-5;
    EXPECT_NEAR(analytic[i], numeric, 1e-5 * std::max(1.0, std::abs(numeric))) << model.param_names()[i];
  }
}

TEST(Sources, OneSourceIsTodaysModel) {
  const ModelSpec joint = three_sources();
  const Dataset data = three_source_data(9);
  const Model model = joint_model(joint, 10);
  // The first source's view of the joint model is a one-source model with the same field.
  const Model first = model.for_source(0);
  EXPECT_EQ(first.spec.num_sources(), 1);
  EXPECT_TRUE(first.more_sources.empty());
  const std::vector<Index> own = data.bags_of_source(0);
  Vector g_joint, g_one;
  const double a = elbo(model, data, own, 1.0, &g_joint).elbo;
  const double b = elbo(first, subset_bags(data, own), &g_one).elbo;
  EXPECT_DOUBLE_EQ(a, b);
  // The gradients agree on every parameter the one-source model has (the field, the mean, the
  // first source's parameters); the other sources' entries are zero.
  const auto names_joint = model.param_names(), names_one = first.param_names();
  for (size_t i = 0; i < names_one.size(); ++i) {
    const auto it = std::find(names_joint.begin(), names_joint.end(), names_one[i]);
    ASSERT_NE(it, names_joint.end()) << names_one[i];
    EXPECT_NEAR(g_joint[it - names_joint.begin()], g_one[static_cast<Index>(i)], 1e-10) << names_one[i];
  }
  EXPECT_EQ(names_joint.size(), names_one.size());  // the others have no parameters here
}

TEST(Sources, PackUnpackRoundTripsEverySourcesParameters) {
  ModelSpec spec = three_sources();
  spec.more_sources[0] = source("provinces", LikelihoodKind::negative_binomial, Expectation::delta, true);
  Model model = joint_model(spec, 12);
  model.more_sources[0].likelihood_params = Vector::Constant(1, 1.3);
  model.more_sources[0].unit_effect.log_sd = -0.9;
  const Vector theta = model.pack();
  Model copy = model;
  copy.more_sources.clear();
  copy.likelihood_params.setZero();
  copy.unpack(theta);
  EXPECT_EQ(copy.more_sources.size(), 2u);
  EXPECT_DOUBLE_EQ(copy.more_sources[0].likelihood_params[0], 1.3);
  EXPECT_DOUBLE_EQ(copy.more_sources[0].unit_effect.log_sd, -0.9);
  EXPECT_DOUBLE_EQ(copy.likelihood_params[0], 0.7);
  const auto names = model.param_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "provinces.log_dispersion"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "provinces.unit_effect.log_sd"), names.end());
  EXPECT_EQ(model.for_source(1).likelihood_params[0], 1.3);
}

TEST(Sources, InvalidCombinationsNameTheSource) {
  ModelSpec spec = three_sources();
  spec.more_sources[1].likelihood = LikelihoodKind::binomial;  // logit only, but the link is exp
  spec.more_sources[1].expectation = Expectation::sample;
  try {
    spec.validate();
    FAIL() << "a binomial source under the exp link must be refused";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("source 'indicator'"), std::string::npos) << e.what();
  }
  spec = three_sources();
  spec.more_sources[1].name = "districts";
  EXPECT_THROW(spec.validate(), ConfigError);
  spec.more_sources[1].name = "";
  EXPECT_THROW(spec.validate(), ConfigError);
}

TEST(Sources, PredictionsUseEachSourcesOwnModel) {
  const ModelSpec spec = three_sources();
  const Dataset data = three_source_data(13);
  Model model = joint_model(spec, 14);
  attach_unit_effects(model, data, {0, 1, 2, 3, 4, 5, 6, 7, 8});
  EXPECT_EQ(model.unit_effect.units.size(), 4u);  // the districts only
  const std::vector<Index> bags = {6, 1, 4, 0, 8};
  const Vector joint = predicted_bag_totals(model, data, bags, 1);
  const double nll = bag_predictive_nll(model, data, bags, 1);
  double nll_sum = 0;
  for (size_t k = 0; k < bags.size(); ++k) {
    const int s = data.source_of(bags[k]);
    const Vector one = predicted_bag_totals(model.for_source(s), data, {bags[k]}, 1);
    EXPECT_NEAR(joint[static_cast<Index>(k)], one[0], 1e-12 * std::abs(one[0]));
    nll_sum += bag_predictive_nll(model.for_source(s), data, {bags[k]}, 1);
  }
  EXPECT_NEAR(nll, nll_sum / static_cast<double>(bags.size()), 1e-10 * std::abs(nll));
}

TEST(Sources, InitialisesEachSourceFromItsOwnBags) {
  const ModelSpec spec = three_sources();
  const Dataset data = three_source_data(15);
  const Model model = init_model(spec, make_kernel("ard", "none", kD, 0), data, InitOptions{});
  ASSERT_EQ(model.more_sources.size(), 2u);
  EXPECT_EQ(model.likelihood_params.size(), 1);  // log r
  EXPECT_EQ(model.more_sources[0].likelihood_params.size(), 0);
  // The mean comes from the first source: the rate of the districts' counts.
  const Model alone = init_model(spec.for_source(0), make_kernel("ard", "none", kD, 0),
                                 subset_bags(data, data.bags_of_source(0)), InitOptions{});
  EXPECT_DOUBLE_EQ(model.mean, alone.mean);
  Dataset no_regions = subset_bags(data, data.bags_of_source(0));
  EXPECT_THROW(init_model(spec, make_kernel("ard", "none", kD, 0), no_regions, InitOptions{}), DataError);
}

}  // namespace vbagg::sources_test
