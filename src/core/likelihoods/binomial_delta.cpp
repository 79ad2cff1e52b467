// The binomial bag term without draws, so that prevalence fits can take L-BFGS, the polish and the
// point estimates' spread. The bag's prevalence pi_a is taken as logit-normal, pi_a = sigma(ell)
// with ell ~ N(c, tau), and (c, tau) are chosen so that sigma(ell) has pi_a's mean and variance
// under q:
//  - E[pi_a] = sum_i w_i E[sigma(f_i)], exactly (each pixel's by Gauss-Hermite);
//  - Var[pi_a] = sum_i w_i^2 Var[sigma(f_i)] (exact) + sum_{i != j} g_i g_j C_ij with
//    g_i = w_i E[sigma'(f_i)], the first term of the covariances' expansion in C_ij (Stein's lemma).
// The term is then E[y log sigma(ell) + (n - y) log sigma(-ell)], by Gauss-Hermite over ell. For a
// bag of one pixel (a survey point) pi_a is logit-normal itself and the term is exact; for many
// weakly correlated pixels pi_a is nearly Normal with those moments.
//
// Two simpler forms lost to it against brute-force Monte Carlo (bench/experiments/binomial_forms.py:
// bags of 1-100 pixels, latent sds 0.3-2). The second-order expansion of log pi and log(1 - pi)
// about E[pi] (the exp link's delta method carried over) always overstates the term, by up to 5
// nats at a latent sd of 1, so it rewards q's variance. The logit of pi linearised at q's mean
// understates it, by up to 95 % of the gap between the truth and log p(y | E pi) at sd 2. This
// form's worst case is the smallest at sd 1 and 2 (20 % and 31 % of that gap): overstatements for
// large, strongly correlated bags, where the covariances' first term falls short.
#include "binomial_delta.hpp"

#include <algorithm>
#include <cmath>

#include "binomial_effect.hpp"
#include "core/gauss_hermite.hpp"
#include "core/types.hpp"

