#include "q_hessian.hpp"

#include <LBFGS.h>

#include <Eigen/Cholesky>
#include <cmath>
#include <stdexcept>

#include "param_layout.hpp"

namespace vbagg {

namespace {

// The displacement of q's packed entries in the central differences: its truncation error is of
// order its square (1e-8, relative), and the gradient's rounding over it stays below that.
constexpr double kQStep = 1e-4;

}  // namespace

QHessianProfile q_hessian_profile(Model& model, const Dataset& data, const std::vector<Index>& bags,
                                  const ObjectiveOptions& options, const std::vector<Index>& theta, double theta_step) {
  const Index nq = param_slice(model, ParamBlockId::q_mean).size + param_slice(model, ParamBlockId::q_chol).size;
  const Index n = static_cast<Index>(theta.size());
  const double jitter = model.jitter;
  Vector x = model.pack();
  // The ELBO and its gradient at packed parameters `at`, refused when not finite.
  auto gradient = [&](const Vector& at, Vector& g) {
    model.unpack(at);
    model.jitter = jitter;
    const ObjectiveValue v = elbo(model, data, bags, 1.0, &g, options);
    if (!std::isfinite(v.elbo) || !g.allFinite()) throw NumericalError("the objective is not finite next to the fit");
    return v.elbo;
  };

  // q to its optimum: L-BFGS on -ELBO over q's entries, keeping the best point it saw (a line
  // search that fails at the objective's rounding ends it there).
  Vector best_q = x.head(nq);
  double best = -INFINITY;
  auto minus_elbo = [&](const Vector& q, Vector& grad_q) -> double {
    Vector at = x, g;
    at.head(nq) = q;
    double value;
    try {
      value = gradient(at, g);
    } catch (const NumericalError&) {
      grad_q.setZero(nq);
      return INFINITY;  // the line search backs off
    }
    if (value > best) {
      best = value;
      best_q = q;
    }
    grad_q = -g.head(nq);
    return -value;
  };
  LBFGSpp::LBFGSParam<double> param;
  param.m = 20;
  param.epsilon = 1e-9;
  param.epsilon_rel = 1e-9;
  param.max_iterations = 2000;
  param.max_linesearch = 40;
  LBFGSpp::LBFGSSolver<double> solver(param);
  Vector q = x.head(nq);
  double fq;
  try {
    solver.minimize(minus_elbo, q, fq);
  } catch (const std::exception&) {
    // No further decrease along L-BFGS's direction: the best point seen is q's optimum.
  }
  if (!std::isfinite(best)) throw NumericalError("the objective is not finite next to the fit");
  x.head(nq) = best_q;

  // The Hessian over q's entries and theta's, by central differences of the gradient.
  std::vector<Index> entries;
  for (Index j = 0; j < nq; ++j) entries.push_back(j);
  entries.insert(entries.end(), theta.begin(), theta.end());
  const Index J = nq + n;
  Matrix H(J, J);
  for (Index c = 0; c < J; ++c) {
    const double h = c < nq ? kQStep : theta_step;
    Vector up = x, down = x, g_up, g_down;
    up[entries[static_cast<size_t>(c)]] += h;
    down[entries[static_cast<size_t>(c)]] -= h;
    gradient(up, g_up);
    gradient(down, g_down);
    for (Index r = 0; r < J; ++r) {
      const Index e = entries[static_cast<size_t>(r)];
      H(r, c) = (g_up[e] - g_down[e]) / (2 * h);
    }
  }
  H = 0.5 * (H + H.transpose()).eval();
  model.unpack(x);
  model.jitter = jitter;

  Eigen::LLT<Matrix> curvature(-H.topLeftCorner(nq, nq));
  if (curvature.info() != Eigen::Success) throw NumericalError("q's Hessian is not negative definite at its optimum");
  const Matrix follow = curvature.solve(H.topRightCorner(nq, n));  // d q / d theta
  QHessianProfile p;
  p.hessian = H.bottomRightCorner(n, n) + H.bottomLeftCorner(n, nq) * follow;
  p.response = follow.topRows(model.num_q());
  return p;
}

}  // namespace vbagg
