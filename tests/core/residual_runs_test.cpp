// The residual variance at a bag's picks (ModelSpec::residual_pixels, bag_pass.hpp's ResidualRuns):
// the objective it defines has the gradient the pass returns, it is the exact objective wherever a
// run's pixels share their residual, and the sampled expectation ignores it.
#include <gtest/gtest.h>

#include "core/bag_pass.hpp"
#include "core/likelihood.hpp"
#include "core/objective.hpp"
#include "test_util.hpp"

namespace vbagg::residual_runs_test {

const Index kCov = 2, kCoords = 2, kD = kCov + kCoords;

// Every spec whose bag terms read the residual at picks: the deterministic expectations.
std::vector<test::SpecCase> residual_cases() {
  std::vector<test::SpecCase> out;
  for (const auto& c : test::all_specs())
    if (residual_cap_of(c.spec, bag_needs(c.spec)) > 0) out.push_back(c);
  return out;
}

Kernel kernel() { return make_kernel("ard", "matern32", kCov, kCoords); }

TEST(ResidualRuns, SplitTheBagIntoRunsThatHoldTheirPicks) {
  for (Index n : {5, 6, 17, 128, 1000})
    for (Index c : {1, 2, 4, 5}) {
      if (c >= n) continue;
      const ResidualRuns runs{n, c};
      EXPECT_EQ(runs.begin(0), 0);
      EXPECT_EQ(runs.begin(c), n);
      for (Index k = 0; k < c; ++k) {
        EXPECT_LT(runs.begin(k), runs.begin(k + 1)) << n << " " << c;
        EXPECT_GE(runs.pick(k), runs.begin(k));
        EXPECT_LT(runs.pick(k), runs.begin(k + 1));
      }
    }
}

TEST(ResidualRuns, GradientMatchesFiniteDifferences) {
  ASSERT_FALSE(residual_cases().empty());
  for (const auto& c : residual_cases()) {
    const Dataset data = test::random_dataset(6, 2, 15, kD, c.spec.likelihood, 91);
    Model model = test::random_model(c.spec, kernel(), 5, kD, 92);
    model.spec.residual_pixels = 3;  // bags of 4 to 15 pixels take runs of 1 to 5
    ObjectiveOptions opt;
    opt.block = 4;  // runs straddle blocks, and some blocks hold no pick
    for (double cache_mb : {256.0, 0.0}) {
      opt.cache_mb = cache_mb;
      const std::vector<Index> bags = {4, 0, 5, 2};
      Vector analytic;
      elbo(model, data, bags, 1.5, &analytic, opt);
      const Vector numeric = test::numeric_gradient(model, data, bags, 1.5, 1e-3, opt);
      std::string worst;
      EXPECT_LE(test::gradient_error(model, analytic, numeric, &worst), 1e-6)
          << c.name << " cache " << cache_mb << ": " << worst;
    }
  }
}

// Bags of 20 to 40 pixels whose every run of `cap` runs repeats one pixel's inputs (populations
// still differ): the runs' residuals are then each pixel's own.
Dataset alike_runs(LikelihoodKind lik, Index cap) {
  Dataset data = test::random_dataset(4, 20, 40, kD, lik, 93);
  for (Index a = 0; a < data.num_bags(); ++a) {
    const ResidualRuns runs{data.bag_size(a), cap};
    const Index begin = data.bag_begin(a);
    for (Index k = 0; k < runs.count(); ++k)
      for (Index i = runs.begin(k); i < runs.begin(k + 1); ++i)
        data.inputs.col(begin + i) = data.inputs.col(begin + runs.pick(k));
  }
  return data;
}

TEST(ResidualRuns, AreExactWhereARunsPixelsShareTheirResidual) {
  for (const auto& c : residual_cases()) {
    const Index cap = 6;
    const Dataset data = alike_runs(c.spec.likelihood, cap);
    Model every = test::random_model(c.spec, kernel(), 5, kD, 94), runs = every;
    every.spec.residual_pixels = 0;
    runs.spec.residual_pixels = cap;
    for (Index block : {Index{2048}, Index{7}}) {
      ObjectiveOptions opt;
      opt.block = block;
      Vector g_every, g_runs;
      const double v_every = elbo(every, data, &g_every, opt).elbo;
      const double v_runs = elbo(runs, data, &g_runs, opt).elbo;
      EXPECT_NEAR(v_runs, v_every, 1e-12 * std::abs(v_every)) << c.name << " block " << block;
      EXPECT_LE((g_runs - g_every).norm(), 1e-11 * g_every.norm()) << c.name << " block " << block;
    }
    // The same data with a pixel moved: the runs now differ from the exact objective (a point
    // estimate has no residual).
    if (c.spec.map_estimate) continue;
    Dataset moved = data;
    moved.inputs.col(data.bag_begin(0)).array() += 0.7;
    EXPECT_NE(elbo(runs, moved, nullptr, {}).elbo, elbo(every, moved, nullptr, {}).elbo) << c.name;
  }
}

TEST(ResidualRuns, LeaveTheSampledExpectationAlone) {
  const ModelSpec spec =
      test::spec_of(LikelihoodKind::poisson, Link::exp, CovarianceMode::nystrom, Expectation::sample);
  const Dataset data = test::random_dataset(4, 20, 40, kD, spec.likelihood, 95);
  Model every = test::random_model(spec, kernel(), 5, kD, 96), capped = every;
  every.spec.residual_pixels = 0;
  capped.spec.residual_pixels = 3;
  EXPECT_EQ(residual_cap_of(capped.spec, bag_needs(capped.spec)), 0);
  ObjectiveOptions opt;
  opt.draw_seed = 5;
  Vector g_every, g_capped;
  EXPECT_EQ(elbo(capped, data, &g_capped, opt).elbo, elbo(every, data, &g_every, opt).elbo);
  EXPECT_TRUE(g_capped == g_every);
}

TEST(ResidualRuns, RefuseANegativeCount) {
  ModelSpec spec = test::spec_of(LikelihoodKind::poisson, Link::exp, CovarianceMode::nystrom, Expectation::delta);
  spec.residual_pixels = 0;
  EXPECT_NO_THROW(spec.validate());
  spec.residual_pixels = -1;
  EXPECT_THROW(spec.validate(), ConfigError);
}

}  // namespace vbagg::residual_runs_test
