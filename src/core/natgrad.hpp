// Natural-gradient steps on the variational distribution q(v) = N(m_v, S_v) (Hensman et al. 2013,
// Salimbeni et al. 2018). In the natural parameters theta1 = S^{-1} m, theta2 = -S^{-1}/2 the
// natural gradient of the ELBO is its ordinary gradient with respect to the expectation
// parameters eta1 = m, eta2 = S + m m^T, which makes a step of size 1 exact for a Gaussian
// (conjugate) bag model and far better conditioned than steps on (m_v, L_v) otherwise.
#pragma once

#include "model.hpp"

namespace vbagg {

// One step of size `step` in (0, 1] from the data term's gradients with respect to m_v and S_v
// (ObjectiveValue::grad_q_mean, grad_q_cov); the whitened prior's KL is added here. Returns false,
// leaving the model unchanged, when the new precision is not positive definite.
bool natural_gradient_step(Model& model, const Vector& grad_mean, const Matrix& grad_cov, double step);

// natural_gradient_step from `step`, halved while it is refused, down to 1e-6 (then none is taken).
void natural_gradient_step_halving(Model& model, const Vector& grad_mean, const Matrix& grad_cov, double step);

}  // namespace vbagg
