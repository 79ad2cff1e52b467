// The swiss-roll experiments of the paper (section 4.1 and appendix H.2), reproduced.
//   swissroll --experiment bags|size|normal [--reps 5] [--threads 2] [--inducing 100] [--epochs 300]
//             [--methods vbagg_exp_delta,vbagg_square]   (default: every method of the experiment)
//             [--settings 3]   (the settings' places in the experiment's list, from 0; default: all)
//             [--polish 100]   (the polish's steps after L-BFGS, as vbagg-train takes them; default 0)
// bags:   Poisson, training bags 100..350 (N_mean 150, N_std 50)
// size:   Poisson, 600 training bags, N_mean varied, N_std = N_mean / 2
// normal: the Normal bag model, training bags 100..350 (N_mean 150, N_std 50), tau = 0.1
// Each run adds 500 test bags drawn with the training bags. Prints markdown tables.
#include "core/swissroll.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/baselines.hpp"
#include "core/fit.hpp"
#include "core/init.hpp"
#include "core/metrics.hpp"
#include "core/predict.hpp"

using namespace vbagg;

namespace {

struct Args {
  std::string experiment = "bags";
  int reps = 5, threads = 2, epochs = 300, polish = 0;
  Index inducing = 100;
  std::vector<std::string> methods;  // empty: every method
  std::vector<size_t> settings;      // empty: every setting
  bool wants(const std::string& method) const {
    return methods.empty() || std::find(methods.begin(), methods.end(), method) != methods.end();
  }
};

struct Run {
  std::map<std::string, double> nll, mse, test_nll, calibration, coverage95;  // per method
};

const std::vector<std::string> kPoissonMethods = {"vbagg_exp", "vbagg_exp_delta", "vbagg_square",
                                                  "nystrom",   "bag_pixel",       "constant"};
const std::vector<std::string> kNormalMethods = {"vbagg", "nystrom", "constant"};

// One-sided exact Wilcoxon signed-rank test of H1: the differences a - b tend to be negative.
double wilcoxon_less(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> d;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) d.push_back(a[i] - b[i]);
  const int n = static_cast<int>(d.size());
  if (n == 0) return 1.0;
  std::vector<size_t> order(d.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return std::abs(d[x]) < std::abs(d[y]); });
  int w_plus = 0;  // sum of the ranks of positive differences
  for (int r = 0; r < n; ++r)
    if (d[order[static_cast<size_t>(r)]] > 0) w_plus += r + 1;
  // Null distribution of W+: number of subsets of {1..n} with each rank sum.
  const int max_sum = n * (n + 1) / 2;
  std::vector<double> count(static_cast<size_t>(max_sum) + 1, 0.0);
  count[0] = 1;
  for (int r = 1; r <= n; ++r)
    for (int s = max_sum; s >= r; --s) count[static_cast<size_t>(s)] += count[static_cast<size_t>(s - r)];
  double below = 0;
  for (int s = 0; s <= w_plus; ++s) below += count[static_cast<size_t>(s)];
  return below / std::pow(2.0, n);
}

