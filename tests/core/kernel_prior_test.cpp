// The kernel prior (ModelSpec::kernel_prior): normal priors on one kernel part's log variance and
// log lengthscales in every latent, a penalty of the ELBO whose value and gradient are checked
// against their closed form and finite differences.
#include <gtest/gtest.h>

#include <cmath>

#include "core/objective.hpp"
#include "test_util.hpp"

namespace vbagg {
namespace {

// Two covariates (ard) and two coordinates (matern52): the space part is part 1.
Model space_model(const std::string& time = "none") {
  const ModelSpec spec = test::spec_of(LikelihoodKind::poisson, Link::exp, CovarianceMode::nystrom, Expectation::delta);
  const Index D = time == "none" ? 4 : 4 + kTimeInputs;
  return test::random_model(spec, make_kernel("ard", "matern52", 2, 2, time), 5, D, 21);
}

ModelSpec::KernelPrior prior_on_space() {
  ModelSpec::KernelPrior p;
  p.part = 1;
  p.log_variance = std::log(0.25);
  p.log_lengthscale = std::log(3.0);
  p.sd = 0.7;
  return p;
}

// The closed form of the penalty of one kernel's part 1.
double expected_penalty(const Kernel& k, const ModelSpec::KernelPrior& p) {
  const KernelPart& part = k.parts()[1];
  double e = 0;
  if (!part.fixed_variance) e += std::pow((part.log_variance - p.log_variance) / p.sd, 2) / 2;
  for (Index j = 0; j < part.log_lengthscale.size(); ++j)
    e += std::pow((part.log_lengthscale[j] - p.log_lengthscale) / p.sd, 2) / 2;
  return e;
}

TEST(KernelPrior, PenaltyIsTheNormalLogDensityOfTheSpacePart) {
  const Dataset data = test::random_dataset(5, 3, 9, 4, LikelihoodKind::poisson, 8);
  const std::vector<Index> bags = test::all_bags(data);
  Model flat = space_model();
  Model with_prior = flat;
  with_prior.spec.kernel_prior = prior_on_space();
  Vector g_flat, g_prior;
  const double elbo_flat = elbo(flat, data, bags, 1.0, &g_flat).elbo;
  const double elbo_prior = elbo(with_prior, data, bags, 1.0, &g_prior).elbo;
  const double penalty = expected_penalty(flat.kernel, with_prior.spec.kernel_prior);
  EXPECT_GT(penalty, 0.1);  // the random kernel is away from the centres
  EXPECT_NEAR(elbo_flat - elbo_prior, penalty, 1e-10);
  // Only the space part's entries move, by (theta - centre) / sd^2.
  const std::vector<std::string> names = with_prior.param_names();
  const KernelPart& space = flat.kernel.parts()[1];
  const double precision = 1 / (0.7 * 0.7);
  for (size_t i = 0; i < names.size(); ++i) {
    double shift = 0;
    if (names[i].find("part1.matern52.log_variance") != std::string::npos)
      shift = -precision * (space.log_variance - std::log(0.25));
    if (names[i].find("part1.matern52.log_lengthscale") != std::string::npos)
      shift = -precision * (space.log_lengthscale[0] - std::log(3.0));
    EXPECT_NEAR(g_prior[static_cast<Index>(i)] - g_flat[static_cast<Index>(i)], shift, 1e-9) << names[i];
  }
  const Vector numeric = test::numeric_gradient(with_prior, data, bags, 1.0);
  std::string worst;
  EXPECT_LT(test::gradient_error(with_prior, g_prior, numeric, &worst), 1e-6) << worst;
}

// A space-time kernel's space part carries no variance of its own (the time parts do): only its
// lengthscale has a prior.
TEST(KernelPrior, AFixedVarianceHasNone) {
  const Model flat = space_model("seasonal");
  ASSERT_TRUE(flat.kernel.parts()[1].fixed_variance);
  Model with_prior = flat;
  with_prior.spec.kernel_prior = prior_on_space();
  ModelGradient g_flat(flat), g_prior(with_prior);
  const double difference = kl_divergence(with_prior, &g_prior) - kl_divergence(flat, &g_flat);
  const double lengthscale = flat.kernel.parts()[1].log_lengthscale[0] - std::log(3.0);
  EXPECT_NEAR(difference, lengthscale * lengthscale / (2 * 0.49), 1e-12);
  EXPECT_NEAR((g_prior.kernel - g_flat.kernel).lpNorm<1>(), std::abs(lengthscale) / 0.49, 1e-12);
}

// Shared latent fields: every latent's space part has the prior, each at its own offset.
TEST(KernelPrior, EveryLatentHasIt) {
  Model flat = space_model();
  Kernel second = flat.kernel;
  Vector theta = second.params();
  theta.array() += 0.5;
  second.set_params(theta);
  flat.more_kernels.push_back(second);
  Model with_prior = flat;
  with_prior.spec.kernel_prior = prior_on_space();
  ModelGradient g_flat(flat), g_prior(with_prior);
  const double difference = kl_divergence(with_prior, &g_prior) - kl_divergence(flat, &g_flat);
  EXPECT_NEAR(difference,
              expected_penalty(flat.kernel, with_prior.spec.kernel_prior) +
                  expected_penalty(second, with_prior.spec.kernel_prior),
              1e-12);
  const Index per_latent = flat.kernel.num_params();
  const Vector shift = g_prior.kernel - g_flat.kernel;
  EXPECT_GT(shift.head(per_latent).lpNorm<1>(), 0);
  // Part 0 (ard on two covariates) holds three parameters: part 1's variance is the fourth.
  EXPECT_NEAR(shift[per_latent + 3], (second.parts()[1].log_variance - std::log(0.25)) / 0.49, 1e-12);
}

TEST(KernelPrior, NeedsAPositiveSdAndAPartOfTheKernel) {
  Model m = space_model();
  m.spec.kernel_prior = prior_on_space();
  m.spec.kernel_prior.sd = 0;
  EXPECT_THROW(m.spec.validate(), ConfigError);
  m.spec.kernel_prior = prior_on_space();
  m.spec.kernel_prior.part = 5;
  EXPECT_THROW(kl_divergence(m, nullptr), ConfigError);
}

}  // namespace
}  // namespace vbagg
