#include "polish.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "feature_store.hpp"
#include "natgrad.hpp"
#include "param_layout.hpp"

namespace vbagg {

namespace {

// A point of the polish: every parameter where the objective was read (q after its first
// natural-gradient steps), the objective and the gradient of the rest there, and every parameter
// after one more step, where the next evaluation starts.
struct Point {
  Vector at, g, theta;
  double value = -INFINITY;
  double jitter = 0;  // K_WW's jitter the reading used (a later evaluation may raise the model's)
};

// d = H g by the two-loop recursion, H the memory's inverse-Hessian estimate of -ELBO: an ascent
// direction while the pairs have positive curvature.
Vector quasi_newton_direction(const std::vector<std::pair<Vector, Vector>>& memory, const Vector& g) {
  Vector d = g;
  std::vector<double> alpha(memory.size());
  for (size_t k = memory.size(); k-- > 0;) {
    alpha[k] = memory[k].first.dot(d) / memory[k].second.dot(memory[k].first);
    d -= alpha[k] * memory[k].second;
  }
  if (!memory.empty()) d *= memory.back().first.dot(memory.back().second) / memory.back().second.squaredNorm();
  for (size_t k = 0; k < memory.size(); ++k)
    d += (alpha[k] - memory[k].second.dot(d) / memory[k].second.dot(memory[k].first)) * memory[k].first;
  return d;
}

// A fall between two passes within this share of the objective is rounding (q_chol's round trip
// through its packed form alone moves a concentrated q's objective by 1e-9 of itself).
constexpr double kRounding = 1e-8;

}  // namespace

PolishResult polish(Model& model, const Dataset& data, const std::vector<Index>& bags, const PolishOptions& options) {
  const ParamSlice q = param_slice(model, ParamBlockId::q_chol);
  const Index head = q.offset + q.size, rest = model.num_params() - head;
  ObjectiveOptions oo = options.objective;
  oo.q_moments_gradient = true;
  // The steps before the reading move q alone: they skip the way back into the kernel.
  ObjectiveOptions q_alone = oo;
  q_alone.q_moments_only = true;
  // An evaluation's steps on q share its kernel: the second reads the first's features.
  FeatureStore features(oo.feature_store_mb);
  q_alone.features = &features;
  PolishResult res;
  // q's natural-gradient step. 1 is the exact optimum where the data term is quadratic in f; where
  // it is far from that (small Poisson counts under the delta method), a step of 1 can lower the
  // objective, every reading then lies below where q started, and the line search fails however
  // short its step: on the swiss roll's 100 and 150 bags the polish ended up to 10 nats below
  // where L-BFGS alone went (docs/experiments.md, "The polish's steps on q"). An evaluation's
  // passes share the rest, so a pass that reads less than the one before says the step overshot:
  // it is halved, and lengthened by a quarter after each evaluation without such a fall (a fall at
  // a wild trial point should not slow the steps for good).
  double q_step = 1.0;
  // first_value: where given, the objective at theta itself, before q moves (the first pass reads
  // it when q_steps > 0).
  auto evaluate = [&](const Vector& theta, double* first_value = nullptr) {
    model.unpack(theta);
    Point p;
    ++res.evaluations;
    bool fell = false;
    try {
      Vector grad;
      double previous = -INFINITY;
      for (int k = 0; k <= options.q_steps; ++k) {
        if (k == options.q_steps) {
          // Read where the model will be unpacked to: q_chol's round trip through its packed form
          // moves it by rounding, which a concentrated q turns into 1e-9 of the objective.
          p.at = model.pack();
          model.unpack(p.at);
        }
        const ObjectiveValue v = elbo(model, data, bags, 1.0, &grad, k == options.q_steps ? oo : q_alone);
        model.jitter = std::max(model.jitter, v.jitter_used);
        if (k == 0 && first_value) *first_value = v.elbo;
        if (v.elbo < previous - kRounding * std::abs(previous) && q_step > options.smallest_q_step) {
          q_step = std::max(options.smallest_q_step, 0.5 * q_step);
          res.smallest_q_step = std::min(res.smallest_q_step, q_step);
          fell = true;
        }
        previous = v.elbo;
        if (k == options.q_steps) {
          p.value = v.elbo;
          p.g = grad.tail(rest);
          p.jitter = model.jitter;
        }
        natural_gradient_step_halving(model, v.grad_q_mean, v.grad_q_cov, q_step);
      }
    } catch (const NumericalError&) {
      p.value = -INFINITY;
    }
    if (!std::isfinite(p.value) || !p.g.allFinite()) p.value = -INFINITY;
    p.theta = model.pack();
    if (!fell && std::isfinite(p.value)) q_step = std::min(1.0, 1.25 * q_step);
    return p;
  };
  // Where the epochs left the fit: the polish returns there unless it ends higher (a step of size
  // 1 on q is not always an ascent where a term is not log-concave in f).
  const Vector start = model.pack();
  const double start_jitter = model.jitter;
  double start_value = -INFINITY;
  Point cur;
  if (options.q_steps > 0) {
    cur = evaluate(start, &start_value);  // its first pass reads the start, so no pass of its own
  } else {
    try {
      start_value = elbo(model, data, bags, 1.0, nullptr, oo).elbo;
    } catch (const NumericalError&) {
    }
    cur = evaluate(start);
  }
  res.elbo = cur.value;
  if (!std::isfinite(cur.value)) {
    model.unpack(start);
    model.jitter = start_jitter;
    res.elbo = start_value;
    res.stop_reason = "polished";
    return res;
  }
  std::vector<std::pair<Vector, Vector>> memory;  // (s, y) of the last accepted steps, for -ELBO
  std::vector<double> gains;                      // what the last accepted steps gained
  bool restarted = false;
  res.stop_reason = "polish_budget";
  while (res.evaluations < options.evaluations) {
    Vector d = quasi_newton_direction(memory, cur.g);
    if (memory.empty() || d.dot(cur.g) <= 0) {
      memory.clear();
      d = cur.g;
    }
    if (!(d.cwiseAbs().maxCoeff() > 0)) {
      res.stop_reason = "polished";
      break;
    }
    // Without curvature, along the gradient by a tenth of the largest change.
    double step = std::min(1.0, (memory.empty() ? 0.1 : 1.0) * options.largest_change / d.cwiseAbs().maxCoeff());
    if (options.gain_cap > 0 && !memory.empty() && !gains.empty())
      step = std::min(step, options.gain_cap * *std::max_element(gains.begin(), gains.end()) / d.dot(cur.g));
    bool moved = false;
    for (int tries = 0; tries < 5 && res.evaluations < options.evaluations && !moved; ++tries, step *= 0.25) {
      Vector theta = cur.theta;
      theta.tail(rest) += step * d;
      Point trial = evaluate(theta);
      if (trial.value < cur.value + 1e-4 * step * d.dot(cur.g)) continue;  // Armijo
      const Vector s = trial.theta.tail(rest) - cur.theta.tail(rest), y = cur.g - trial.g;
      if (s.dot(y) > 1e-12 * s.norm() * y.norm()) memory.emplace_back(s, y);
      if (static_cast<int>(memory.size()) > options.memory) memory.erase(memory.begin());
      gains.push_back(trial.value - cur.value);
      if (static_cast<int>(gains.size()) > options.memory) gains.erase(gains.begin());
      cur = std::move(trial);
      moved = true;
      ++res.steps;
      res.trials.push_back(tries + 1);
      res.elbo = cur.value;
      model.unpack(cur.at);
      model.jitter = cur.jitter;
      if (options.accepted && !options.accepted(cur.value)) {
        res.stop_reason = "callback";
        return res;
      }
    }
    if (!moved && (restarted || memory.empty())) {
      if (res.evaluations < options.evaluations) res.stop_reason = "polished";
      break;
    }
    restarted = !moved;
    if (!moved) memory.clear();
  }
  model.unpack(cur.at);
  model.jitter = cur.jitter;
  if (!(res.elbo > start_value)) {
    model.unpack(start);
    model.jitter = start_jitter;
    res.elbo = start_value;
  }
  return res;
}

}  // namespace vbagg
