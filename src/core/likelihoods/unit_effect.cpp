// The unit effect u_a ~ N(-sigma^2/2, sigma^2) on the log rate (MODEL.md 4g), integrated out of a
// count likelihood: each bag's observation model becomes the mixture g(t) = log int p(y | e^{t+u})
// N(u; -sigma^2/2, sigma^2) du over its log rate t, and the bag term is E_q[g(log mu_a)].
//
// The effect's mean is -sigma^2/2 so that E[e^u] = 1: the map's intensity is then the expected
// rate of a unit, and expected cases summed over a unit's pixels are its expected count (with a
// zero mean every map would be e^{sigma^2/2} too low for that, 28 % at sigma = 0.7).
//
// Why integrated rather than a variational q(u_a) per unit: a mean-field q(v) q(u) cannot hold the
// strong posterior correlation between the field and a unit's effect when counts are large (the
// data fix their sum, not their parts), and its optimum puts everything into the unit effects
// and switches the spatial field off (measured on the synthetic countries with Poisson counts).
// Integrated, the effect acts like the negative binomial's dispersion, as a property of the
// observation model.
//
// The integral over u is an adaptive Gauss-Hermite rule centred on the mode of the log-concave
// integrand with its curvature (accurate for large counts, where the integrand is narrow, and for
// small ones). log mu_a is taken as Normal with the delta method's moments and integrated by a
// second Gauss-Hermite rule, as the negative binomial does with log(r + mu).
#include <cmath>
#include <limits>

#include "core/gauss_hermite.hpp"
#include "core/log_sum_exp.hpp"
#include "count.hpp"