namespace vbagg {

namespace {

using Array = Eigen::ArrayXd;

const int kPixelNodes = 20;   // per pixel: the sums over a bag's pixels dominate the cost
const int kBagNodes = 32;     // over ell, once per bag
const double kFloor = 1e-12;  // a bag prevalence within this of 0 or 1 is held there

// The bag rule's nodes as a fixed-size array: its temporaries live on the stack.
using BagArray = Eigen::Array<double, kBagNodes, 1>;

// sigma(x) and sigma(-x) from one exponential, neither by subtraction from 1.
template <class A>
void logistic_pair(const A& x, A& p, A& q) {
  const A e = (-x.abs()).exp(), a = (1 + e).inverse(), b = e * a;
  p = (x >= 0).select(a, b);
  q = (x >= 0).select(b, a);
}

// The moments of sigma(ell), ell ~ N(c, s^2), by the quadrature rule, and their derivatives in c
// and tau = s^2 (the quadrature rule's own, or Stein's below kSteinBelow).
struct LogisticMoments {
  double p = 0, q = 0, var = 0;  // E sigma(ell), E sigma(-ell), Var sigma(ell)
  double p_c = 0, p_tau = 0;     // d E sigma / d c, d tau
  double var_c = 0, var_tau = 0;
  double log_p = 0, log_q = 0;  // E log sigma(ell), E log sigma(-ell)
  double pz = 0, s = 0;         // sum_k w_k sigma(x_k) z_k, and s: what dL/dtau needs
};

// E log sigma(+-ell) (log_p, log_q) only `with_logs`: the solves for c and tau need the moments alone.
LogisticMoments logistic_moments(double c, double s, bool with_logs = false) {
  const NormalQuadrature& g = normal_quadrature(kBagNodes);
  const Eigen::Map<const BagArray> z(g.nodes.data()), w(g.weights.data());
  const BagArray x = c + s * z;
  BagArray p, q;
  logistic_pair(x, p, q);
  const BagArray d1 = p * q, d2 = d1 * (q - p);  // sigma', sigma''
  LogisticMoments o;
  o.s = s;
  o.p = (w * p).sum();
  o.q = (w * q).sum();
  const BagArray dev = p - o.p;
  o.var = (w * dev.square()).sum();
  o.p_c = (w * d1).sum();
  o.var_c = 2 * (w * dev * d1).sum();
  if (s < kSteinBelow) {
    o.p_tau = 0.5 * (w * d2).sum();
    o.var_tau = (w * (d1.square() + dev * d2)).sum();
  } else {
    o.p_tau = (w * d1 * z).sum() / (2 * s);
    o.var_tau = (w * dev * d1 * z).sum() / s;
  }
  o.pz = (w * p * z).sum();
  if (!with_logs) return o;
  const BagArray soft = (-x.abs()).exp().log1p();  // log(1 + e^{-|x|})
  o.log_p = (w * ((x >= 0).select(BagArray::Zero(), x) - soft)).sum();
  o.log_q = (w * ((x >= 0).select(-x, BagArray::Zero()) - soft)).sum();
  return o;
}

// The c with E[sigma(c + s Z)] = target, for 0 < target <= 1/2. log E[sigma(c + s Z)] is concave
// and increasing in c (sigma is log-concave, and so is its Gaussian blur), so Newton's steps on it
// reach the root from any start, monotonically after the first.
double matching_centre(double target, double s) {
  double c = std::log(target / (1 - target)) * std::sqrt(1 + M_PI * s * s / 8);  // the probit approximation
  const double log_target = std::log(target);
  int polish = 2;  // Newton's steps past 1e-8 (each squares the error): the root to rounding, so
                   // that finite differences of the term see no solver noise
  for (int it = 0; it < 100; ++it) {
    const LogisticMoments o = logistic_moments(c, s);
    const double step = (std::log(o.p) - log_target) * o.p / o.p_c;
    c -= step;
    if (std::abs(step) <= 1e-8 * (1 + std::abs(c)) && polish-- == 0) return c;
  }
  throw NumericalError("the binomial delta term's centre did not converge (mean " + std::to_string(target) + ")");
}

// The tau (and c) whose sigma(ell) has the mean `mean` (0 < mean <= 1/2) and the variance `var`
// (0 < var < mean (1 - mean)). At a fixed mean the variance grows with tau: Newton's steps on
// log tau, bisecting once the root is bracketed when a step would leave the bracket.
void match_logit_normal(double mean, double var, double& c, double& tau) {
  double u = std::log(var) - 2 * std::log(mean * (1 - mean));  // the delta method's tau
  double lo = -INFINITY, hi = INFINITY;
  int polish = 2;  // as in matching_centre
  for (int it = 0; it < 200; ++it) {
    const double s = std::exp(0.5 * u);
    c = matching_centre(mean, s);
    const LogisticMoments o = logistic_moments(c, s);
    const double excess = o.var - var;
    (excess > 0 ? hi : lo) = u;
    // d var / d tau along the curve of fixed mean, times tau.
    const double slope = std::exp(u) * (o.var_tau - o.var_c * o.p_tau / o.p_c);
    double next = u - excess / slope;
    if (!std::isfinite(next) || next < lo || next > hi)
      next = std::isfinite(lo) && std::isfinite(hi) ? 0.5 * (lo + hi) : u + (excess > 0 ? -2.0 : 2.0);
    if (std::abs(next - u) < 1e-8 && polish-- == 0) {
      tau = std::exp(next);
      c = matching_centre(mean, std::sqrt(tau));
      return;
    }
    u = next;
  }
  throw NumericalError("the binomial delta term's logit-normal did not converge (mean " + std::to_string(mean) +
                       ", variance " + std::to_string(var) + ")");
}

}  // namespace

void logit_normal_with(double mean, double mean_c, double var, double& c, double& tau) {
  tau = 0;
  if (var > 0) {
    // By the symmetry sigma(-x) = 1 - sigma(x), the logit-normal is matched for the smaller mean.
    match_logit_normal(std::min(mean, mean_c), var, c, tau);
    if (mean > 0.5) c = -c;
  } else {
    c = std::log(mean / mean_c);
  }
}

namespace {

// The term L(c, tau) = E G(ell), ell ~ N(c, tau), G the log likelihood in the logit (without
// log C(n, y)): y log sigma(ell) + (n - y) log sigma(-ell), or with a unit effect the mixture of that
// over u; o holds sigma's moments at (c, tau) (with its logs, without an effect). dL/dc = E G'(ell);
// dL/dtau = E G''(ell) / 2 (Stein), or the rule's own derivative. Without an effect
// G' = y - n sigma(ell) and G'' = -n sigma'(ell). The effect's derivative into grad.
LogitExpectation logit_term(const BagPosterior& b, double c, const LogisticMoments& o, BagGradient* grad) {
  const double n = b.trials, y = b.y;
  if (b.has_unit_effect) {
    const LogitExpectation e = binomial_effect_expectation(y, n, c, o.s, b.unit_log_sd, grad != nullptr);
    if (grad) grad->g_unit_log_sd = e.d_log_sd;
    return e;
  }
  LogitExpectation e;
  e.value = y * o.log_p + (n - y) * o.log_q;
  e.d_centre = y * o.q - (n - y) * o.p;
  e.d_tau = o.s < kSteinBelow ? -0.5 * n * o.p_c : -n * o.pz / (2 * o.s);
  return e;
}

// A bag of one pixel: its prevalence sigma(f), f ~ N(m, s2), is logit-normal itself, so the term
// takes (c, tau) = (m, s2) as they are: exact at any latent variance, where matching the moments
// that the per-pixel rule gives would carry that rule's error (0.1 nats for 1,000 tested at a
// latent sd of 2). Its derivatives are those in m and s2 alone.
double one_pixel_term(const ModelSpec& spec, const BagPosterior& b, BagGradient* grad) {
  const double s2 = std::max(b.s2[0], 0.0);
  const LogisticMoments o = logistic_moments(b.m[0], std::sqrt(s2), !b.has_unit_effect);
  const LogitExpectation e = logit_term(b, b.m[0], o, grad);
  if (grad) {
    grad->gm = Vector::Constant(1, e.d_centre);
    grad->gs2 = Vector::Constant(1, b.s2[0] >= 0 ? e.d_tau : 0.0);
    if (spec.covariance == CovarianceMode::exact)
      grad->gC = Matrix::Zero(1, 1);
    else
      grad->gd = Vector::Zero(1);
  }
  return e.value;
}

}  // namespace

double binomial_delta_term(const ModelSpec& spec, const BagPosterior& b, const Vector& w_in, BagGradient* grad) {
  if (b.m.size() == 1) return one_pixel_term(spec, b, grad);
  const Array w = w_in.array(), m = b.m.array(), s2 = b.s2.array().max(0.0), s = s2.sqrt();
  const bool exact = spec.covariance == CovarianceMode::exact;

  // Each pixel's moments of sigma(f_i) and, for the gradient, their derivatives in m_i and s2_i:
  // by m, d/dm E h = E h'; by s2, the rule's own derivative sum_k w_k h'(x_k) z_k / (2 s) (Stein's
  // E h'' / 2 below kSteinBelow). h is sigma (P), sigma^2 (S2) and sigma' (P1).
  const NormalQuadrature& gq = normal_quadrature(kPixelNodes);
  const Index N = m.size();
  Array P = Array::Zero(N), Pc = P, S2 = P, P1 = P;
  Array S2_m, P1_m, P_z, S2_z, P1_z, S2_st, P1_st;  // d/dm; sum w h' z; Stein's E h''
  if (grad) S2_m = P1_m = P_z = S2_z = P1_z = S2_st = P1_st = Array::Zero(N);
  Array p, q;
  for (Index k = 0; k < gq.nodes.size(); ++k) {
    const double wk = gq.weights[k], zk = gq.nodes[k];
    logistic_pair<Array>(m + s * zk, p, q);
    const Array d1 = p * q;
    P += wk * p;
    Pc += wk * q;
    S2 += wk * p.square();
    P1 += wk * d1;
    if (grad) {
      const Array d2 = d1 * (q - p), d3 = d1 * (1 - 6 * d1), sq1 = 2 * p * d1;  // sigma'', sigma''', (sigma^2)'
      S2_m += wk * sq1;
      P1_m += wk * d2;
      P_z += (wk * zk) * d1;
      S2_z += (wk * zk) * sq1;
      P1_z += (wk * zk) * d2;
      S2_st += wk * 2 * (d1.square() + p * d2);
      P1_st += wk * d3;
    }
  }
  double mean = (w * P).sum(), mean_c = (w * Pc).sum();
  const bool floored = mean < kFloor || mean_c < kFloor;
  if (mean < kFloor) mean = kFloor, mean_c = 1 - kFloor;
  if (mean_c < kFloor) mean_c = kFloor, mean = 1 - kFloor;

  // Var[pi_a]: the pixels' own variances, and the covariances' first term g^T C g - sum_i g_i^2 s2_i.
  const Vector g = (w * P1).matrix();
  Vector Cg, h;
  if (exact) {
    Cg = *b.C * g;
  } else {
    h = b.t->times(g);
    Cg = b.d->cwiseProduct(g) + b.t->transpose_times(h);
  }
  double var = (w.square() * (S2 - P.square())).sum() + g.dot(Cg) - (g.array().square() * s2).sum();
  const double var_max = 0.999 * mean * mean_c;  // a logit-normal's variance is below mean (1 - mean)
  const bool capped = var > var_max;
  var = std::clamp(var, 0.0, var_max);

  double c = 0, tau = 0;
  logit_normal_with(mean, mean_c, var, c, tau);
  const LogisticMoments o = logistic_moments(c, std::sqrt(tau), !b.has_unit_effect);
  const LogitExpectation e = logit_term(b, c, o, grad);
  const double value = e.value, L_c = e.d_centre, L_tau = e.d_tau;
  if (!grad) return value;

  // (c, tau) come from E sigma(ell) = mean and Var sigma(ell) = var:
  // (dL/dmean, dL/dvar) = J^{-T} (dL/dc, dL/dtau), J the Jacobian of (E sigma, Var sigma) in (c, tau).
  const double det = o.p_c * o.var_tau - o.p_tau * o.var_c;
  const double d_mean = floored ? 0.0 : (L_c * o.var_tau - o.var_c * L_tau) / det;
  const double d_var = capped ? 0.0 : (o.p_c * L_tau - o.p_tau * L_c) / det;

  // mean = sum_i w_i P_i; var = sum_i w_i^2 (S2_i - P_i^2) + g^T C g - sum_i g_i^2 s2_i, g_i = w_i P1_i.
  const Array two_off = 2 * (Cg.array() - g.array() * s2);  // d (g^T C g - sum g^2 s2) / d g
  const Array safe_s = s.max(kSteinBelow);
  const Array dP_ds2 = (s < kSteinBelow).select(0.5 * P1_m, P_z / (2 * safe_s));
  const Array dS2_ds2 = (s < kSteinBelow).select(0.5 * S2_st, S2_z / (2 * safe_s));
  const Array dP1_ds2 = (s < kSteinBelow).select(0.5 * P1_st, P1_z / (2 * safe_s));
  const Array var_m = w.square() * (S2_m - 2 * P * P1) + two_off * w * P1_m;
  const Array var_s2 = w.square() * (dS2_ds2 - 2 * P * dP_ds2) + two_off * w * dP1_ds2 - g.array().square();
  grad->gm = (d_mean * w * P1 + d_var * var_m).matrix();
  grad->gs2 = (d_mean * w * dP_ds2 + d_var * var_s2).matrix();
  if (exact) {
    grad->gC = d_var * g * g.transpose();
  } else {
    grad->gd = d_var * g.array().square().matrix();
    grad->gT_factors.push_back({Matrix(2 * d_var * h), Matrix(g)});
  }
  return value;
}

}  // namespace vbagg
