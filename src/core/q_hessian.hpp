// The profile of the ELBO over the point estimates theta, with q at its optimum for each theta,
// read from the Hessian of the ELBO in q and theta together rather than from steps on q.
//
// The spread (point_spread.hpp) reads the profile's Hessian by moving theta and letting
// natural-gradient steps carry q to its new optimum. Where q is weakly pinned (a fit of 14-17
// provinces, a fold of a small country's cross-validation) those steps can both overshoot and
// crawl, and 50 of them do not settle. There the implicit function theorem gives the same
// quantities from second derivatives at one point: with H the ELBO's Hessian over (q, theta) at q's
// optimum,
//   d q* / d theta = -H_qq^-1 H_qtheta,   profile Hessian = H_thetatheta - H_thetaq H_qq^-1 H_qtheta.
// q is first brought to its optimum by L-BFGS over its packed entries (mean and Cholesky factor,
// the diagonal as logs), and H is read by central differences of the full gradient: two passes
// over the data per entry of q and theta, so this suits small q (M of a few dozen).
#pragma once

#include <vector>

#include "dataset.hpp"
#include "model.hpp"
#include "objective.hpp"

namespace vbagg {

struct QHessianProfile {
  Matrix hessian;   // n x n: the profile's Hessian over the listed theta entries
  Matrix response;  // num_q x n: d q_mean / d theta at q's optimum
};

// `theta` lists packed entries of the model (after q); `theta_step` is their central-difference
// displacement. The model comes back with q at its optimum for its theta (the caller restores
// what it needs). Throws NumericalError when the objective is not finite near the model or q's
// Hessian is not negative definite at the optimum found (q at a saddle or on a plateau).
QHessianProfile q_hessian_profile(Model& model, const Dataset& data, const std::vector<Index>& bags,
                                  const ObjectiveOptions& options, const std::vector<Index>& theta, double theta_step);

}  // namespace vbagg