double mean_of(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}
double sd_of(const std::vector<double>& v) {
  const double m = mean_of(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return v.size() > 1 ? std::sqrt(s / static_cast<double>(v.size() - 1)) : 0.0;
}

// Pixel values of the listed bags, concatenated in order.
Vector gather(const Dataset& d, const Vector& per_pixel, const std::vector<Index>& bags) {
  Index n = 0;
  for (Index a : bags) n += d.bag_size(a);
  Vector out(n);
  Index pos = 0;
  for (Index a : bags) {
    out.segment(pos, d.bag_size(a)) = per_pixel.segment(d.bag_begin(a), d.bag_size(a));
    pos += d.bag_size(a);
  }
  return out;
}

Run run_once(const Args& args, Index train_bags, double size_mean, double size_sd, bool normal,
             unsigned long long seed) {
  SwissRollOptions o;
  o.bags = train_bags + 500;
  o.size_mean = size_mean;
  o.size_sd = size_sd;
  o.seed = seed;
  SwissRoll roll = make_swiss_roll(o);
  if (normal) {
    // y_a = sum of y_i ~ N(mu_i, tau) with mu_i the same colour 0.5 t: y_a ~ N(sum mu, N_a tau).
    std::mt19937_64 rng(seed + 17);
    std::normal_distribution<double> z;
    for (Index a = 0; a < roll.data.num_bags(); ++a)
      roll.data.response[a] = roll.rate.segment(roll.data.bag_begin(a), roll.data.bag_size(a)).sum() +
                              std::sqrt(0.1 * static_cast<double>(roll.data.bag_size(a))) * z(rng);
  }
  std::vector<Index> order(static_cast<size_t>(roll.data.num_bags()));
  std::iota(order.begin(), order.end(), Index(0));
  std::mt19937_64 rng(seed + 1);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<Index> test(order.begin(), order.begin() + 500), train(order.begin() + 500, order.end());
  std::sort(test.begin(), test.end());
  std::sort(train.begin(), train.end());
  const Dataset tr = subset_bags(roll.data, train), te = subset_bags(roll.data, test);
  const Vector rate = gather(roll.data, roll.rate, train), counts = gather(roll.data, roll.pixel_counts, train);
  std::vector<Index> all_train(static_cast<size_t>(tr.num_bags())), all_test(static_cast<size_t>(te.num_bags()));
  std::iota(all_train.begin(), all_train.end(), Index(0));
  std::iota(all_test.begin(), all_test.end(), Index(0));

  FitOptions fo;
  fo.optimizer = Optimizer::lbfgs;
  fo.epochs = args.epochs;
  fo.polish = args.polish;
  fo.tolerance = 1e-7;
  fo.threads = args.threads;
  InitOptions init;
  init.inducing = args.inducing;
  init.seed = seed;
  const Kernel kernel = make_kernel("ard", "none", tr.num_inputs(), 0);
  const std::vector<double> levels = {0.7, 0.8, 0.9, 0.95};
  Run r;
  auto score = [&](const std::string& name, const Model& m, const Dataset& fitted_on) {
    (void)fitted_on;
    PredictOptions po;
    po.threads = args.threads;
    po.quantiles = central_interval_quantiles(levels);
    const Prediction p = predict(m, tr.inputs, po);
    r.mse[name] = mean_squared_error(p.mean, rate);
    if (!normal) {
      r.nll[name] = pixel_poisson_nll(counts, p.mean);
      Vector y(te.num_bags());
      for (Index a = 0; a < te.num_bags(); ++a) y[a] = te.response[a];
      r.test_nll[name] = bag_poisson_nll(y, predicted_bag_totals(m, te, all_test, args.threads)).mean;
    } else {
      r.test_nll[name] = bag_predictive_nll(m, te, all_test, args.threads);
    }
    if (!m.spec.map_estimate) {
      Matrix lo(p.mean.size(), static_cast<Index>(levels.size())), hi = lo;
      for (size_t l = 0; l < levels.size(); ++l) {
        lo.col(static_cast<Index>(l)) = p.quantiles.col(static_cast<Index>(2 * l));
        hi.col(static_cast<Index>(l)) = p.quantiles.col(static_cast<Index>(2 * l + 1));
      }
      const Vector cov = interval_coverage(rate, lo, hi);
      double err = 0;
      for (size_t l = 0; l < levels.size(); ++l) err += std::abs(cov[static_cast<Index>(l)] - levels[l]);
      r.calibration[name] = err / static_cast<double>(levels.size());
      r.coverage95[name] = cov[static_cast<Index>(levels.size()) - 1];
    }
  };
  FitResult last;
  auto fit_model = [&](ModelSpec spec, const Dataset& d) {
    Model m = init_model(spec, kernel, d, init);
    FitOptions o = fo;
    if (spec.map_estimate) o.polish = 0;  // a MAP estimate has no q to polish, as vbagg-train decides
    last = fit(m, d, all_train, {}, o);
    return m;
  };
  // Each fit's end on stderr: a miscalibrated repetition may be one that ran out of evaluations.
  auto fit_and_score = [&](const std::string& name, const ModelSpec& spec, const Dataset& d) {
    if (!args.wants(name)) return;
    score(name, fit_model(spec, d), d);
    const auto c = r.calibration.find(name);
    std::fprintf(stderr, "  seed %llu %s: %d evaluations, %s, ELBO %.3f, calibration error %.3f, MSE %.4f\n", seed,
                 name.c_str(), last.epochs, last.stop_reason.c_str(), last.elbo,
                 c == r.calibration.end() ? NAN : c->second, r.mse[name]);
  };
  if (normal) {
    ModelSpec s;
    s.likelihood = LikelihoodKind::normal;
    s.link = Link::identity;
    fit_and_score("vbagg", s, tr);
    s.map_estimate = true;
    fit_and_score("nystrom", s, tr);
  } else {
    ModelSpec s;
    s.link = Link::exp;
    fit_and_score("vbagg_exp", s, tr);
    s.expectation = Expectation::delta;
    fit_and_score("vbagg_exp_delta", s, tr);
    s.expectation = Expectation::bound;
    s.link = Link::square;
    fit_and_score("vbagg_square", s, tr);
    fit_and_score("bag_pixel", s, collapse_bags(tr));
    s.link = Link::exp;
    s.map_estimate = true;
    fit_and_score("nystrom", s, tr);
  }
  if (!args.wants("constant")) return r;
  // constant: each training bag's own rate; test bags at the overall rate.
  const Vector c = constant_rate(tr);
  r.mse["constant"] = mean_squared_error(c, rate);
  const double overall = overall_rate(tr);
  if (!normal) {
    r.nll["constant"] = pixel_poisson_nll(counts, c);
    Vector y(te.num_bags()), yhat(te.num_bags());
    for (Index a = 0; a < te.num_bags(); ++a) {
      y[a] = te.response[a];
      yhat[a] = overall * static_cast<double>(te.bag_size(a));
    }
    r.test_nll["constant"] = bag_poisson_nll(y, yhat).mean;
  } else {
    // Normal constant model: bag value N(overall * N_a, tau N_a) with tau from the training residuals.
    double ss = 0;
    for (Index a = 0; a < tr.num_bags(); ++a) {
      const double e = tr.response[a] - overall * static_cast<double>(tr.bag_size(a));
      ss += e * e / static_cast<double>(tr.bag_size(a));
    }
    const double tau = ss / static_cast<double>(tr.num_bags());
    double nll = 0;
    for (Index a = 0; a < te.num_bags(); ++a) {
      const double v = tau * static_cast<double>(te.bag_size(a)),
                   e = te.response[a] - overall * static_cast<double>(te.bag_size(a));
      nll += 0.5 * (std::log(2 * M_PI * v) + e * e / v);
    }
    r.test_nll["constant"] = nll / static_cast<double>(te.num_bags());
  }
  return r;
}

// "a,b,c" as {"a", "b", "c"}.
std::vector<std::string> comma_list(const std::string& v) {
  std::vector<std::string> out;
  for (size_t from = 0; from <= v.size();) {
    const size_t comma = std::min(v.find(',', from), v.size());
    out.push_back(v.substr(from, comma - from));
    from = comma + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--experiment")
      args.experiment = v;
    else if (k == "--reps")
      args.reps = std::stoi(v);
    else if (k == "--threads")
      args.threads = std::stoi(v);
    else if (k == "--inducing")
      args.inducing = std::stol(v);
    else if (k == "--epochs")
      args.epochs = std::stoi(v);
    else if (k == "--polish")
      args.polish = std::stoi(v);
    else if (k == "--settings")
      for (const std::string& place : comma_list(v)) args.settings.push_back(std::stoul(place));
    else if (k == "--methods")
      args.methods = comma_list(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  const bool normal = args.experiment == "normal";
  struct Setting {
    std::string label;
    Index bags;
    double mean, sd;
  };
  std::vector<Setting> settings;
  if (args.experiment == "bags" || normal)
    for (Index n : {100, 150, 200, 250, 300, 350}) settings.push_back({"n = " + std::to_string(n), n, 150, 50});
  else if (args.experiment == "size")
    for (double m : {25.0, 50.0, 100.0, 150.0})
      settings.push_back({"N_mean = " + std::to_string(static_cast<int>(m)), 600, m, m / 2});
  else {
    std::fprintf(stderr, "unknown experiment %s (bags, size, normal)\n", args.experiment.c_str());
    return 2;
  }
  std::vector<std::string> methods;
  for (const auto& m : normal ? kNormalMethods : kPoissonMethods)
    if (args.wants(m)) methods.push_back(m);
  const auto t0 = std::chrono::steady_clock::now();
  std::map<std::string, std::map<std::string, std::vector<double>>> pooled;  // metric -> method -> values
  std::printf(
      "## swiss roll: %s (%d repetitions, M = %ld, L-BFGS up to %d evaluations, then up to %d polish steps)\n\n",
      args.experiment.c_str(), args.reps, static_cast<long>(args.inducing), args.epochs, args.polish);
  const char* metrics[] = {"nll", "mse", "test_nll", "calibration", "coverage95"};
  const char* titles[] = {"individual NLL (train pixels)", "individual MSE (train pixels)",
                          "bag NLL (500 test bags, mean)", "calibration error of 70-95 % intervals",
                          "coverage of 95 % intervals (train pixels)"};
  constexpr int kMetrics = 5;
  std::map<std::string, std::vector<std::string>> rows;  // metric -> table rows
  for (size_t si = 0; si < settings.size(); ++si) {
    // A setting's repetitions keep their seeds when others are left out.
    if (!args.settings.empty() && std::find(args.settings.begin(), args.settings.end(), si) == args.settings.end())
      continue;
    const auto& s = settings[si];
    std::map<std::string, std::map<std::string, std::vector<double>>> vals;
    for (int rep = 0; rep < args.reps; ++rep) {
      const Run r =
          run_once(args, s.bags, s.mean, s.sd, normal, 1000 * (si + 1) + static_cast<unsigned long long>(rep));
      const std::map<std::string, double>* by_metric[] = {&r.nll, &r.mse, &r.test_nll, &r.calibration, &r.coverage95};
      for (int k = 0; k < kMetrics; ++k)
        for (const auto& [m, v] : *by_metric[k]) {
          vals[metrics[k]][m].push_back(v);
          pooled[metrics[k]][m].push_back(v);
        }
    }
    for (int k = 0; k < kMetrics; ++k) {
      if (vals[metrics[k]].empty()) continue;
      std::string row = "| " + s.label + " |";
      for (const auto& m : methods) {
        const auto it = vals[metrics[k]].find(m);
        char cell[64];
        if (it == vals[metrics[k]].end())
          std::snprintf(cell, sizeof cell, " — |");
        else
          std::snprintf(cell, sizeof cell, " %.4f ± %.4f |", mean_of(it->second), sd_of(it->second));
        row += cell;
      }
      rows[metrics[k]].push_back(row);
    }
    std::fprintf(stderr, "%s done (%.0f s)\n", s.label.c_str(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  for (int k = 0; k < kMetrics; ++k) {
    if (rows[metrics[k]].empty()) continue;
    std::printf("### %s\n\n| setting |", titles[k]);
    for (const auto& m : methods) std::printf(" %s |", m.c_str());
    std::printf("\n|---|");
    for (size_t i = 0; i < methods.size(); ++i) std::printf("---|");
    std::printf("\n");
    for (const auto& r : rows[metrics[k]]) std::printf("%s\n", r.c_str());
    std::printf("\n");
  }
  // One-sided Wilcoxon signed-rank tests over every run of the experiment: is VBAgg lower? (Only
  // when a baseline ran.)
  const size_t runs = pooled["mse"].empty() ? 0 : pooled["mse"].begin()->second.size();
  if (args.wants("nystrom") || args.wants("constant") || args.wants("bag_pixel")) {
    std::printf(
        "### one-sided Wilcoxon signed-rank p-values (all %zu runs paired)\n\n| VBAgg variant | metric | vs nystrom | "
        "vs constant | vs bag_pixel |\n|---|---|---|---|---|\n",
        runs);
    for (const std::string& v : normal ? std::vector<std::string>{"vbagg"}
                                       : std::vector<std::string>{"vbagg_exp", "vbagg_exp_delta", "vbagg_square"})
      for (const char* metric : {"nll", "mse", "test_nll"}) {
        if (!pooled[metric].count(v)) continue;
        auto p = [&](const std::string& other) {
          if (!pooled[metric].count(other)) return std::string("—");
          char b[32];
          std::snprintf(b, sizeof b, "%.2g", wilcoxon_less(pooled[metric][v], pooled[metric][other]));
          return std::string(b);
        };
        std::printf("| %s | %s | %s | %s | %s |\n", v.c_str(), metric, p("nystrom").c_str(), p("constant").c_str(),
                    p("bag_pixel").c_str());
      }
  }
  std::printf("\nwall time: %.0f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}
