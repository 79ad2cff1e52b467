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
//
// With periods, one effect may be shared by a unit's bags (one per period): the unit's term is then
// E_q[log int prod_j p(y_j | e^{t_j + u}) N(u) du], one integral over u of all its periods' counts, so
// a unit that reports high every month is explained once. The log rates t_j are independent Normals
// with their bags' delta-method moments; their expectation is taken dimension by dimension
// (shared_unit_effect_score), and one bag is the rule above.
#include <cmath>
#include <limits>

#include "core/gauss_hermite.hpp"
#include "core/linalg.hpp"
#include "core/log_sum_exp.hpp"
#include "count.hpp"
#include "effect_mixture.hpp"

namespace vbagg {

namespace {

constexpr int kOuterNodes = 10;  // over log mu
constexpr int kInnerNodes = 16;  // over u
// Over each direction of a unit's log rates in its term: a unit term takes 1 + nodes x periods
// mixtures, each over all its periods.
constexpr int kSharedOuterNodes = 6;

// The first two derivatives in u of sum_j k_j(t_j + u).
void log_kernel_slopes(const PredictorKernel& k, const double* t, Index n, double u, double* d1, double* d2) {
  double g = 0, h = 0;
  for (Index j = 0; j < n; ++j) {
    double a = 0, b = 0;
    k.slopes(j, t[j] + u, &a, &b);
    g += a;
    h += b;
  }
  *d1 = g;
  *d2 = h;
}

// Mode of h(u) = sum_j k_j(t_j + u) - u^2 / (2 sigma^2) (each k_j concave in its argument), by
// Newton's method safeguarded with the bracket that the sign of h' gives; the curvature -h'' at
// the mode into *curvature.
double mode_of(const PredictorKernel& k, const double* t, Index n, double sigma2, double u, double* curvature) {
  double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
  double d1 = 0, d2 = 0;
  for (int it = 0; it < 200; ++it) {
    log_kernel_slopes(k, t, n, u, &d1, &d2);
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
  log_kernel_slopes(k, t, n, u, &d1, &d2);
  *curvature = -d2 + 1 / sigma2;
  return u;
}

// A count likelihood's kernel in the log rate, for the bags' counts y.
class CountKernel final : public PredictorKernel {
 public:
  CountKernel(const CountLikelihood& lik, const double* y, const Vector& params) : lik_(lik), y_(y), params_(params) {}
  double at(Index j, double x, double* d1, double* d2, Vector* dparams) const override {
    return lik_.log_pmf_kernel(y_[j], x, params_, d1, d2, dparams);
  }

 private:
  const CountLikelihood& lik_;
  const double* y_;
  const Vector& params_;
};

// The mixture over u at the log rates t of the counts y (without the pmf's constant part).
EffectMixture mixture_at(const CountLikelihood& lik, const double* y, const double* t, Index n, const Vector& params,
                         double log_sd, double start, bool with_params, bool with_slopes = false) {
  return effect_mixture(CountKernel(lik, y, params), t, n, log_sd, start, params.size(), with_params, with_slopes);
}

EffectMixture mixture_at(const CountLikelihood& lik, double y, double t, const Vector& params, double log_sd,
                         double start, bool with_params) {
  return mixture_at(lik, &y, &t, 1, params, log_sd, start, with_params);
}

}  // namespace

EffectMixture effect_mixture(const PredictorKernel& kernel, const double* t, Index n, double log_sd, double start,
                             Index num_params, bool with_params, bool with_slopes) {
  const double sigma2 = std::exp(2 * log_sd);
  double curvature = 0;
  EffectMixture out;
  out.mode = mode_of(kernel, t, n, sigma2, start, &curvature);
  const double tau = 1 / std::sqrt(curvature);
  const NormalQuadrature& q = normal_quadrature(kInnerNodes);
  // Fixed-size node vectors and one params' derivative vector reused by every node: a unit term
  // takes up to eleven mixtures per evaluation, and a few allocations per node were most of the
  // allocator's 5 % of a small country's fit.
  using NodeVector = Eigen::Matrix<double, Eigen::Dynamic, 1, 0, kInnerNodes, 1>;
  const Index nodes = kInnerNodes;
  NodeVector L(nodes), u(nodes), pi;
  Matrix k1(n, nodes), k2(n, nodes);
  Matrix kp = Matrix::Zero(with_params ? num_params : 0, nodes);
  Vector dp;
  for (Index i = 0; i < nodes; ++i) {
    u[i] = out.mode + tau * q.nodes[i];
    double k = 0;
    for (Index j = 0; j < n; ++j) {
      k += kernel.at(j, t[j] + u[i], &k1(j, i), &k2(j, i), with_params ? &dp : nullptr);
      if (with_params && dp.size()) kp.col(i) += dp;
    }
    L[i] = k - u[i] * u[i] / (2 * sigma2) + 0.5 * q.nodes[i] * q.nodes[i] + std::log(q.weights[i]);
  }
  out.value = log_sum_exp(L, q.weights, &pi) + std::log(tau) - log_sd;
  out.d1 = k1 * pi;
  out.d2 = k2 * pi + k1.cwiseAbs2() * pi - out.d1.cwiseAbs2();
  out.d_log_sd = pi.dot(u.cwiseAbs2()) / sigma2 - 1;
  out.u_mean = pi.dot(u);
  out.u_var = std::max(0.0, pi.dot(u.cwiseAbs2()) - out.u_mean * out.u_mean);
  if (with_slopes) out.du_mean = k1 * pi.cwiseProduct(u) - out.u_mean * out.d1;
  if (with_params) {
    out.dparams = Vector::Zero(num_params);
    for (Index i = 0; i < nodes; ++i)
      if (pi[i] > 0) out.dparams += pi[i] * kp.col(i);
  }
  return out;
}

double unit_effect_score(const CountLikelihood& lik, double y, const CountMoments& mo, const Vector& params,
                         double log_sd, CountMomentsGradient* d, Vector* g_params, double* g_log_sd) {
  std::vector<CountMomentsGradient> one;
  const double value = shared_unit_effect_score(lik, {y}, {mo}, params, log_sd, d ? &one : nullptr, g_params, g_log_sd);
  if (d) *d = one[0];
  return value;
}

double unit_effect_mixture(const CountLikelihood& lik, double y, double log_total, const Vector& params, double log_sd,
                           double* d_log_total, Vector* d_params, double* d_log_sd) {
  const double half_var = 0.5 * std::exp(2 * log_sd);
  Vector dconst;
  const double constant = lik.log_pmf_constant(y, params, d_params ? &dconst : nullptr);
  const EffectMixture m = mixture_at(lik, y, log_total - half_var, params, log_sd, 0.0, d_params != nullptr);
  if (d_log_total) *d_log_total = m.d1[0];
  if (d_params) *d_params = dconst + m.dparams;
  if (d_log_sd) *d_log_sd = m.d_log_sd - 2 * half_var * m.d1[0];
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
  const EffectMixture m = mixture_at(lik, y, std::log(total) - 0.5 * var, params, log_sd, 0.0, false);
  return {m.u_mean - 0.5 * var, m.u_var};
}

double shared_unit_effect_score(const CountLikelihood& lik, const std::vector<double>& y,
                                const std::vector<CountMoments>& mo, const Vector& params, double log_sd,
                                std::vector<CountMomentsGradient>* d, Vector* g_params, double* g_log_sd) {
  const size_t n = y.size();
  double value = 0;
  Vector dp = Vector::Zero(params.size());
  if (d) d->assign(n, CountMomentsGradient{});
  // The bags that enter the mixture; a bag of zero mean has p(y | 0) = 1 for y = 0 whatever u is,
  // and adds nothing. Not even the pmf's constant: log p(0 | 0) = 0 splits into the constant and the
  // kernel's limit (for the negative binomial, r log r and -r log r), and the constant alone would
  // reward a growing dispersion without bound.
  std::vector<size_t> in;
  for (size_t j = 0; j < n; ++j) {
    if (mo[j].mean == 0) {
      if (y[j] != 0) value = -std::numeric_limits<double>::infinity();
      continue;
    }
    Vector dconst;
    value += lik.log_pmf_constant(y[j], params, g_params ? &dconst : nullptr);
    if (g_params) dp += dconst;
    in.push_back(j);
  }
  const Index J = static_cast<Index>(in.size());
  if (J == 0 || !std::isfinite(value)) {
    if (g_params) *g_params = dp;
    if (g_log_sd) *g_log_sd = 0;
    return value;
  }
  const double half_var = 0.5 * std::exp(2 * log_sd);
  const auto bag = [&](Index j) -> const CountMoments& { return mo[in[static_cast<size_t>(j)]]; };
  // The log rates t ~ N(a, S): S_jj = rho_j, and S_jk = h_j . h_k between bags whose field
  // uncertainty is shared (the same inducing values move every month of a unit: the months'
  // rates are strongly correlated, and a common shift of all of them is what the unit's effect
  // absorbs). Independent months would charge the field's uncertainty to each month in full.
  Vector ys(J), a(J);
  Matrix S = Matrix::Zero(J, J);
  for (Index j = 0; j < J; ++j) {
    const double rho = std::max(bag(j).rho, 0.0);
    ys[j] = y[in[static_cast<size_t>(j)]];
    a[j] = std::log(bag(j).mean) - 0.5 * rho - half_var;  // the effect's mean -sigma^2/2 moves every log rate
    S(j, j) = rho;
    for (Index k = 0; k < j; ++k)
      if (bag(j).h.size() && bag(k).h.size()) S(j, k) = S(k, j) = bag(j).h.dot(bag(k).h);
  }
  // E over t of the mixture G(t) along the columns of a factor L (S = L L^T, t = a + L z, z ~ N(0, I)):
  // G(a) + sum_c (E_c[G] - G(a)), E_c along z_c alone. Exact when G is a sum of functions of one z_c
  // each, and to second order otherwise (the cross terms have mean zero); one bag gives a
  // one-dimensional Gauss-Hermite rule.
  const NormalQuadrature& q = normal_quadrature(J == 1 ? kOuterNodes : kSharedOuterNodes);
  const EffectMixture centre = mixture_at(lik, ys.data(), a.data(), J, params, log_sd, 0.0, g_params != nullptr);
  double v = centre.value, d_sd = centre.d_log_sd;
  Vector d_a = centre.d1;
  if (g_params) dp += centre.dparams;
  Matrix dS = Matrix::Zero(J, J);
  if (S.diagonal().maxCoeff() > 0) {
    double jitter = 1e-12 * S.diagonal().maxCoeff();
    const Matrix L = jittered_cholesky(S, jitter, 1e-6 * S.diagonal().maxCoeff());
    Matrix dL = Matrix::Zero(J, J);
    Vector t(J);
    for (Index c = 0; c < J; ++c) {
      if (!(L.col(c).tail(J - c).cwiseAbs().maxCoeff() > 0)) continue;
      v -= centre.value;
      d_sd -= centre.d_log_sd;
      d_a -= centre.d1;
      if (g_params) dp -= centre.dparams;
      for (Index k = 0; k < q.nodes.size(); ++k) {
        t = a + L.col(c) * q.nodes[k];
        const EffectMixture m =
            mixture_at(lik, ys.data(), t.data(), J, params, log_sd, centre.mode, g_params != nullptr);
        const double w = q.weights[k];
        v += w * m.value;
        d_a += w * m.d1;
        d_sd += w * m.d_log_sd;
        if (g_params) dp += w * m.dparams;
        dL.col(c).tail(J - c) += (w * q.nodes[k]) * m.d1.tail(J - c);  // the rule's own derivative in L
      }
    }
    if (d) dS = cholesky_backward(L, L.triangularView<Eigen::Lower>().solve(Matrix::Identity(J, J)), dL);
  } else {
    // At S = 0, d E[G] / d S_jj = G_jj / 2.
    dS.diagonal() = 0.5 * centre.d2;
  }
  if (d)
    for (Index j = 0; j < J; ++j) {
      CountMomentsGradient& g = (*d)[in[static_cast<size_t>(j)]];
      g.mean = d_a[j] / bag(j).mean;
      g.rho = -0.5 * d_a[j] + dS(j, j);
      // S_jk = h_j . h_k for k != j: dS is symmetric and each pair appears twice.
      if (J > 1 && bag(j).h.size()) {
        g.h = Vector::Zero(bag(j).h.size());
        for (Index k = 0; k < J; ++k)
          if (k != j && bag(k).h.size()) g.h += 2.0 * dS(j, k) * bag(k).h;
      }
    }
  if (g_params) *g_params = dp;
  if (g_log_sd) *g_log_sd = d_sd - 2 * half_var * d_a.sum();
  return value + v;
}

UnitEffectMoments shared_unit_effect_posterior(const CountLikelihood& lik, const std::vector<double>& y,
                                               const std::vector<double>& totals, const Vector& params, double log_sd,
                                               std::vector<double>* slopes) {
  const double var = std::exp(2 * log_sd);
  std::vector<double> ys, t;
  std::vector<size_t> in;
  for (size_t j = 0; j < y.size(); ++j)
    if (totals[j] > 0) {
      ys.push_back(y[j]);
      t.push_back(std::log(totals[j]) - 0.5 * var);
      in.push_back(j);
    }
  if (slopes) slopes->assign(y.size(), 0.0);
  if (ys.empty()) return {-0.5 * var, var};
  const EffectMixture m = mixture_at(lik, ys.data(), t.data(), static_cast<Index>(ys.size()), params, log_sd, 0.0,
                                     false, slopes != nullptr);
  if (slopes)
    for (size_t k = 0; k < in.size(); ++k) (*slopes)[in[k]] = m.du_mean[static_cast<Index>(k)];
  return {m.u_mean - 0.5 * var, m.u_var};
}

}  // namespace vbagg