namespace vbagg {

namespace {

const int kOuterNodes = 10;  // over log mu
const int kInnerNodes = 16;  // over u

// Mode of h(u) = k(t + u) - u^2 / (2 sigma^2) (k = the likelihood's log pmf kernel, concave in its
// argument), by Newton's method safeguarded with the bracket that the sign of h' gives; the
// curvature -h'' at the mode into *curvature.
double mode_of(const CountLikelihood& lik, double y, double t, const Vector& params, double sigma2, double u,
               double* curvature) {
  double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
  double d1 = 0, d2 = 0;
  for (int it = 0; it < 200; ++it) {
    lik.log_pmf_kernel(y, t + u, params, &d1, &d2, nullptr);
    const double g = d1 - u / sigma2, c = -d2 + 1 / sigma2;
    if (g > 0)
      lo = u;
    else
      hi = u;
    double next = u + std::max(-2.0, std::min(2.0, g / c));  // at most e^2 per step in the rate
    if (!(next > lo && next < hi)) next = std::isfinite(lo) && std::isfinite(hi) ? 0.5 * (lo + hi) : next;
    if (std::abs(next - u) < 1e-13 * (1 + std::abs(u)) || hi - lo < 1e-13 * (1 + std::abs(u))) {
      u = next;
      break;
    }
    u = next;
  }
  lik.log_pmf_kernel(y, t + u, params, &d1, &d2, nullptr);
  *curvature = -d2 + 1 / sigma2;
  return u;
}

struct MixtureAtRate {
  double value = 0;  // log int exp(k(t + u)) N(u; 0, sigma^2) du
  double d1 = 0;     // d/dt
  double d2 = 0;     // d^2/dt^2
  double d_log_sd = 0;
  Vector dparams;
  double mode = 0;
  double u_mean = 0, u_var = 0;  // moments of u under the normalised integrand: u's conditional
};

// The mixture over u at one log rate t (without the pmf's constant part).
MixtureAtRate mixture_at(const CountLikelihood& lik, double y, double t, const Vector& params, double log_sd,
                         double start, bool with_params) {
  const double sigma2 = std::exp(2 * log_sd);
  double curvature = 0;
  MixtureAtRate out;
  out.mode = mode_of(lik, y, t, params, sigma2, start, &curvature);
  const double tau = 1 / std::sqrt(curvature);
  const NormalQuadrature& q = normal_quadrature(kInnerNodes);
  const Index n = q.nodes.size();
  Vector L(n), k1(n), k2(n), u(n);
  std::vector<Vector> kp(with_params ? static_cast<size_t>(n) : 0);
  for (Index j = 0; j < n; ++j) {
    u[j] = out.mode + tau * q.nodes[j];
    const double k =
        lik.log_pmf_kernel(y, t + u[j], params, &k1[j], &k2[j], with_params ? &kp[static_cast<size_t>(j)] : nullptr);
    L[j] = k - u[j] * u[j] / (2 * sigma2) + 0.5 * q.nodes[j] * q.nodes[j] + std::log(q.weights[j]);
  }
  Vector pi;
  out.value = log_sum_exp(L, q.weights, &pi) + std::log(tau) - log_sd;
  out.d1 = pi.dot(k1);
  out.d2 = pi.dot(k2) + pi.dot(k1.cwiseAbs2()) - out.d1 * out.d1;
  out.d_log_sd = pi.dot(u.cwiseAbs2()) / sigma2 - 1;
  out.u_mean = pi.dot(u);
  out.u_var = std::max(0.0, pi.dot(u.cwiseAbs2()) - out.u_mean * out.u_mean);
  if (with_params) {
    out.dparams = Vector::Zero(params.size());
    for (Index j = 0; j < n; ++j)
      if (pi[j] > 0) out.dparams += pi[j] * kp[static_cast<size_t>(j)];
  }
  return out;
}

}  // namespace

double unit_effect_score(const CountLikelihood& lik, double y, const CountMoments& mo, const Vector& params,
                         double log_sd, CountMomentsGradient* d, Vector* g_params, double* g_log_sd) {
  Vector dconst;
  const double constant = lik.log_pmf_constant(y, params, g_params ? &dconst : nullptr);
  if (!(mo.mean > 0)) {
    // A bag of zero weight: p(y | 0) is 1 for y = 0 whatever u is.
    if (d) *d = {};
    if (g_params) *g_params = dconst;
    if (g_log_sd) *g_log_sd = 0;
    return y == 0 ? 0.0 : -std::numeric_limits<double>::infinity();
  }
  const double rho = std::max(mo.rho, 0.0), b = std::sqrt(rho);
  // The effect's mean -sigma^2/2 moves the log rate; the rule below integrates u - its mean.
  const double half_var = 0.5 * std::exp(2 * log_sd);
  const double a = std::log(mo.mean) - 0.5 * rho - half_var;
  const NormalQuadrature& q = normal_quadrature(b > 0 ? kOuterNodes : 1);
  double value = 0, d_a = 0, d_b2 = 0, d_sd = 0;
  Vector dp = Vector::Zero(params.size());
  double start = 0;
  for (Index k = 0; k < q.nodes.size(); ++k) {
    const MixtureAtRate m = mixture_at(lik, y, a + b * q.nodes[k], params, log_sd, start, g_params != nullptr);
    start = m.mode;
    value += q.weights[k] * m.value;
    d_a += q.weights[k] * m.d1;
    d_b2 += q.weights[k] * 0.5 * m.d2;  // d/d b^2 by Stein's lemma
    d_sd += q.weights[k] * m.d_log_sd;
    if (g_params) dp += q.weights[k] * m.dparams;
  }
  if (d) {
    d->elog = 0;
    d->mean = d_a / mo.mean;
    d->rho = -0.5 * d_a + d_b2;
  }
  if (g_params) *g_params = dconst + dp;
  if (g_log_sd) *g_log_sd = d_sd - 2 * half_var * d_a;  // a depends on log sigma through -sigma^2/2
  return constant + value;
}

double unit_effect_mixture(const CountLikelihood& lik, double y, double log_total, const Vector& params, double log_sd,
                           double* d_log_total, Vector* d_params, double* d_log_sd) {
  const double half_var = 0.5 * std::exp(2 * log_sd);
  Vector dconst;
  const double constant = lik.log_pmf_constant(y, params, d_params ? &dconst : nullptr);
  const MixtureAtRate m = mixture_at(lik, y, log_total - half_var, params, log_sd, 0.0, d_params != nullptr);
  if (d_log_total) *d_log_total = m.d1;
  if (d_params) *d_params = dconst + m.dparams;
  if (d_log_sd) *d_log_sd = m.d_log_sd - 2 * half_var * m.d1;
  return constant + m.value;
}

double unit_effect_log_pmf(const CountLikelihood& lik, double y, double total, const Vector& params,
                           const UnitEffectMoments& unit) {
  const double constant = lik.log_pmf_constant(y, params, nullptr);
  if (!(total > 0)) return y == 0 ? 0.0 : -std::numeric_limits<double>::infinity();
  return constant + mixture_at(lik, y, std::log(total) + unit.mean, params, 0.5 * std::log(unit.var), 0.0, false).value;
}

UnitEffectMoments unit_effect_posterior(const CountLikelihood& lik, double y, double total, const Vector& params,
                                        double log_sd) {
  const double var = std::exp(2 * log_sd);
  if (!(total > 0)) return {-0.5 * var, var};
  const MixtureAtRate m = mixture_at(lik, y, std::log(total) - 0.5 * var, params, log_sd, 0.0, false);
  return {m.u_mean - 0.5 * var, m.u_var};
}

}  // namespace vbagg
