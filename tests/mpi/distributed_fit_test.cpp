// A data-parallel run against one process holding every bag: each test computes both in every
// process of the job (mpirun -np K, K = 1, 2, 3 in CTest) and compares. The shares of the bags
// differ with K, so agreement at K = 2 and 3 tests the reductions, not an identity.
#include <gtest/gtest.h>

#include <numeric>

#include "../core/test_util.hpp"
#include "cli/processes.hpp"
#include "core/fit.hpp"
#include "core/init.hpp"
#include "core/kernel.hpp"
#include "core/shard.hpp"

namespace vbagg {
namespace {

// The share of `data` this process holds, its training bags' share, and the shards of both.
struct Shared {
  Dataset local, local_train;
  Shard all, train;
};

// Each bag's owner among the job's processes, by pixels (assign_bags).
std::vector<int> owners_by_pixels(const Dataset& data) {
  std::vector<Index> pixels;
  for (Index a = 0; a < data.num_bags(); ++a) pixels.push_back(data.bag_size(a));
  return assign_bags(pixels, cli::processes().size());
}

// `owner`: each bag's process (empty: owners_by_pixels).
Shared share(const Dataset& data, const std::vector<Index>& train, std::vector<int> owner = {}) {
  const Collective& world = cli::processes();
  if (owner.empty()) owner = owners_by_pixels(data);
  std::vector<std::string> ids;
  for (Index a = 0; a < data.num_bags(); ++a) ids.push_back(data.bag_id(a));
  Shared s;
  s.local = local_part(data, owner, world.rank());
  s.all = make_shard(s.local, ids, world);
  s.train = subset_shard(s.all, s.local, train, s.local_train);
  return s;
}

std::vector<Index> range(Index n) {
  std::vector<Index> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), Index{0});
  return v;
}

double relative_difference(const Vector& a, const Vector& b) {
  return (a - b).cwiseAbs().maxCoeff() / std::max(1.0, b.cwiseAbs().maxCoeff());
}

Dataset count_data(unsigned seed) {
  Dataset d = test::random_dataset(23, 5, 120, 3, LikelihoodKind::poisson, seed);
  for (Index a = 0; a < d.num_bags(); ++a) d.bag_ids.push_back("u" + std::to_string(a));
  return d;
}

TEST(Distributed, BagsAreSharedByPixels) {
  // Largest first, each to the least loaded process: 50 | 40, 10 | 30, 30 and the 5 to the
  // lowest of the two tied at 50.
  EXPECT_EQ((std::vector<int>{0, 1, 1, 2, 2, 0}), assign_bags({50, 10, 40, 30, 30, 5}, 3));
  EXPECT_EQ((std::vector<int>{0, 0}), assign_bags({3, 4}, 1));
  EXPECT_EQ((std::vector<int>{1, 0}), assign_bags({1, 2}, 3));  // a process may have none
  // Loads carry over from earlier calls: the second call starts on the emptier process.
  std::vector<Index> load;
  assign_bags({10, 4}, 2, &load);
  EXPECT_EQ((std::vector<int>{1, 1}), assign_bags({3, 2}, 2, &load));
  EXPECT_EQ((std::vector<Index>{10, 9}), load);
}

// The minibatch objective, its gradient and q's moment gradients, for the bound, the delta method
// and the sampled expectation (whose draws follow the bag, not the process).
TEST(Distributed, ObjectiveMatchesOneProcess) {
  const Dataset data = count_data(5);
  const Shared s = share(data, range(data.num_bags()));
  const std::vector<Index> batch{3, 17, 0, 9, 22, 11, 5};
  for (Expectation ex : {Expectation::bound, Expectation::delta, Expectation::sample}) {
    ModelSpec spec = test::spec_of(LikelihoodKind::negative_binomial, Link::exp, CovarianceMode::nystrom, ex);
    spec.linear_inputs = 2;
    const Model model = test::random_model(spec, make_kernel("ard", "none", 3, 0), 12, 3, 7);
    ObjectiveOptions one;
    one.q_moments_gradient = true;
    one.draw_seed = 4;
    one.draw_step = 2;
    Vector g1, g;
    const ObjectiveValue v1 = elbo(model, data, batch, 3.0, &g1, one);
    ObjectiveOptions shared = one;
    shared.processes = s.all.processes;
    const ObjectiveValue v = elbo(model, s.local, s.all.local_bags(batch), 3.0, &g, shared);
    EXPECT_NEAR(v.elbo, v1.elbo, 1e-12 * std::abs(v1.elbo)) << to_string(ex);
    EXPECT_LT(relative_difference(g, g1), 1e-12) << to_string(ex);
    EXPECT_LT(relative_difference(v.grad_q_mean, v1.grad_q_mean), 1e-12) << to_string(ex);
    EXPECT_LT(relative_difference(v.grad_q_cov.reshaped(), v1.grad_q_cov.reshaped()), 1e-12) << to_string(ex);
  }
}

