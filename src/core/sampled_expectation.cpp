// The sampled expectation of a bag term (MODEL.md 4e ii): an unbiased estimate of
// E_q[log p(y_a | eta(f_a))] from S draws of the bag's latent values,
//   f_s = m + T^T eps_s + sqrt(d) .* eta_s,  eps_s ~ N(0, I_M),  eta_s ~ N(0, I_N),
// with T = L_v^T L_W^{-1} K_Wa and the residual d = s^2 - colsum(T^2) (the nystrom form of q), and
// pathwise derivatives. T is read only through T^T eps, and the gradient with respect to T is
// eps G^T, of rank S: O(M N S) per bag rather than O(M^2 N). Every likelihood and link has it: a likelihood supplies
// log p(y | eta) and its derivative (aggregate_log_p), a link Psi and Psi'.
//
// The draws are fresh at every optimiser step (DrawKey::step); a sample average held fixed for a
// whole run lets L_v fit its few draws, and the fit is nonsense (MODEL.md 4e), so the deterministic
// optimiser (L-BFGS) does not take this expectation. Nor do natural-gradient steps: their gradient
// with respect to q's covariance, from pathwise draws, carries L_v^{-1} and its noise grows as q
// concentrates (measured: the negative binomial's fits diverged); Adam takes it.
#include <cmath>

#include "counter_rng.hpp"
#include "likelihood.hpp"
#include "link.hpp"

namespace vbagg {

double sampled_bag_term(const ModelSpec& spec, const BagLikelihood& lik, const Vector& params, const BagPosterior& bag,
                        BagGradient* grad) {
  const LinkFunction& link = link_of(spec.link);
  const Index n = bag.m.size(), M = bag.t->rows(), S = bag.draws.samples;
  const Vector w = lik.aggregate_weights(spec, bag.weight);
  const DrawKey& key = bag.draws;
  // eps: M x S, then eta: n x S, one stream per bag and step.
  Matrix E(M, S), H(n, S);
  for (Index s = 0; s < S; ++s)
    for (Index j = 0; j < M; ++j)
      E(j, s) = counter_normal(key.seed, key.step, key.bag, static_cast<std::uint64_t>(s * M + j));
  const std::uint64_t offset = static_cast<std::uint64_t>(S * M);
  for (Index s = 0; s < S; ++s)
    for (Index i = 0; i < n; ++i)
      H(i, s) = counter_normal(key.seed, key.step, key.bag, offset + static_cast<std::uint64_t>(s * n + i));
  const Vector& d = *bag.d;
  const Vector sd = d.cwiseSqrt();
  Matrix F = bag.t->transpose_times(E);  // n x S
  F.colwise() += bag.m;
  F += sd.asDiagonal() * H;

  double value = 0;
  Matrix G;  // d log p_s / d f_is, divided by S
  Vector g_params = Vector::Zero(params.size());
  double g_unit = 0;
  if (grad) G.resize(n, S);
  for (Index s = 0; s < S; ++s) {
    double eta = 0;
    for (Index i = 0; i < n; ++i) eta += w[i] * link.psi(F(i, s));
    BagLikelihood::AggregateGradient ag;
    value += lik.aggregate_log_p(params, bag, w, eta, grad ? &ag : nullptr);
    if (grad) {
      for (Index i = 0; i < n; ++i) G(i, s) = ag.d_eta * w[i] * link.psi_derivative(F(i, s)) / static_cast<double>(S);
      if (ag.d_params.size()) g_params += ag.d_params / static_cast<double>(S);
      g_unit += ag.d_unit_log_sd / static_cast<double>(S);
    }
  }
  if (grad) {
    grad->gm = G.rowwise().sum();
    grad->gs2 = Vector::Zero(n);         // s2 enters only through d
    grad->gT_factors.push_back({E, G});  // d/dT of T^T eps = eps G^T
    // d/d(sd_i) = sum_s G_is eta_is, sd_i = sqrt(d_i).
    const Vector g_sd = G.cwiseProduct(H).rowwise().sum();
    grad->gd = Vector::Zero(n);
    for (Index i = 0; i < n; ++i)
      if (sd[i] > 0) grad->gd[i] = g_sd[i] / (2 * sd[i]);
    grad->g_params = g_params;
    grad->g_unit_log_sd = g_unit;
  }
  return value / static_cast<double>(S);
}

}  // namespace vbagg
