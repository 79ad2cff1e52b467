// The polish after a natural-gradient or L-BFGS fit (FitOptions::polish): quasi-Newton steps on
// the kernel, mean and the rest, with q following by full-batch natural-gradient steps.
//
// Minibatch Adam moves those ~40 numbers along a narrow valley (the mean, the kernel variances and
// q's whitened mean trade off) at the pace of the gradient's signal-to-noise ratio, and leaves the
// fit short of its optimum long after q has settled (docs/benchmarks.md, "Time to fit"). With q
// brought to its optimum for the rest before every reading, the gradient of the rest is that of
// the profile objective max_q ELBO, in which the valley is gone, and L-BFGS on it converges.
//
// It also follows L-BFGS over q and the rest together, which stops at its budget far from the
// optimum where the counts pin the field and q must contract far from the prior: there q's own
// natural-gradient steps get it there (docs/experiments.md, "The polish after L-BFGS").
#pragma once

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "dataset.hpp"
#include "model.hpp"
#include "objective.hpp"

namespace vbagg {

struct PolishOptions {
  // Budget of objective evaluations, each q_steps + 1 passes over the data; the first q_steps
  // only move q, so they skip the way back into the kernel (ObjectiveOptions::q_moments_only).
  int evaluations = 0;
  int memory = 10;  // L-BFGS pairs kept
  // Natural-gradient steps on q between setting the rest and reading the objective there. Two
  // follow q's optimum closely enough that the gradient of the rest is nearly the profile
  // gradient: on the 300,000-pixel benchmark country the polish came within 0.1 % of its end in
  // 165 s, against more than 270 s with one (docs/benchmarks.md, "Time to fit").
  int q_steps = 2;
  // The largest change of any parameter after q in one step: they are logs or coefficients, and
  // a larger move leaves q's optimum too far for one natural-gradient step to follow.
  double largest_change = 1.0;
  // The first trial of a quasi-Newton step promises (to first order, step * d.g) at most this many
  // times the largest gain of the last `memory` accepted steps; 0 leaves it uncapped. One pair
  // whose gradients barely changed makes the next direction long: on the 10⁶-pixel benchmark such
  // directions promised 300-400 nats where the steps before them gained 4-8, and their line
  // searches took four trials to come back (docs/benchmarks.md, "Time to fit").
  double gain_cap = 4.0;
  // q's natural-gradient step is halved, down to this, after a pass that read less than the one
  // before (polish.cpp); 1 keeps every step at 1. Smaller steps follow q's optimum too slowly for
  // the gradient of the rest to be the profile gradient.
  double smallest_q_step = 1.0 / 64;
  ObjectiveOptions objective;  // threads and processes; q_moments_gradient is set by polish()
  // Called with the full-data ELBO after every accepted step; returning false ends the polish.
  std::function<bool(double elbo)> accepted;
};

struct PolishResult {
  int evaluations = 0;
  int steps = 0;            // accepted
  std::vector<int> trials;  // evaluations each accepted step took
  double elbo = -INFINITY;
  // The shortest natural-gradient step q took: 1 unless a step of 1 lowered the objective.
  double smallest_q_step = 1.0;
  // FitResult's names: "polished" (a step along the gradient failed right after a restart of the
  // memory, or the objective was not finite after the first natural-gradient steps),
  // "polish_budget" (the evaluations ran out) or "callback".
  std::string stop_reason;
};

// Polishes the model on the listed bags of data (all of them, or with objective.processes this
// process's share). Each evaluation takes q_steps natural-gradient steps on q (of size 1, shortened
// while steps lower the objective) from the point it starts from, reads the objective and the
// gradient of the rest there, and takes one more step for the next start. A step's first trial is
// capped by gain_cap; a rejected trial point is forgotten and the line search retries at a quarter
// of the step, 5 times. The model ends where the best accepted objective was read, or where it
// started if that is better: PolishResult::elbo is the objective of the model it leaves.
PolishResult polish(Model& model, const Dataset& data, const std::vector<Index>& bags, const PolishOptions& options);

}  // namespace vbagg