// Initialisation sees the whole data through samples and bag summaries: the same inducing inputs
// and kernel, and starting rates from bag sums that may differ in the last bit.
TEST(Distributed, InitialModelMatchesOneProcess) {
  const Dataset data = count_data(6);
  const std::vector<Index> train{0, 2, 3, 5, 7, 8, 10, 11, 13, 14, 16, 18, 19, 20, 22};
  const Shared s = share(data, train);
  ModelSpec spec = test::spec_of(LikelihoodKind::negative_binomial, Link::exp, CovarianceMode::nystrom);
  spec.latents = 2;
  const Kernel kernel = make_kernel("ard", "none", 3, 0);
  InitOptions o;
  o.inducing = 9;
  o.seed = 3;
  const PixelColumns all_pixels(data.inputs);
  o.placement = &all_pixels;
  const Model m1 = init_model(spec, kernel, subset_bags(data, train), o);
  const PixelColumns shared_pixels(s.local, s.all);
  o.placement = &shared_pixels;
  o.shard = &s.train;
  const Model m = init_model(spec, kernel, s.local_train, o);
  EXPECT_LT(relative_difference(m.pack(), m1.pack()), 1e-14);  // bag sums may differ in the last bit
  EXPECT_EQ(0.0, relative_difference(m.inducing.reshaped(), m1.inducing.reshaped()));  // the same sample
}

struct FitCase {
  const char* name;
  Optimizer optimizer;
  LikelihoodKind likelihood;
  Expectation expectation;
  int polish = 0;
};

// A fixed number of steps of every optimiser (natgrad and lbfgs also with their polish), with held-out bags
// and early-stopping bookkeeping, and the staged negative binomial fit: parameters and objective to 1e-10.
TEST(Distributed, FitMatchesOneProcess) {
  const Dataset data = count_data(8);
  const std::vector<Index> train{0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, 16, 17, 19, 20, 21, 22};
  const std::vector<Index> holdout{3, 7, 11, 15, 18};
  const Shared s = share(data, train);
  for (const FitCase& c :
       {FitCase{"adam", Optimizer::adam, LikelihoodKind::poisson, Expectation::bound},
        FitCase{"adam_sampled", Optimizer::adam, LikelihoodKind::poisson, Expectation::sample},
        FitCase{"lbfgs", Optimizer::lbfgs, LikelihoodKind::poisson, Expectation::bound},
        FitCase{"natgrad", Optimizer::natgrad, LikelihoodKind::poisson, Expectation::bound},
        FitCase{"natgrad_polished", Optimizer::natgrad, LikelihoodKind::poisson, Expectation::bound, 4},
        FitCase{"lbfgs_polished", Optimizer::lbfgs, LikelihoodKind::poisson, Expectation::bound, 4},
        FitCase{"adam_staged_nb", Optimizer::adam, LikelihoodKind::negative_binomial, Expectation::delta}}) {
    ModelSpec spec = test::spec_of(c.likelihood, Link::exp, CovarianceMode::nystrom, c.expectation);
    spec.linear_inputs = 3;
    const Kernel kernel = make_kernel("ard", "none", 3, 0);
    InitOptions init;
    init.inducing = 10;
    FitOptions fo;
    fo.optimizer = c.optimizer;
    fo.epochs = c.optimizer == Optimizer::lbfgs ? 12 : 3;
    fo.polish = c.polish;
    fo.first_stage_epochs = 2;
    fo.batch_bags = 5;
    fo.learning_rate = 0.03;
    fo.patience = 50;
    Model m1 = init_model(spec, kernel, subset_bags(data, train), init);
    const FitResult r1 = fit(m1, data, train, holdout, fo);
    init.shard = &s.train;
    Model m = init_model(spec, kernel, s.local_train, init);
    fo.shard = &s.all;
    const FitResult r = fit(m, s.local, train, holdout, fo);
    EXPECT_EQ(r.epochs, r1.epochs) << c.name;
    EXPECT_NEAR(r.elbo, r1.elbo, 1e-10 * std::abs(r1.elbo)) << c.name;
    EXPECT_NEAR(r.best_holdout_nll, r1.best_holdout_nll, 1e-10 * std::abs(r1.best_holdout_nll)) << c.name;
    EXPECT_LT(relative_difference(m.pack(), m1.pack()), 1e-10) << c.name;
  }
}

