#include "natgrad.hpp"

#include <Eigen/Cholesky>

#include "linalg.hpp"

namespace vbagg {

bool natural_gradient_step(Model& model, const Vector& grad_mean, const Matrix& grad_cov, double step) {
  if (model.spec.map_estimate)
    throw ConfigError("natural-gradient steps need a variational posterior, not a MAP estimate");
  const Matrix Lv_inv = lower_inverse(model.q_chol);
  const Matrix P = Lv_inv.transpose() * Lv_inv;  // S^{-1}
  // With the KL of N(0, I): dELBO/dS = grad_cov - (I - P)/2 and dELBO/dm = grad_mean - m, so
  // theta2' = theta2 + step dELBO/dS gives the new precision
  //   P' = (1 - step) P + step (I - 2 grad_cov),
  // and theta1' = theta1 + step (dELBO/dm - 2 dELBO/dS m) simplifies to m' = m + step S' (grad_mean - m).
  Matrix P_new = (1 - step) * P - 2 * step * grad_cov;
  P_new.diagonal().array() += step;
  const Eigen::LLT<Matrix> precision(P_new);
  if (precision.info() != Eigen::Success) return false;
  // A term that is log-concave in f has grad_cov <= 0, so P' >= (1 - step) P. A term that is not
  // (the square link's likelihood; a unit effect shared by several periods, whose term integrates
  // the effect out and rewards variance where the months' residuals agree) can take P' close to
  // singular: the variance explodes and exp(f) overflows. Such a step is refused, and halved by
  // the caller, unless P' >= (1 - step) P / 2: the variance grows at most 2/(1 - step)-fold.
  if (Eigen::LLT<Matrix>(P_new - 0.5 * (1 - step) * P).info() != Eigen::Success) return false;
  const Matrix LP_inv = lower_inverse(precision.matrixL());
  const Matrix S_new = LP_inv.transpose() * LP_inv;
  const Eigen::LLT<Matrix> cov(S_new);
  if (cov.info() != Eigen::Success) return false;
  const Matrix L_new = cov.matrixL();
  if (!L_new.allFinite() || (L_new.diagonal().array() <= 0).any()) return false;
  model.q_mean += step * (S_new * (grad_mean - model.q_mean));
  model.q_chol = L_new.triangularView<Eigen::Lower>();
  return true;
}

void natural_gradient_step_halving(Model& model, const Vector& grad_mean, const Matrix& grad_cov, double step) {
  while (!natural_gradient_step(model, grad_mean, grad_cov, step) && step > 1e-6) step *= 0.5;
}

}  // namespace vbagg
