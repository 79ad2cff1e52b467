// Shared latent fields (docs/sources.md): Q sparse GPs mixed into tasks by learned weights. The
// gradient matches finite differences through every new parameter, the prior of a task is the
// weighted sum of the latents' kernels, and the model reduces exactly to the one-field model when
// the mixing makes it so.
#include <gtest/gtest.h>

#include "core/init.hpp"
#include "core/linear_start.hpp"
#include "core/param_layout.hpp"
#include "core/predict.hpp"
#include "test_util.hpp"

namespace vbagg::latents_test {

const Index kD = 3;

SourceSpec source(const std::string& name, LikelihoodKind lik, Expectation ex, Link link, Index task) {
  SourceSpec s;
  s.name = name;
  s.likelihood = lik;
  s.expectation = ex;
  s.link = link;
  s.task = task;
  return s;
}

// Incidence from district counts (negative binomial, delta, unit effect) and province counts
// (Poisson, bound), prevalence from survey clusters (binomial, sampled), over Q latents.
ModelSpec incidence_and_prevalence(Index latents) {
  ModelSpec spec =
      test::spec_of(LikelihoodKind::negative_binomial, Link::exp, CovarianceMode::nystrom, Expectation::delta);
  spec.unit_effect = true;
  spec.source_name = "districts";
  spec.learn_inducing = true;
  spec.linear_inputs = 1;
  spec.samples = 3;
  spec.latents = latents;
  spec.tasks = {"incidence", "prevalence"};
  spec.more_sources = {source("provinces", LikelihoodKind::poisson, Expectation::bound, Link::exp, 0),
                       source("clusters", LikelihoodKind::binomial, Expectation::sample, Link::logit, 1)};
  return spec;
}

Dataset incidence_and_prevalence_data(unsigned seed) {
  return join_sources({test::random_dataset(4, 2, 9, kD, LikelihoodKind::negative_binomial, seed),
                       test::random_dataset(2, 10, 20, kD, LikelihoodKind::poisson, seed + 1),
                       test::random_dataset(4, 1, 1, kD, LikelihoodKind::binomial, seed + 2)});
}

// A random model with `latents` latents of `per_latent` inducing inputs each and random mixing.
Model mixed_model(const ModelSpec& spec, Index per_latent, unsigned seed) {
  const Index Q = spec.latents;
  Model m = test::random_model(spec, make_kernel("ard", "none", kD, 0), Q * per_latent, kD, seed);
  std::mt19937_64 rng(seed + 100);
  std::normal_distribution<double> normal;
  for (Index q = 1; q < Q; ++q) {
    Kernel k = m.kernel;
    Vector theta = k.params();
    for (Index i = 0; i < theta.size(); ++i) theta[i] = 0.3 * normal(rng);
    k.set_params(theta);
    m.more_kernels.push_back(k);
  }
  m.inducing_sizes.assign(static_cast<size_t>(Q), per_latent);
  m.mixing.resize(spec.num_tasks(), Q);
  for (Index i = 0; i < m.mixing.size(); ++i) m.mixing.data()[i] = 0.5 + 0.5 * normal(rng);
  m.likelihood_params = Vector::Constant(1, 0.7);  // log r of the negative binomial
  m.more_sources.resize(spec.more_sources.size());
  return m;
}

TEST(Latents, GradientMatchesFiniteDifferences) {
  const ModelSpec spec = incidence_and_prevalence(2);
  const Dataset data = incidence_and_prevalence_data(3);
  Model model = mixed_model(spec, 3, 4);
  const std::vector<Index> bags = {6, 0, 9, 2, 4, 7, 5};
  const double scale = 10.0 / 7.0;
  ObjectiveOptions opt;
  opt.draw_seed = 5;  // fixed draws: the sampled term is a smooth function of the parameters
  Vector analytic;
  elbo(model, data, bags, scale, &analytic, opt);
  const Vector numeric = test::numeric_gradient(model, data, bags, scale, 1e-4, opt);
  std::string worst;
  EXPECT_LE(test::gradient_error(model, analytic, numeric, &worst), 1e-7) << worst;
  // The new parameters are in the layout, named, and move the objective.
  const auto names = model.param_names();
  for (const char* n :
       {"mixing[1,0]", "prevalence.mean", "latent1.kernel.part0.ard.log_variance", "prevalence.linear_mean[0]"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  EXPECT_EQ(param_slice(model, ParamBlockId::mixing).size, 4);
  const ParamSlice w = param_slice(model, ParamBlockId::mixing);
  EXPECT_GT(analytic.segment(w.offset, w.size).cwiseAbs().minCoeff(), 1e-8);
}

TEST(Latents, VariationalFixedEffectsPerTaskMatchFiniteDifferences) {
  // Each task's intercept offset and coefficient are a block of q of their own.
  ModelSpec spec = incidence_and_prevalence(2);
  spec.fixed_effects = FixedEffects::variational;
  spec.unit_effect = false;
  const Dataset data = incidence_and_prevalence_data(21);
  Model model = mixed_model(spec, 3, 22);
  ASSERT_EQ(model.num_q(), 6 + 4);
  const std::vector<Index> bags = {1, 7, 3, 8, 5};
  ObjectiveOptions opt;
  opt.draw_seed = 23;
  Vector analytic;
  elbo(model, data, bags, 2.0, &analytic, opt);
  const Vector numeric = test::numeric_gradient(model, data, bags, 2.0, 1e-4, opt);
  std::string worst;
  EXPECT_LE(test::gradient_error(model, analytic, numeric, &worst), 1e-7) << worst;
  // A task's estimates are its own block: the intercept mu_d + s m, the coefficient s m.
  const double s = spec.linear_prior_sd;
  for (Index d = 0; d < 2; ++d) {
    const FixedEffectEstimates e = fixed_effect_estimates(model.for_task(d));
    EXPECT_NEAR(e.mean[0], model.mean_of(d) + s * model.q_mean[6 + 2 * d], 1e-14);
    EXPECT_NEAR(e.mean[1], s * model.q_mean[6 + 2 * d + 1], 1e-14);
    EXPECT_NEAR(e.sd[1], s * model.q_chol.row(6 + 2 * d + 1).norm(), 1e-14);
  }
  // Task 0's latent does not move with task 1's block.
  Model moved = model;
  moved.q_mean[6 + 2] += 1.0;
  Matrix X = Matrix::Random(kD, 4);
  Vector m0, v0, m1, v1;
  predict_latent(model.for_task(0), X, m0, v0, 1, 64);
  predict_latent(moved.for_task(0), X, m1, v1, 1, 64);
  EXPECT_EQ(m0, m1);
  predict_latent(moved.for_task(1), X, m1, v1, 1, 64);
  predict_latent(model.for_task(1), X, m0, v0, 1, 64);
  EXPECT_NEAR((m1 - m0).maxCoeff(), s, 1e-12);
}

TEST(Latents, TaskPriorIsTheWeightedSumOfTheLatentKernels) {
  const ModelSpec spec = incidence_and_prevalence(2);
  Model model = mixed_model(spec, 4, 6);
  // q at the prior: the latent variance at any input is sum_q w_dq^2 k_q(x, x).
  model.q_mean.setZero();
  model.q_chol.setIdentity();
  Matrix X(kD, 5);
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal;
  for (Index i = 0; i < X.size(); ++i) X.data()[i] = normal(rng);
  for (Index d = 0; d < 2; ++d) {
    Model view = model.for_source(d == 0 ? 0 : 2);
    ASSERT_EQ(view.spec.task, d);
    Vector mean, var;
    predict_latent(view, X, mean, var, 1, 64);
    const double expected = model.mixing(d, 0) * model.mixing(d, 0) * model.kernel_of(0).diag_value() +
                            model.mixing(d, 1) * model.mixing(d, 1) * model.kernel_of(1).diag_value();
    for (Index i = 0; i < X.cols(); ++i) {
      EXPECT_NEAR(var[i], expected, 1e-9 * expected);
      EXPECT_NEAR(mean[i], model.mean_of(d) + X(0, i) * model.linear_of(d)[0], 1e-12);
    }
  }
}

TEST(Latents, UnitWeightsAndOneMeanAreTheOneTaskModel) {
  // Two tasks on one latent with w = (1, 1) and equal means and coefficients are one field seen by
  // both tasks: exactly the one-task joint model of the same sources (the survey's logit aside).
  ModelSpec spec = incidence_and_prevalence(1);
  spec.more_sources[1] = source("clusters", LikelihoodKind::poisson, Expectation::bound, Link::exp, 1);
  const Dataset data = join_sources({test::random_dataset(4, 2, 9, kD, LikelihoodKind::negative_binomial, 8),
                                     test::random_dataset(2, 10, 20, kD, LikelihoodKind::poisson, 9),
                                     test::random_dataset(3, 1, 4, kD, LikelihoodKind::poisson, 10)});
  Model mixed = mixed_model(spec, 5, 11);
  mixed.mixing.setOnes();
  mixed.task_means[0] = mixed.mean;
  mixed.linear_mean[1] = mixed.linear_mean[0];
  Model plain = mixed;
  plain.spec.tasks.clear();
  plain.spec.more_sources[1].task = 0;
  plain.mixing.resize(0, 0);
  plain.task_means.resize(0);
  plain.linear_mean.conservativeResize(1);
  plain.inducing_sizes.clear();
  ASSERT_FALSE(plain.spec.mixed());
  Vector gm, gp;
  const ObjectiveValue a = elbo(mixed, data, &gm), b = elbo(plain, data, &gp);
  EXPECT_NEAR(a.data_term, b.data_term, 1e-12 * std::abs(b.data_term));
  // The KL differs only by the second task's own coefficient's prior.
  const double beta = mixed.linear_mean[1], sd = spec.linear_prior_sd;
  EXPECT_NEAR(a.kl - b.kl, 0.5 * beta * beta / (sd * sd), 1e-12 * std::abs(b.kl));
  // q's gradient (every bag's) agrees too.
  const Index q = param_slice(plain, ParamBlockId::mean).offset;
  EXPECT_LE((gm.head(q) - gp.head(q)).norm(), 1e-10 * gp.head(q).norm());
  // The two tasks' intercept gradients add up to the one-task model's.
  EXPECT_NEAR(gm[q] + gm[param_slice(mixed, ParamBlockId::task_means).offset], gp[q], 1e-10 * std::abs(gp[q]));
}

TEST(Latents, ALatentWithZeroWeightsAndPriorQAddsNothing) {
  // Q = 2 with latent 1's weights zero and q over its inducing values at the prior (and independent
  // of latent 0's) has the ELBO of latent 0 alone.
  const ModelSpec spec = incidence_and_prevalence(2);
  const Dataset data = incidence_and_prevalence_data(12);
  Model two = mixed_model(spec, 4, 13);
  two.mixing.col(1).setZero();
  two.q_mean.segment(4, 4).setZero();
  two.q_chol.block(4, 0, 4, 4).setZero();
  two.q_chol.block(4, 4, 4, 4).setIdentity();
  ModelSpec one_spec = spec;
  one_spec.latents = 1;
  Model one = two;
  one.spec = one_spec;
  one.more_kernels.clear();
  one.inducing_sizes = {4};
  one.inducing = two.inducing.leftCols(4);
  one.mixing = two.mixing.leftCols(1);
  one.q_mean = two.q_mean.head(4);
  one.q_chol = two.q_chol.topLeftCorner(4, 4);
  ObjectiveOptions opt;
  opt.draw_seed = 3;
  // The sampled term draws one normal per entry of q: compare the exact sources only.
  const std::vector<Index> counts = {0, 1, 2, 3, 4, 5};
  const ObjectiveValue a = elbo(two, data, counts, 1.0, nullptr, opt), b = elbo(one, data, counts, 1.0, nullptr, opt);
  EXPECT_NEAR(a.data_term, b.data_term, 1e-10 * std::abs(b.data_term));
  EXPECT_NEAR(a.kl, b.kl, 1e-12 * std::abs(b.kl));
}

TEST(Latents, OneTaskOnOneLatentIsTodaysModel) {
  // Naming the one task changes nothing: no weights, the same parameters, objective and gradient.
  ModelSpec spec = incidence_and_prevalence(1);
  spec.more_sources[1] = source("clusters", LikelihoodKind::poisson, Expectation::bound, Link::exp, 0);
  spec.tasks = {"incidence"};
  const Dataset data = join_sources({test::random_dataset(4, 2, 9, kD, LikelihoodKind::negative_binomial, 15),
                                     test::random_dataset(2, 10, 20, kD, LikelihoodKind::poisson, 16),
                                     test::random_dataset(3, 1, 4, kD, LikelihoodKind::poisson, 17)});
  Model named = test::random_model(spec, make_kernel("ard", "none", kD, 0), 5, kD, 18);
  named.likelihood_params = Vector::Constant(1, 0.7);
  named.more_sources.resize(2);
  Model plain = named;
  plain.spec.tasks.clear();
  ASSERT_FALSE(named.spec.mixed());
  EXPECT_EQ(named.param_names(), plain.param_names());
  Vector gn, gp;
  const ObjectiveValue a = elbo(named, data, &gn), b = elbo(plain, data, &gp);
  EXPECT_EQ(a.elbo, b.elbo);
  EXPECT_EQ(gn, gp);
}

TEST(Latents, InitialModelHasEveryLatentAndTask) {
  const ModelSpec spec = incidence_and_prevalence(2);
  const Dataset data = incidence_and_prevalence_data(14);
  InitOptions o;
  o.inducing = 5;
  const Model m = init_model(spec, make_kernel("ard", "none", kD, 0), data, o);
  EXPECT_EQ(m.num_latents(), 2);
  EXPECT_EQ(m.num_inducing(), 10);
  EXPECT_EQ(m.mixing.rows(), 2);
  EXPECT_EQ(m.task_means.size(), 1);
  EXPECT_EQ(m.linear_mean.size(), 2);
  // The latents start apart (distinct lengthscales and weights), so they do not move in step.
  EXPECT_NE(m.kernel_of(0).params(), m.kernel_of(1).params());
  EXPECT_NE(m.mixing.col(0), m.mixing.col(1));
  // The prevalence task starts at the clusters' logit prevalence, not at the counts' log rate.
  EXPECT_NE(m.mean_of(1), m.mean_of(0));
  EXPECT_TRUE(std::isfinite(elbo(m, data, nullptr).elbo));
}

TEST(Latents, EachCountTaskStartsItsLinearMeanFromItsFirstSource) {
  const ModelSpec spec = incidence_and_prevalence(1);
  const Dataset data = incidence_and_prevalence_data(8);
  InitOptions init;
  init.inducing = 4;
  const Model m = init_model(spec, make_kernel("ard", "none", kD, 0), data, init);
  // Incidence: the districts' regression (its first source), shifted as the likelihood's start.
  double c = 0;
  Vector beta;
  const std::vector<Index> districts = data.bags_of_source(0);
  ASSERT_TRUE(poisson_regression(data, districts, 1, spec.linear_prior_sd, nullptr, c, beta));
  EXPECT_NEAR(m.mean_of(0), c - 0.5, 1e-10);
  EXPECT_NEAR(m.linear_of(0)[0], beta[0], 1e-12);
  EXPECT_NE(beta[0], 0.0);
  // Prevalence (binomial, logit) keeps the binomial start and beta = 0.
  EXPECT_EQ(m.linear_of(1)[0], 0.0);
}

}  // namespace vbagg::latents_test