// A bag that cannot be evaluated on one process makes every process throw, together.
TEST(Distributed, OneProcessFailingStopsEvery) {
  Dataset data = count_data(9);
  data.source.assign(static_cast<size_t>(data.num_bags()), 0);
  data.source.back() = 5;  // a source the model does not have: only its holder can tell
  const Shared s = share(data, range(data.num_bags()));
  ModelSpec spec;
  spec.more_sources = {SourceSpec{"second", LikelihoodKind::poisson}};
  Model model = test::random_model(spec, make_kernel("ard", "none", 3, 0), 8, 3, 2);
  model.more_sources.resize(1);
  ObjectiveOptions o;
  o.processes = s.all.processes;
  Vector g;
  EXPECT_ANY_THROW(elbo(model, s.local, s.all.local_bags(range(data.num_bags())), 1.0, &g, o));
  // Every process is still in step: a reduction after the failure sums every process's one.
  EXPECT_EQ(static_cast<double>(cli::process_count()), cli::processes().sum(1.0));
}

// A unit's kept effect as the processes shared it against one process's: its moments and its loading
// on the field's draws (summed over the processes as the moments are).
void expect_same_effect(const UnitEffectMoments& shared, const UnitEffectMoments& one, const std::string& unit) {
  EXPECT_NEAR(shared.mean, one.mean, 1e-10 * (1 + std::abs(one.mean))) << unit;
  ASSERT_EQ(shared.loading.size(), one.loading.size()) << unit;
  EXPECT_GT(one.loading.size(), 0) << unit;
  EXPECT_NEAR(shared.shift, one.shift, 1e-8 * (1 + std::abs(one.shift))) << unit;
  EXPECT_LT((shared.loading - one.loading).norm(), 1e-8 * (1 + one.loading.norm())) << unit;
}

// A unit effect shared by a unit's months needs the unit's bags in one process. Shared out by
// pixels alone (not as io::build_dataset shares months out), units are split at K = 2 and 3:
// every process refuses, naming the setting, and stays in step. Shared out whole, the fit is
// one process's.
TEST(Distributed, SharedUnitEffectKeepsAUnitsMonthsTogether) {
  Dataset data = test::random_dataset(24, 5, 60, 3, LikelihoodKind::negative_binomial, 10);
  for (Index a = 0; a < data.num_bags(); ++a)
    data.bag_ids.push_back("u" + std::to_string(a % 6) + "@2020-" + std::to_string(1 + a / 6));
  ModelSpec spec =
      test::spec_of(LikelihoodKind::negative_binomial, Link::exp, CovarianceMode::nystrom, Expectation::delta);
  spec.unit_effect = true;
  spec.unit_effect_shared = true;
  const Kernel kernel = make_kernel("ard", "none", 3, 0);
  InitOptions init;
  init.inducing = 8;
  FitOptions fo;
  fo.optimizer = Optimizer::adam;
  fo.epochs = 2;
  fo.first_stage_epochs = 1;
  fo.batch_bags = 7;
  const std::vector<Index> all = range(data.num_bags());
  Model m1 = init_model(spec, kernel, data, init);
  fit(m1, data, all, {}, fo);
  EXPECT_EQ(m1.unit_effect.posterior.size(), 6u);

  // By pixels, bag by bag; then by unit, every month of unit k to process k % K.
  const int K = cli::processes().size();
  const std::vector<int> by_pixels = owners_by_pixels(data);
  std::vector<int> by_unit(by_pixels.size());
  for (size_t a = 0; a < by_unit.size(); ++a) by_unit[a] = static_cast<int>(a % 6) % K;
  bool split = false;
  for (size_t a = 0; a < by_pixels.size(); ++a) split |= by_pixels[a] != by_pixels[a % 6];
  for (const bool whole_units : {false, true}) {
    const Shared s = share(data, all, whole_units ? by_unit : by_pixels);
    init.shard = &s.train;
    Model m = init_model(spec, kernel, s.local_train, init);
    FitOptions here = fo;
    here.shard = &s.all;
    if (!whole_units && split) {
      try {
        fit(m, s.local, all, {}, here);
        ADD_FAILURE() << "a unit split over processes was fitted";
      } catch (const DataError& e) {
        EXPECT_NE(std::string(e.what()).find("model.unit_effect_scope: period"), std::string::npos) << e.what();
      }
      EXPECT_EQ(static_cast<double>(cli::process_count()), cli::processes().sum(1.0));
    } else {
      fit(m, s.local, all, {}, here);
      EXPECT_LT(relative_difference(m.pack(), m1.pack()), 1e-10);
      ASSERT_EQ(m.unit_effect.posterior.size(), 6u);
      for (const auto& [unit, u] : m1.unit_effect.posterior)
        expect_same_effect(m.unit_effect.posterior.at(unit), u, unit);
    }
  }
  init.shard = nullptr;
}

}  // namespace
}  // namespace vbagg

int main(int argc, char** argv) {
  vbagg::cli::start_processes(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  const int code = RUN_ALL_TESTS();
  vbagg::cli::stop_processes();
  return code;
}
