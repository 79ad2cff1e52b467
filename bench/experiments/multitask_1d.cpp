// The synthetic multi-task example of Yousefi, Smith & Alvarez (NeurIPS 2019, section 4): one latent
// GP u on [0, 250] (squared exponential), two Poisson tasks f_d = mu_d + w_d u observed on intervals
// of different supports, task "fine" on 250 intervals of length 1 and task "coarse" on 125 of length
// 2. One task loses its intervals in [130, 180), which become the test set, and is fitted alone and
// jointly with the other task (shared latent fields, Q = 1):
//   fine gap:   the paper's setting, the fine task helped by the complete coarse one;
//   coarse gap: the coarse task helped by the complete fine one.
// Reports, over seeds, the test intervals' standardised MSE (MSE / variance of the test counts), the
// mean predictive NLL and the 95 % predictive interval coverage of their counts.
//   multitask_1d [--seeds 5] [--threads 2] [--inducing 50]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/fit.hpp"
#include "core/init.hpp"
#include "core/linalg.hpp"
#include "core/metrics.hpp"
#include "core/predict.hpp"

using namespace vbagg;

namespace {

const int kPerUnit = 5;        // points per unit of length
const double kLength = 250.0;  // the input range [0, 250]
const double kGap[2] = {130, 180};

struct Args {
  int seeds = 5, threads = 2;
  Index inducing = 50;
};

struct Task {
  double mean, weight;
  int support;  // interval length in units
};

// A draw of u on the points (squared exponential, variance 1, lengthscale 8).
Vector draw_latent(const Vector& x, unsigned long long seed) {
  const Index n = x.size();
  Matrix K(n, n);
  for (Index i = 0; i < n; ++i)
    for (Index j = 0; j < n; ++j) K(i, j) = std::exp(-0.5 * (x[i] - x[j]) * (x[i] - x[j]) / 64.0);
  double jitter = 1e-8;
  const Matrix L = jittered_cholesky(K, jitter, 1e-2);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  Vector z(n);
  for (Index i = 0; i < n; ++i) z[i] = normal(rng);
  return L * z;
}

// The task's intervals over every point, each with its Poisson count of sum_i exp(f_i) / kPerUnit.
Dataset task_data(const Vector& x, const Vector& u, const Task& t, unsigned long long seed) {
  const Index n = x.size();
  std::vector<Index> bag(static_cast<size_t>(n));
  for (Index i = 0; i < n; ++i) bag[static_cast<size_t>(i)] = static_cast<Index>(x[i] / t.support);
  const Index bags = static_cast<Index>(kLength) / t.support;
  Vector rate = Vector::Zero(bags);
  for (Index i = 0; i < n; ++i) rate[bag[static_cast<size_t>(i)]] += std::exp(t.mean + t.weight * u[i]) / kPerUnit;
  std::mt19937_64 rng(seed);
  Vector y(bags);
  for (Index a = 0; a < bags; ++a) y[a] = static_cast<double>(std::poisson_distribution<long long>(rate[a])(rng));
  return make_dataset(x.transpose(), Vector::Constant(n, 1.0 / kPerUnit), bag, y);
}

// Bags inside the gap (test) and outside it (training).
void split_gap(const Dataset& d, std::vector<Index>& train, std::vector<Index>& test) {
  for (Index a = 0; a < d.num_bags(); ++a) {
    const double x = d.inputs(0, d.bag_begin(a));
    (x >= kGap[0] && x < kGap[1] ? test : train).push_back(a);
  }
}

struct Score {
  double smse, nll, coverage;
};

Score score(const Model& view, const Dataset& test, int threads) {
  std::vector<Index> all(static_cast<size_t>(test.num_bags()));
  std::iota(all.begin(), all.end(), Index(0));
  const Vector yhat = predicted_bag_totals(view, test, all, threads);
  const Vector y = test.response;
  const double var = (y.array() - y.mean()).square().mean();
  Score s;
  s.smse = (yhat - y).squaredNorm() / static_cast<double>(y.size()) / var;
  s.nll = bag_predictive_nll(view, test, all, threads);
  int covered = 0;
  for (Index a = 0; a < test.num_bags(); ++a) {
    const Index b = test.bag_begin(a), n = test.bag_size(a);
    Vector draws = bag_predictive_draws(view, test.inputs.middleCols(b, n), test.population.segment(b, n), 2000,
                                        1000 + static_cast<unsigned long long>(a));
    std::sort(draws.data(), draws.data() + draws.size());
    covered += y[a] >= empirical_quantile(draws, 0.025) && y[a] <= empirical_quantile(draws, 0.975);
  }
  s.coverage = static_cast<double>(covered) / static_cast<double>(y.size());
  return s;
}

ModelSpec poisson_spec() {
  ModelSpec s;
  s.likelihood = LikelihoodKind::poisson;
  s.link = Link::exp;
  s.expectation = Expectation::delta;
  return s;
}

// Mean and sd over seeds.
std::string summary(const std::vector<double>& v) {
  const double m = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  double ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f ± %.3f", m,
                v.size() > 1 ? std::sqrt(ss / static_cast<double>(v.size() - 1)) : 0.0);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--seeds")
      args.seeds = std::stoi(v);
    else if (k == "--threads")
      args.threads = std::stoi(v);
    else if (k == "--inducing")
      args.inducing = std::stol(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  const Index n = static_cast<Index>(kLength) * kPerUnit;
  Vector x(n);
  for (Index i = 0; i < n; ++i) x[i] = (static_cast<double>(i) + 0.5) / kPerUnit;
  const Matrix all_inputs = x.transpose();
  const Task fine{0.5, 1.0, 1}, coarse{0.2, 0.7, 2};
  std::printf(
      "| setting | fit | test SMSE | test bag NLL | test 95 %% coverage | task correlation "
      "|\n|---|---|---|---|---|---|\n");
  for (int gap_task = 0; gap_task < 2; ++gap_task) {
    std::vector<double> smse[2], nll[2], cov[2], corr;
    for (int seed = 1; seed <= args.seeds; ++seed) {
      const Vector u = draw_latent(x, static_cast<unsigned long long>(seed));
      const Dataset data[2] = {task_data(x, u, fine, 100 + seed), task_data(x, u, coarse, 200 + seed)};
      std::vector<Index> train, test;
      split_gap(data[gap_task], train, test);
      const Dataset target_train = subset_bags(data[gap_task], train), target_test = subset_bags(data[gap_task], test);
      const Dataset& other = data[1 - gap_task];
      FitOptions fo;
      fo.optimizer = Optimizer::lbfgs;
      fo.epochs = 500;
      fo.tolerance = 1e-8;
      fo.threads = args.threads;
      InitOptions init;
      init.inducing = args.inducing;
      init.seed = static_cast<unsigned long long>(seed);
      const PixelColumns placement(all_inputs);
      init.placement = &placement;
      const Kernel kernel = make_kernel("rbf", "none", 1, 0);
      auto fit_all = [&](Model& m, const Dataset& d) {
        std::vector<Index> bags(static_cast<size_t>(d.num_bags()));
        std::iota(bags.begin(), bags.end(), Index(0));
        fit(m, d, bags, {}, fo);
      };
      // Alone: the target task's training intervals.
      Model single = init_model(poisson_spec(), kernel, target_train, init);
      fit_all(single, target_train);
      // Jointly: the target task (source 0) and the other task, one latent field.
      ModelSpec joint_spec = poisson_spec();
      joint_spec.source_name = gap_task == 0 ? "fine" : "coarse";
      joint_spec.tasks = {joint_spec.source_name, gap_task == 0 ? "coarse" : "fine"};
      SourceSpec o;
      o.name = joint_spec.tasks[1];
      o.likelihood = LikelihoodKind::poisson;
      o.expectation = Expectation::delta;
      o.link = Link::exp;
      o.task = 1;
      joint_spec.more_sources = {o};
      const Dataset joint_data = join_sources({target_train, other});
      Model joint = init_model(joint_spec, kernel, joint_data, init);
      fit_all(joint, joint_data);
      const Score a = score(single, target_test, args.threads),
                  b = score(joint.for_source(0), target_test, args.threads);
      smse[0].push_back(a.smse), nll[0].push_back(a.nll), cov[0].push_back(a.coverage);
      smse[1].push_back(b.smse), nll[1].push_back(b.nll), cov[1].push_back(b.coverage);
      corr.push_back(joint.task_correlations()(0, 1));
    }
    const char* setting = gap_task == 0 ? "fine gap (paper)" : "coarse gap";
    std::printf("| %s | alone | %s | %s | %s | |\n", setting, summary(smse[0]).c_str(), summary(nll[0]).c_str(),
                summary(cov[0]).c_str());
    std::printf("| %s | joint | %s | %s | %s | %s |\n", setting, summary(smse[1]).c_str(), summary(nll[1]).c_str(),
                summary(cov[1]).c_str(), summary(corr).c_str());
    std::fflush(stdout);
  }
  return 0;
}
