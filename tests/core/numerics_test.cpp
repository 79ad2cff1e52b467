// Numerically hostile problems: the fit either succeeds with a finite model or stops with an
// explanation; a non-finite objective is rolled back with a smaller step.
#include <gtest/gtest.h>

#include <cmath>

#include "core/denormals.hpp"
#include "core/fit.hpp"
#include "core/init.hpp"
#include "core/objective.hpp"
#include "core/predict.hpp"
#include "test_util.hpp"

namespace vbagg {
namespace {

using test::all_bags;

// Fits with Adam and L-BFGS: the fit raises the ELBO from its start, its parameters and maps are
// finite, and the predicted bag totals add up to the observed total within a factor of 2 (the
// mean starts at the overall rate and the fit must not lose it).
void expect_fits(const Dataset& d, ModelSpec spec, Index inducing) {
  for (auto opt : {Optimizer::adam, Optimizer::lbfgs}) {
    InitOptions init;
    init.inducing = inducing;
    Model m = init_model(spec, make_kernel("ard", "none", d.num_inputs(), 0), d, init);
    const double start = elbo(m, d, nullptr).elbo;
    FitOptions fo;
    fo.optimizer = opt;
    fo.epochs = 30;
    const FitResult r = fit(m, d, all_bags(d), {}, fo);
    EXPECT_GT(r.elbo, start) << to_string(opt);
    EXPECT_TRUE(m.pack().allFinite()) << to_string(opt);
    const Prediction p = predict(m, d.inputs, PredictOptions{});
    EXPECT_TRUE(p.mean.allFinite()) << to_string(opt);
    EXPECT_TRUE(p.sd.allFinite()) << to_string(opt);
    const double observed = d.response.sum(), predicted = predicted_bag_totals(m, d, all_bags(d), 1).sum();
    EXPECT_GT(predicted, 0.5 * observed) << to_string(opt);
    EXPECT_LT(predicted, 2.0 * observed) << to_string(opt);
  }
}

TEST(Numerics, ZeroCountsEverywhereStopWithAnExplanation) {
  Dataset d = test::random_dataset(8, 5, 20, 2, LikelihoodKind::poisson, 1);
  d.response.setZero();
  try {
    init_model(ModelSpec{}, make_kernel("rbf", "none", 2, 0), d, InitOptions{});
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("no positive response"), std::string::npos);
  }
  // Zero counts in some bags are ordinary data.
  d.response[0] = 12;
  expect_fits(d, ModelSpec{}, 10);
}

TEST(Numerics, HugeCounts) {
  Dataset d = test::random_dataset(8, 5, 20, 2, LikelihoodKind::poisson, 2);
  d.response *= 1e6;  // counts up to 2 x 10^7
  expect_fits(d, ModelSpec{}, 10);
  ModelSpec square;
  square.link = Link::square;
  expect_fits(d, square, 10);
}

TEST(Numerics, CovariatesOfMillionMagnitude) {
  Dataset d = test::random_dataset(8, 5, 20, 2, LikelihoodKind::poisson, 3);
  d.inputs = d.inputs * 1e6;
  d.inputs.array() += 3e6;
  expect_fits(d, ModelSpec{}, 10);
}

TEST(Numerics, SingleUnit) {
  expect_fits(test::random_dataset(1, 30, 30, 2, LikelihoodKind::poisson, 4), ModelSpec{}, 5);
}

TEST(Numerics, MoreInducingPointsThanPixels) {
  const Dataset d = test::random_dataset(3, 2, 3, 2, LikelihoodKind::poisson, 5);
  InitOptions init;
  init.inducing = 50;
  const Model m = init_model(ModelSpec{}, make_kernel("rbf", "none", 2, 0), d, init);
  EXPECT_EQ(m.num_inducing(), d.num_pixels());
  expect_fits(d, ModelSpec{}, 50);
}

TEST(Numerics, DuplicatedPixels) {
  Dataset d = test::random_dataset(6, 4, 8, 2, LikelihoodKind::poisson, 6);
  for (Index i = 0; i < d.num_pixels(); ++i) d.inputs.col(i) = d.inputs.col(i % 3);  // three distinct inputs
  InitOptions init;
  init.inducing = 20;
  EXPECT_EQ(init_model(ModelSpec{}, make_kernel("rbf", "none", 2, 0), d, init).num_inducing(), 3);
  expect_fits(d, ModelSpec{}, 20);
  d.inputs.setConstant(1.5);  // every pixel identical
  expect_fits(d, ModelSpec{}, 20);
}

// Subnormal numbers are 0 while a guard lives (kernel values of distant points once a kernel part
// is switched off land there, and x86 takes each through a slow microcode path), and the caller's
// mode is back when the guard, or the objective that opens one, returns.
TEST(Numerics, SubnormalsAreFlushedOnlyWhileTheGuardLives) {
#if !defined(__SSE__)
  GTEST_SKIP() << "the guard acts on x86 only";
#endif
  volatile double tiny = 1e-300, factor = 1e-10;
  EXPECT_GT(tiny * factor, 0.0);
  {
    const FlushDenormals flush;
    EXPECT_EQ(tiny * factor, 0.0);
    { const FlushDenormals nested; }
    EXPECT_EQ(tiny * factor, 0.0);  // an inner guard restores its outer one's mode
  }
  EXPECT_GT(tiny * factor, 0.0);
  const Dataset d = test::random_dataset(2, 4, 8, 2, LikelihoodKind::poisson, 7);
  InitOptions init;
  init.inducing = 5;
  const Model m = init_model(ModelSpec{}, make_kernel("rbf", "none", 2, 0), d, init);
  ObjectiveOptions o;
  o.threads = 2;
  EXPECT_TRUE(std::isfinite(elbo(m, d, nullptr, o).elbo));
  EXPECT_GT(tiny * factor, 0.0);
}

TEST(Numerics, NonFiniteStepIsRolledBackWithSmallerSteps) {
  const Dataset d = test::random_dataset(10, 5, 20, 2, LikelihoodKind::poisson, 7);
  Model m = init_model(ModelSpec{}, make_kernel("rbf", "none", 2, 0), d, InitOptions{});
  FitOptions fo;
  fo.learning_rate = 300;  // steps large enough to overflow exp()
  fo.epochs = 20;
  fo.batch_bags = 2;
  std::vector<double> rates;
  fo.on_epoch = [&](const EpochInfo& e) {
    rates.push_back(e.learning_rate);
    return true;
  };
  const FitResult r = fit(m, d, all_bags(d), {}, fo);
  EXPECT_GT(r.recovered_steps, 0);
  EXPECT_LT(rates.back(), 300);
  EXPECT_TRUE(m.pack().allFinite());
  EXPECT_TRUE(std::isfinite(elbo(m, d, nullptr).elbo));
}

TEST(Numerics, UnrecoverableObjectiveSaysSo) {
  Dataset d = test::random_dataset(4, 3, 6, 2, LikelihoodKind::poisson, 8);
  Model m = init_model(ModelSpec{}, make_kernel("rbf", "none", 2, 0), d, InitOptions{});
  d.response[1] = 1e308;  // log-factorial overflows: no step can make the objective finite
  for (auto opt : {Optimizer::adam, Optimizer::lbfgs}) {
    FitOptions fo;
    fo.optimizer = opt;
    fo.epochs = 5;
    try {
      fit(m, d, all_bags(d), {}, fo);
      FAIL() << to_string(opt);
    } catch (const NumericalError& e) {
      EXPECT_NE(std::string(e.what()).find("non-finite"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace vbagg

#include <unistd.h>

#include <fstream>

namespace vbagg {
namespace {

long resident_kb() {
  std::ifstream f("/proc/self/statm");
  long pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * ::sysconf(_SC_PAGESIZE) / 1024;
}

// Thousands of Adam steps hold flat memory: nothing grows with the number of steps.
TEST(Resources, LongTrainingHoldsFlatMemory) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's quarantine makes resident memory grow by design";
#endif
  const Dataset d = test::random_dataset(20, 5, 15, 3, LikelihoodKind::poisson, 9);
  InitOptions init;
  init.inducing = 10;
  Model m = init_model(ModelSpec{}, make_kernel("ard", "none", 3, 0), d, init);
  FitOptions fo;
  fo.batch_bags = 2;  // 10 steps an epoch
  fo.learning_rate = 0.005;
  long after_warmup = 0, last = 0;
  fo.epochs = 300;  // 3,000 steps
  fo.on_epoch = [&](const EpochInfo& e) {
    if (e.epoch == 20) after_warmup = resident_kb();
    last = resident_kb();
    return true;
  };
  fit(m, d, all_bags(d), {}, fo);
  EXPECT_LT(last - after_warmup, 2048) << "resident memory grew from " << after_warmup << " kB to " << last << " kB";
}

}  // namespace
}  // namespace vbagg
