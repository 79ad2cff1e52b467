// The features kept between passes on q alone (core/feature_store.hpp): every pass with a store
// gives bit for bit what a pass without one gives, and a store is read only while the kernel, the
// inducing inputs, the bags and the dataset are those it was filled with.
#include "core/feature_store.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

#include "core/objective.hpp"
#include "test_util.hpp"

namespace vbagg {
namespace {

const Index kD = 3, kM = 5;

struct Pass {
  ObjectiveValue value;
  bool operator==(const Pass& o) const {
    return value.elbo == o.value.elbo && value.grad_q_mean == o.value.grad_q_mean &&
           value.grad_q_cov == o.value.grad_q_cov;
  }
};

Pass q_alone(const Model& model, const Dataset& data, const std::vector<Index>& bags, double cache_mb,
             FeatureStore* store) {
  ObjectiveOptions o;
  o.threads = 2;
  o.block = 4;
  o.cache_mb = cache_mb;
  o.draw_seed = 9;
  o.q_moments_gradient = o.q_moments_only = true;
  o.features = store;
  Vector g;
  return {elbo(model, data, bags, 1.5, &g, o)};
}

// For every variational spec, blocks kept and recomputed: the filling pass and the reading passes
// after it (q moved, the mean moved) equal passes without a store; a moved kernel, other bags or
// moved inducing inputs refill it rather than read stale features.
TEST(FeatureStore, PassesEqualThoseWithoutAStore) {
  for (const auto& c : test::all_specs()) {
    if (c.spec.map_estimate) continue;
    const std::string name = to_string(c.spec.likelihood) + "/" + to_string(c.spec.link) + "/" +
                             to_string(c.spec.expectation) + "/" + to_string(c.spec.covariance);
    const Dataset data = test::random_dataset(7, 2, 12, kD, c.spec.likelihood, 41);
    Model model = test::random_model(c.spec, make_kernel("ard", "none", kD, 0), kM, kD, 42);
    const std::vector<Index> bags = {0, 2, 3, 5, 6};
    for (double cache_mb : {256.0, 0.0}) {
      FeatureStore store(256);
      EXPECT_TRUE(q_alone(model, data, bags, cache_mb, &store) == q_alone(model, data, bags, cache_mb, nullptr))
          << name;
      model.q_mean *= 0.5;
      EXPECT_TRUE(q_alone(model, data, bags, cache_mb, &store) == q_alone(model, data, bags, cache_mb, nullptr))
          << name;
      model.mean += 0.3;
      EXPECT_TRUE(q_alone(model, data, bags, cache_mb, &store) == q_alone(model, data, bags, cache_mb, nullptr))
          << name;
      Vector theta = model.kernel.params();
      theta[1] += 0.2;
      model.kernel.set_params(theta);
      EXPECT_TRUE(q_alone(model, data, bags, cache_mb, &store) == q_alone(model, data, bags, cache_mb, nullptr))
          << name;
      const std::vector<Index> others = {1, 2, 4};
      EXPECT_TRUE(q_alone(model, data, others, cache_mb, &store) == q_alone(model, data, others, cache_mb, nullptr))
          << name;
      model.inducing(0, 0) += 0.1;
      EXPECT_TRUE(q_alone(model, data, others, cache_mb, &store) == q_alone(model, data, others, cache_mb, nullptr))
          << name;
    }
  }
}

// The reading pass does read the store: inputs changed behind its back after the filling pass are
// not seen until the kernel moves, and a store too small for the data never holds them.
TEST(FeatureStore, ReadsWhileTheKernelStays) {
  const ModelSpec spec = test::spec_of(LikelihoodKind::poisson, Link::exp, CovarianceMode::nystrom);
  Dataset data = test::random_dataset(6, 3, 9, kD, spec.likelihood, 43);
  Model model = test::random_model(spec, make_kernel("ard", "none", kD, 0), kM, kD, 44);
  const std::vector<Index> bags = {0, 1, 2, 3, 4, 5};
  FeatureStore store(256), none(0);
  const Pass before = q_alone(model, data, bags, 256, &store);
  q_alone(model, data, bags, 256, &none);
  data.inputs *= 1.5;
  const Pass changed = q_alone(model, data, bags, 256, nullptr);
  ASSERT_FALSE(changed == before);
  EXPECT_TRUE(q_alone(model, data, bags, 256, &store) == before);
  EXPECT_TRUE(q_alone(model, data, bags, 256, &none) == changed);
  Vector theta = model.kernel.params();
  theta[0] += 0.1;
  model.kernel.set_params(theta);
  EXPECT_TRUE(q_alone(model, data, bags, 256, &store) == q_alone(model, data, bags, 256, nullptr));
}

// A pass that reads the whole objective ignores the store, and leaves it as it was.
TEST(FeatureStore, FullPassesLeaveItAlone) {
  const ModelSpec spec = test::spec_of(LikelihoodKind::poisson, Link::exp, CovarianceMode::nystrom);
  Dataset data = test::random_dataset(6, 3, 9, kD, spec.likelihood, 45);
  const Model model = test::random_model(spec, make_kernel("ard", "none", kD, 0), kM, kD, 46);
  const std::vector<Index> bags = {0, 1, 2, 3, 4, 5};
  FeatureStore store(256);
  const Pass filled = q_alone(model, data, bags, 256, &store);
  ObjectiveOptions full;
  full.q_moments_gradient = true;
  full.features = &store;
  Vector g;
  data.inputs *= 1.5;
  const ObjectiveValue v = elbo(model, data, bags, 1.5, &g, full);
  EXPECT_FALSE(v.elbo == filled.value.elbo);
  EXPECT_TRUE(q_alone(model, data, bags, 256, &store) == filled);
}

// A pass that leaves by an exception, or without being marked completed, leaves the store closed
// and unfilled: the next pass at the same kernel fills it again. A completed one makes it readable.
TEST(FeatureStore, OnlyACompletedPassFillsIt) {
  const ModelSpec spec = test::spec_of(LikelihoodKind::poisson, Link::exp, CovarianceMode::nystrom);
  const Dataset data = test::random_dataset(4, 3, 6, kD, spec.likelihood, 47);
  const Model model = test::random_model(spec, make_kernel("ard", "none", kD, 0), kM, kD, 48);
  const std::vector<Index> bags = {0, 1, 2, 3};
  FeatureStore store(256);
  try {
    FeatureStorePass pass(&store, model, data, bags);
    ASSERT_TRUE(store.filling());
    throw std::runtime_error("a bag failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(store.filling() || store.reading());
  {
    FeatureStorePass pass(&store, model, data, bags);
    EXPECT_TRUE(store.filling());
  }
  {
    FeatureStorePass pass(&store, model, data, bags);
    EXPECT_TRUE(store.filling());
    pass.completed = true;
  }
  FeatureStorePass pass(&store, model, data, bags);
  EXPECT_TRUE(store.reading());
}

}  // namespace
}  // namespace vbagg
