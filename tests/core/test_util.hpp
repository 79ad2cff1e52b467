// Random problems shared by the core tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/dataset.hpp"
#include "core/likelihood.hpp"
#include "core/model.hpp"
#include "core/objective.hpp"
#include "core/predict.hpp"

namespace vbagg::test {

inline ModelSpec spec_of(LikelihoodKind lik, Link link, CovarianceMode cov, Expectation ex = Expectation::bound) {
  ModelSpec s;
  s.likelihood = lik;
  s.link = link;
  s.covariance = cov;
  s.expectation = ex;
  return s;
}

struct SpecCase {
  std::string name;
  ModelSpec spec;
};

// Every registered likelihood x link x expectation x covariance mode (x aggregation for the
// Normal model), and the MAP variant where the likelihood allows one: the gradient and
// natural-gradient tests run over this list, so a new likelihood or link is tested by them.
// Variants whose bag term reads the same thing (the covariance mode of a bound that only needs
// marginals, the delta method of a link whose expectation is already second order) are skipped.
inline std::vector<SpecCase> all_specs() {
  std::vector<SpecCase> out;
  for (const BagLikelihood* lik : likelihood_registry())
    for (Link link : lik->links())
      for (Expectation ex : {Expectation::bound, Expectation::delta})
        for (CovarianceMode cov : {CovarianceMode::nystrom, CovarianceMode::exact})
          for (Aggregation agg : {Aggregation::sum, Aggregation::mean}) {
            ModelSpec s;
            s.likelihood = lik->id();
            s.link = link;
            s.expectation = ex;
            s.covariance = cov;
            s.aggregation = agg;
            if (ex == Expectation::delta) {
              if (!lik->has_delta_method()) continue;
              ModelSpec b = s;
              b.expectation = Expectation::bound;
              if (lik->has_bound() && (!lik->is_count() || lik->needs(b) == lik->needs(s))) continue;
            }
            if (cov == CovarianceMode::exact) {
              ModelSpec n = s;
              n.covariance = CovarianceMode::nystrom;
              if (lik->needs(n) == BagNeeds::marginals) continue;
            }
            if (agg == Aggregation::mean && s.likelihood != LikelihoodKind::normal) continue;
            // A likelihood without the bound (binomial): the sampled variant in its place.
            if (!lik->has_bound() && ex == Expectation::bound) {
              if (cov != CovarianceMode::nystrom) continue;
              s.expectation = Expectation::sample;
              s.samples = 3;
              s.learn_inducing = true;
              out.push_back({std::string(lik->name()) + "_" + to_string(link) + "_sample", s});
              ModelSpec l = s;
              l.linear_inputs = 2;
              l.linear_prior_sd = 0.7;
              out.push_back({std::string(lik->name()) + "_" + to_string(link) + "_sample_linear", l});
              if (lik->defines_unit_effect()) {
                ModelSpec u = s;
                u.unit_effect = true;
                out.push_back({std::string(lik->name()) + "_" + to_string(link) + "_sample_unit", u});
              }
              continue;
            }
            const std::string name = std::string(lik->name()) + "_" + to_string(link) + "_" + to_string(ex) + "_" +
                                     to_string(cov) +
                                     (s.likelihood == LikelihoodKind::normal ? "_" + to_string(agg) : "");
            s.learn_inducing = true;
            out.push_back({name, s});
            // One linear-mean variant per likelihood and link (over the first two inputs).
            const Expectation first = lik->has_bound() ? Expectation::bound : Expectation::delta;
            if (ex == first && cov == CovarianceMode::nystrom && agg == Aggregation::sum) {
              ModelSpec l = s;
              l.linear_inputs = 2;
              l.linear_prior_sd = 0.7;
              out.push_back({name + "_linear", l});
              // The intercept's offset and beta as part of q, with and without covariates.
              l.fixed_effects = FixedEffects::variational;
              out.push_back({name + "_linear_variational", l});
              l.linear_inputs = 0;
              out.push_back({name + "_variational", l});
            }
            // The sampled expectation of every likelihood and link (at fixed draws), once each.
            if (ex == Expectation::bound && cov == CovarianceMode::nystrom && agg == Aggregation::sum) {
              ModelSpec m = s;
              m.expectation = Expectation::sample;
              m.samples = 3;
              out.push_back({std::string(lik->name()) + "_" + to_string(link) + "_sample", m});
              if (lik->defines_unit_effect()) {
                m.unit_effect = true;
                out.push_back({std::string(lik->name()) + "_" + to_string(link) + "_sample_unit", m});
              }
            }
            // A unit effect on every likelihood and link that defines one, with the second-order
            // moments it needs (nystrom form).
            if (lik->defines_unit_effect() && cov == CovarianceMode::nystrom &&
                (ex == Expectation::delta || link == Link::square)) {
              ModelSpec u = s;
              u.unit_effect = true;
              out.push_back({name + "_unit", u});
            }
            if (lik->allows_map(s) && cov == CovarianceMode::nystrom && agg == Aggregation::sum) {
              s.map_estimate = true;
              s.prior_precision = 2.5;
              out.push_back({name + "_map", s});
            }
          }
  return out;
}

// Every bag of a dataset, in order.
inline std::vector<Index> all_bags(const Dataset& d) {
  std::vector<Index> bags(static_cast<size_t>(d.num_bags()));
  for (Index a = 0; a < d.num_bags(); ++a) bags[static_cast<size_t>(a)] = a;
  return bags;
}

// A dataset with uneven bag sizes drawn from [min_size, max_size], Gaussian inputs and
// population weights in [0.5, 2]. Responses suit the likelihood (counts, reals or positives).
inline Dataset random_dataset(Index bags, Index min_size, Index max_size, Index D, LikelihoodKind lik, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> unif(0.5, 2.0);
  std::uniform_int_distribution<Index> size(min_size, max_size);
  std::vector<Index> bag_of;
  for (Index a = 0; a < bags; ++a) {
    const Index n = size(rng);
    for (Index i = 0; i < n; ++i) bag_of.push_back(a);
  }
  const Index N = static_cast<Index>(bag_of.size());
  Matrix X(D, N);
  for (Index i = 0; i < X.size(); ++i) X.data()[i] = normal(rng);
  Vector p(N);
  for (Index i = 0; i < N; ++i) p[i] = unif(rng);
  Vector y(bags);
  for (Index a = 0; a < bags; ++a) {
    if (likelihood_of(lik).is_count())
      y[a] = std::floor(20 * unif(rng));
    else if (lik == LikelihoodKind::normal)
      y[a] = 3 * normal(rng);
    else
      y[a] = unif(rng);
  }
  Vector trials;
  if (likelihood_of(lik).needs_trials()) {
    trials.resize(bags);
    for (Index a = 0; a < bags; ++a) {
      trials[a] = std::floor(10 + 20 * unif(rng));
      y[a] = std::floor(trials[a] * (unif(rng) - 0.5) / 1.5);  // about 0 to 50 % positive
    }
  }
  Dataset d = make_dataset(X, p, bag_of, y);
  d.trials = trials;
  for (Index i = 0; i < N; ++i) d.coverage[i] = i % 7 == 0 ? 0.25 + 0.5 * unif(rng) / 2 : 1.0;
  return d;
}

// Fourth-order central differences of the scaled minibatch ELBO in every packed parameter:
// truncation O(h^4) keeps the comparison at ~1e-9.
inline Vector numeric_gradient(Model model, const Dataset& data, const std::vector<Index>& bags, double scale,
                               double h = 1e-3, const ObjectiveOptions& options = {}) {
  const Vector theta = model.pack();
  Vector g(theta.size());
  for (Index i = 0; i < theta.size(); ++i) {
    Vector t = theta;
    auto at = [&](double step) {
      t[i] = theta[i] + step;
      model.unpack(t);
      return elbo(model, data, bags, scale, nullptr, options).elbo;
    };
    g[i] = (8 * (at(h) - at(-h)) - (at(2 * h) - at(-2 * h))) / (12 * h);
  }
  return g;
}

// |analytic - numeric| / |numeric|, with the worst entry named in *worst.
inline double gradient_error(const Model& model, const Vector& analytic, const Vector& numeric, std::string* worst) {
  Index k;
  (analytic - numeric).cwiseAbs().maxCoeff(&k);
  *worst = "worst parameter " + model.param_names()[static_cast<size_t>(k)] + " analytic " +
           std::to_string(analytic[k]) + " numeric " + std::to_string(numeric[k]);
  return (analytic - numeric).norm() / numeric.norm();
}

// q's moments alone (ObjectiveOptions::q_moments_only) against the full pass with the same
// options: the same objective, bit for bit the same moment gradients, and no gradient vector.
inline void expect_q_moments_alone_as_full(const Model& model, const Dataset& data, const std::vector<Index>& bags,
                                           ObjectiveOptions full, const std::string& name) {
  full.q_moments_gradient = true;
  ObjectiveOptions alone = full;
  alone.q_moments_only = true;
  Vector g_full, g_alone(3);
  const ObjectiveValue a = elbo(model, data, bags, 1.5, &g_full, full);
  const ObjectiveValue b = elbo(model, data, bags, 1.5, &g_alone, alone);
  EXPECT_EQ(a.elbo, b.elbo) << name;
  EXPECT_TRUE(a.grad_q_mean == b.grad_q_mean) << name;
  EXPECT_TRUE(a.grad_q_cov == b.grad_q_cov) << name;
  EXPECT_EQ(g_alone.size(), 0) << name;
  EXPECT_GT(g_full.size(), 0) << name;
}

// bag_total_draws of bag a of the data: its pixels' inputs and weights.
inline Vector bag_total_draws_of(const LatentField& field, const Dataset& data, Index a, int samples,
                                 unsigned long long seed) {
  const Index b = data.bag_begin(a), n = data.bag_size(a);
  return bag_total_draws(field, data.inputs.middleCols(b, n), data.weights().segment(b, n), samples, seed);
}

// The sd of log(1 + y) over draws y of a count: the spread of a count's draws on the log scale.
inline double log1p_sd(const Vector& y) {
  const Eigen::ArrayXd l = y.array().log1p();
  return std::sqrt((l - l.mean()).square().mean());
}

// A model with random (non-trivial) variational parameters so every gradient path is exercised.
inline Model random_model(const ModelSpec& spec, const Kernel& kernel, Index M, Index D, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  Model m;
  m.spec = spec;
  m.kernel = kernel;
  Vector theta = m.kernel.params();
  for (Index i = 0; i < theta.size(); ++i) theta[i] = 0.3 * normal(rng);
  m.kernel.set_params(theta);
  m.inducing.resize(D, M);
  for (Index i = 0; i < m.inducing.size(); ++i) m.inducing.data()[i] = normal(rng);
  const Index Mq = m.num_q();
  m.q_mean.resize(Mq);
  for (Index i = 0; i < Mq; ++i) m.q_mean[i] = 0.5 * normal(rng);
  m.q_chol = Matrix::Zero(Mq, Mq);
  for (Index j = 0; j < Mq; ++j) {
    m.q_chol(j, j) = 0.4 + 0.3 * std::abs(normal(rng));
    for (Index i = j + 1; i < Mq; ++i) m.q_chol(i, j) = 0.1 * normal(rng);
  }
  if (spec.map_estimate) m.q_chol.setZero();  // a point estimate has no L_v
  m.mean = spec.link == Link::square ? 1.5 : 0.3;
  m.linear_mean.resize(spec.num_linear_coefficients());
  for (Index i = 0; i < spec.num_linear_coefficients(); ++i) m.linear_mean[i] = 0.2 * normal(rng);
  m.task_means = Vector::Constant(spec.num_tasks() - 1, -0.2);
  m.likelihood_params = Vector::Constant(static_cast<Index>(likelihood_of(spec.likelihood).param_names().size()), -0.5);
  m.unit_effect.log_sd = -0.4;
  m.jitter = 1e-6;
  return m;
}

// The sampled expectation of bag a's term averaged over `steps` optimiser steps' fresh draws
// (stream `seed`), with the standard error of that average: what an unbiased estimate must match.
struct StepAverage {
  double mean, se;
};
inline StepAverage sampled_term_over_steps(const Model& model, const Dataset& data, Index a, int steps,
                                           unsigned long long seed) {
  double sum = 0, sum2 = 0;
  ObjectiveOptions opt;
  opt.draw_seed = seed;
  for (int t = 0; t < steps; ++t) {
    opt.draw_step = static_cast<unsigned long long>(t);
    const double v = elbo(model, data, std::vector<Index>{a}, 1.0, nullptr, opt).data_term;
    sum += v;
    sum2 += v * v;
  }
  const double mean = sum / steps;
  return {mean, std::sqrt((sum2 / steps - mean * mean) / steps)};
}

// E[g(c + sd z)], z ~ N(0, 1), by the trapezoid rule with n intervals on [-half_width, half_width]:
// independent of the likelihoods' Gauss-Hermite rules, and spectrally accurate for smooth g.
template <class G>
double normal_expectation(double c, double sd, G g, int n = 120, double half_width = 12) {
  const double h = 2 * half_width / n;
  double sum = 0;
  for (int k = 0; k <= n; ++k) {
    const double z = -half_width + k * h;
    sum += (k == 0 || k == n ? 0.5 : 1.0) * std::exp(-0.5 * z * z) * g(c + sd * z);
  }
  return sum * h / std::sqrt(2 * M_PI);
}

// log of the integral of e^{h(u)} over [lo, hi] by the trapezoid rule on n intervals, in log space.
template <class H>
double log_integral(H h, double lo, double hi, int n) {
  const double step = (hi - lo) / n;
  std::vector<double> v(static_cast<size_t>(n + 1));
  double top = -INFINITY;
  for (int k = 0; k <= n; ++k) top = std::max(top, v[static_cast<size_t>(k)] = h(lo + k * step));
  double sum = 0;
  for (int k = 0; k <= n; ++k) sum += (k == 0 || k == n ? 0.5 : 1.0) * std::exp(v[static_cast<size_t>(k)] - top);
  return top + std::log(sum * step);
}

// The share of the listed held-out bags whose observation lies inside the central 90 % of 2,000
// predictive draws (the field jointly, each bag's unit effect as bag_unit_effects gives it, and
// the observation noise).
inline double held_out_coverage90(const Model& model, const Dataset& data, const std::vector<Index>& bags) {
  const std::vector<UnitEffectMoments> units = bag_unit_effects(model, data, bags, 1);
  int inside = 0;
  for (size_t k = 0; k < bags.size(); ++k) {
    const Index a = bags[k], b = data.bag_begin(a), n = data.bag_size(a);
    Vector d = bag_predictive_draws(model, data.inputs.middleCols(b, n), data.weights().segment(b, n), 2000,
                                    7 + static_cast<unsigned long long>(a), units[k], data.trials_of(a));
    std::sort(d.data(), d.data() + d.size());
    inside += data.response[a] >= d[100] && data.response[a] <= d[1899];
  }
  return static_cast<double>(inside) / static_cast<double>(bags.size());
}

}  // namespace vbagg::test
