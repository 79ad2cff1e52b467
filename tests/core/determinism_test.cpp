// Same seed -> same parameters: bit-identical for one thread count, within 1e-10 across counts.
#include <gtest/gtest.h>

#include <cstring>

#include "core/fit.hpp"
#include "core/init.hpp"
#include "core/objective.hpp"
#include "core/swissroll.hpp"
#include "test_util.hpp"

namespace vbagg {
namespace {

Vector fit_params(const SwissRoll& roll, int threads, Optimizer opt, Link link) {
  ModelSpec spec;
  spec.link = link;
  spec.covariance = CovarianceMode::nystrom;
  InitOptions init;
  init.inducing = 20;
  init.seed = 9;
  Model model = init_model(spec, make_kernel("ard", "none", roll.data.num_inputs(), 0), roll.data, init);
  std::vector<Index> train, holdout;
  for (Index a = 0; a < roll.data.num_bags(); ++a) (a % 5 == 0 ? holdout : train).push_back(a);
  FitOptions fo;
  fo.optimizer = opt;
  fo.epochs = 15;
  fo.batch_bags = 7;
  fo.seed = 4;
  fo.threads = threads;
  fit(model, roll.data, train, holdout, fo);
  return model.pack();
}

class Determinism : public ::testing::TestWithParam<std::tuple<Optimizer, Link>> {};

TEST_P(Determinism, SameSeedSameModel) {
  SwissRollOptions o;
  o.bags = 40;
  o.size_mean = 30;
  o.size_sd = 15;
  const SwissRoll roll = make_swiss_roll(o);
  const auto [opt, link] = GetParam();
  const Vector a = fit_params(roll, 2, opt, link), b = fit_params(roll, 2, opt, link);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), sizeof(double) * a.size())) << "same thread count must be bit-identical";
  const Vector c = fit_params(roll, 1, opt, link);
  EXPECT_LE((a - c).cwiseAbs().maxCoeff(), 1e-10 * std::max(1.0, a.cwiseAbs().maxCoeff()));
  // Different seeds give different models: the check above is not vacuous.
  SwissRollOptions o2 = o;
  o2.seed = 2;
  const Vector d = fit_params(make_swiss_roll(o2), 2, opt, link);
  EXPECT_GT((a.head(20) - d.head(20)).cwiseAbs().maxCoeff(), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(
    Optimizers, Determinism,
    ::testing::Values(std::make_tuple(Optimizer::adam, Link::exp), std::make_tuple(Optimizer::adam, Link::square),
                      std::make_tuple(Optimizer::lbfgs, Link::exp), std::make_tuple(Optimizer::natgrad, Link::exp)),
    [](const auto& info) { return to_string(std::get<0>(info.param)) + "_" + to_string(std::get<1>(info.param)); });

// The objective and its gradient are bit-identical for every thread count up to the slot count,
// including the O(M^3) products that Eigen splits among threads.
TEST(Determinism, ObjectiveIsBitIdenticalAcrossThreadCounts) {
  const Dataset data = test::random_dataset(30, 5, 200, 4, LikelihoodKind::poisson, 3);
  ModelSpec spec;
  spec.learn_inducing = true;
  const Model model = test::random_model(spec, make_kernel("ard", "matern32", 2, 2), 80, 4, 4);
  Vector g1;
  ObjectiveOptions one;
  one.threads = 1;
  one.block = 64;
  const double v1 = elbo(model, data, &g1, one).elbo;
  for (int t : {2, 3, 8}) {
    ObjectiveOptions o = one;
    o.threads = t;
    Vector g;
    const double v = elbo(model, data, &g, o).elbo;
    EXPECT_EQ(0, std::memcmp(&v, &v1, sizeof v)) << t << " threads";
    ASSERT_EQ(g.size(), g1.size());
    EXPECT_EQ(0, std::memcmp(g.data(), g1.data(), sizeof(double) * g.size())) << t << " threads";
  }
}

}  // namespace
}  // namespace vbagg
