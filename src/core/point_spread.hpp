// The spread of the point estimates (Model::spread): what q's intervals leave out when the kernel's
// hyperparameters, the mean and fixed effects and the noise parameters are taken as known.
//
// The fit maximises the ELBO over q and these parameters theta together. Over theta alone, with q at
// its optimum for each value, max_q ELBO(q, theta) is the model's approximate log evidence, and
// N(theta_hat, Sigma) with Sigma the inverse of its negative Hessian is its Laplace approximation
// (the joint-precision uncertainty R disaggregation's predictions draw their parameters from). The
// Hessian is that of the profile: by forward differences of the gradient of theta, read with q
// moved to its optimum for each displaced theta by natural-gradient steps, so it carries how q
// follows theta (the mean and q's mean trade off, the kernel variance and q's spread too).
//
// Directions the ELBO does not bound (a kernel part whose variance has gone to nothing, a noise
// parameter on a plateau) would get an unbounded variance and a linearisation that is not true that
// far: their eigenvalues are raised to 1 / max_sd^2, so no parameter moves by more than max_sd
// (its values are logs and coefficients of standardised covariates, where 1 is a wide spread).
#pragma once

#include <vector>

#include "dataset.hpp"
#include "model.hpp"
#include "objective.hpp"

namespace vbagg {

struct SpreadOptions {
  ObjectiveOptions objective;  // threads and processes
  // Natural-gradient steps that bring q to its optimum for a displaced theta before the gradient is
  // read. Their error shrinks geometrically and enters the Hessian undivided by the displacement.
  // q is first settled at the fit (until a step moves it by at most `settled`, or none climbs);
  // each displaced reading starts from there and takes at least
  // q_steps steps, until one moves q by at most `contraction` of the first or by at most
  // `settled`, 1e-3 of the displacement: q's response to theta is read to about 1e-3 where it is
  // of order one. On a 200-unit country (negative binomial, unit effect) the sds after 1, 2 and 3
  // steps of size 1 were within 2e-3, 3e-4 and 2e-6 of those after 6: there two steps do. Past
  // max_q_steps q counts as settled only at the floor of its steps' rounding (floor_of_steps).
  int q_steps = 2;
  int max_q_steps = 50;
  // Where the steps do not settle within max_q_steps (q weakly pinned: 14-17 provinces, the folds
  // of a small country's cross-validation), q's response and the profile are read from the ELBO's
  // Hessian in q and theta instead (q_hessian.hpp), when q has at most max_hessian_q packed entries
  // (M + M(M+1)/2: M up to 53); it costs two passes over the data per entry. `hessian` takes that
  // route from the start.
  Index max_hessian_q = 1500;
  bool hessian = false;
  double smallest_step = 1.0 / 64;
  double settled = 1e-6;
  double contraction = 0.02;
  // The displacement of each parameter in the forward differences: their error is of its order,
  // relative, and rounding's is the gradient's noise over it. That noise follows K_zz's condition:
  // with inducing inputs at 14 close points it reached 1e-5 (the added variances off by 0.6 % at
  // this step, 8 % at 1e-4; tests/core/point_spread_test.cpp). Central differences at 1e-2 took a reading per
  // direction more and moved a 200-unit country's sds by 0.4 % at most.
  double step = 1e-3;
  double max_sd = 1.0;
};

// Whether q's natural-gradient steps, not settled after SpreadOptions::max_q_steps, have come down
// to the floor of their own rounding, which grows with q's size: each of the last ten `distances`
// (q's move per step) at most 1e-3 of the first, or at most twice `rounding`, the floor measured
// where q was settled at the fit. A space-time fit's 20,300 entries of q came down geometrically
// from 4.9e-3 to 3-4e-6 at the fit and stayed there, the ELBO level to 1e-12; a displaced reading
// of the same fit started at 2.9e-5 and came down to 4.2e-6, not 1e-3 below its first. Returns
// the largest of the last ten, or -1 where they have not come down (however level they are: on
// 24 units, readings whose halved and doubled steps cycled at distances above their first were
// level, and taken as settled they made maps of non-finite means).
double floor_of_steps(const std::vector<double>& distances, double rounding);

// The number of the field's parameters a direction moves (PointSpread::field's rows): the layout's
// entries from the mean block to the mixing block.
Index spread_field_size(const Model& model);

// Whether a model's spread can be estimated: a variational model (not a MAP estimate) whose every
// source has a deterministic expectation (bound or delta). The sampled one's draws would need
// fixing for the differences, and fixed draws are what q must not fit. Readings that shared S
// draws were tried on the conjugate model of the tests: the sds came out 25 %, 10 % and 2 % too
// small at S = 256, 1,024 and 4,096 (M = 30), as q's steps would if they fitted the draws' sample
// covariance, whose eigenvalues spread by about sqrt(M/S).
bool spread_defined(const ModelSpec& spec);

// The spread of the model's point estimates on the listed bags (all of them, or with
// objective.processes this process's share; every process calls it alike). The model comes back
// as it went in (its parameters through their packed form, so q's Cholesky diagonal to rounding).
// Throws NumericalError when the objective is not finite around the fit.
PointSpread laplace_spread(Model& model, const Dataset& data, const std::vector<Index>& bags,
                           const SpreadOptions& options);

// The map's side of it: for a model with a spread, the derivative a_k(x) of the latent mean at x
// along each direction k, by forward differences of the means of the model moved along it.
// Var f(x) gains |a(x)|^2, and a joint draw gains a(x)^T eta with eta shared by every pixel.
class SpreadShifts {
 public:
  explicit SpreadShifts(const Model& model);
  Index directions() const { return static_cast<Index>(moved_.size()); }
  // A (directions() x X.cols()); column i is a(x_i). `base` is the model's own latent mean at X,
  // which every caller has already computed; scratch's kernel rows are overwritten.
  void into(const Eigen::Ref<const Matrix>& X, const Eigen::Ref<const Vector>& base, Matrix& A,
            LatentScratch& scratch) const;

 private:
  std::vector<Model> moved_;  // moved by h along each direction
  std::vector<Posterior> post_moved_;
  double h_ = 0;
};

}  // namespace vbagg
