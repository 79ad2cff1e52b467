// Same seed -> same parameters: bit-identical for one thread count, within 1e-10 across counts.
#include <gtest/gtest.h>

#include <cstring>

#include "core/fit.hpp"
#include "core/swissroll.hpp"

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

INSTANTIATE_TEST_SUITE_P(Optimizers, Determinism,
                         ::testing::Values(std::make_tuple(Optimizer::adam, Link::exp),
                                           std::make_tuple(Optimizer::adam, Link::square),
                                           std::make_tuple(Optimizer::lbfgs, Link::exp)),
                         [](const auto& info) {
                           return to_string(std::get<0>(info.param)) + "_" + to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace vbagg
