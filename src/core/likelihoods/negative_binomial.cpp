// y_a ~ NB(mean mu_a, dispersion r), variance mu + mu^2 / r (MODEL.md 4f), with log r learned:
//   log p = lgamma(y + r) - lgamma(r) - lgamma(y + 1) + r log r + y log mu - (r + y) log(r + mu).
// E[log mu] comes from the link (bound or delta method). E[log(r + mu)] takes log mu as Normal
// with the link's moments, mean a = log E[mu] - rho/2 and variance rho (a log-normal mu with the
// same mean, and with the delta method's E[log mu]), and integrates log(r + e^a+sqrt(rho) z) by
// Gauss-Hermite quadrature. The second-order expansion log(r + m) - Var / (2 (r + m)^2) of
// MODEL.md 4f is not used: for mu >> r it rewards variance without limit (log(r + mu) is convex
// in log mu), and a fit drives the ELBO to +infinity. Under the bound (rho = 0) the quadrature
// collapses to log(r + E mu), and -log(r + E mu) <= E[-log(r + mu)] keeps the term a lower bound.
// Every form is written without r log r (gamma_ratio.hpp): counts without overdispersion take the
// dispersion to 1e5-1e15, where that term and its cancelling partner would leave no digit.
#include <cmath>

#include "core/gamma_ratio.hpp"
#include "core/gauss_hermite.hpp"
#include "core/logistic.hpp"
#include "count.hpp"

namespace vbagg {

namespace {

const int kNodes = 32;

// log(1 + e^x) without overflow.
double softplus(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

class NegativeBinomial final : public CountLikelihood {
 public:
  LikelihoodKind id() const override { return LikelihoodKind::negative_binomial; }
  const char* name() const override { return "negative_binomial"; }
  std::vector<std::string> param_names() const override { return {"log_dispersion"}; }
  bool fit_parameters_later() const override { return true; }

  double score(double y, const CountMoments& mo, const Vector& params, CountMomentsGradient* d,
               Vector* g) const override {
    const double log_r = params[0], r = std::exp(log_r);
    const double rho = std::max(mo.rho, 0.0), b = std::sqrt(rho);
    const double a = std::log(mo.mean) - 0.5 * rho;
    // D = E[log(r + mu)] - log r = E[softplus(log mu - log r)], with its derivatives in a, rho.
    const NormalQuadrature& q = normal_quadrature(kNodes);
    double D = 0, S = 0, S2 = 0;  // E softplus, E sigma, E sigma (1 - sigma)
    for (Index k = 0; k < q.nodes.size(); ++k) {
      const double x = a + b * q.nodes[k] - log_r;
      const double sg = logistic(x);
      D += q.weights[k] * softplus(x);
      S += q.weights[k] * sg;
      S2 += q.weights[k] * sg * (1 - sg);
    }
    // r log r - (r + y) E log(r + mu) = -y log r - (r + y) D.
    double d_ratio = 0;
    const double value =
        gamma_ratio(y, r, g ? &d_ratio : nullptr) - std::lgamma(y + 1) - (r + y) * D + (y != 0 ? y * mo.elog : 0.0);
    if (d) {
      const double d_a = -(r + y) * S, d_rho_direct = -(r + y) * 0.5 * S2;  // d/d rho by Stein's lemma
      d->elog = y;
      d->mean = mo.mean > 0 ? d_a / mo.mean : -(r + y) / r;
      d->rho = -0.5 * d_a + d_rho_direct;
    }
    if (g) {
      // dD/d log r = -E[sigma].
      *g = Vector::Constant(1, d_ratio - r * D + (r + y) * S);
    }
    return value;
  }
  double count_nll(double y, double mean, const Vector& params) const override {
    const double r = std::exp(params[0]);
    return -(gamma_ratio(y, r, nullptr) - std::lgamma(y + 1) - (r + y) * std::log1p(mean / r) +
             (y != 0 ? y * std::log(mean) : 0.0));
  }
  // log p(y | e^s) = [lgamma(y + r) - lgamma(r) - lgamma(y + 1) - y log r] + [y s - (r + y) log(1 + e^s / r)]:
  // split so that neither part holds the r log r that the other cancels (each about 1e17 at the
  // dispersions of counts without overdispersion).
  double log_pmf_kernel(double y, double s, const Vector& params, double* d1, double* d2,
                        Vector* dparams) const override {
    const double log_r = params[0], r = std::exp(log_r);
    const double x = s - log_r, sg = logistic(x), sp = softplus(x);  // log(1 + e^s / r)
    *d1 = y - (r + y) * sg;
    *d2 = -(r + y) * sg * (1 - sg);
    if (dparams) *dparams = Vector::Constant(1, -r * sp + (r + y) * sg);
    return y * s - (r + y) * sp;
  }
  double log_pmf_constant(double y, const Vector& params, Vector* dparams) const override {
    double d_log_r = 0;
    const double value = gamma_ratio(y, std::exp(params[0]), dparams ? &d_log_r : nullptr) - std::lgamma(y + 1);
    if (dparams) *dparams = Vector::Constant(1, d_log_r);
    return value;
  }
  // Gamma-Poisson mixture.
  double count_draw(double mean, const Vector& params, std::mt19937_64& rng) const override {
    if (!std::isfinite(mean)) return poisson_draw(mean, rng);  // refuses it
    if (!(mean > 0)) return 0.0;
    const double r = std::exp(params[0]);
    return poisson_draw(std::gamma_distribution<double>(r, mean / r)(rng), rng);
  }

 protected:
  // r = 100: close to Poisson for counts up to about a hundred, 10 % extra spread for larger ones.
  // The moments of the counts around one overall rate would start far wider (covariates explain
  // much of that spread), and a wide start lets the dispersion, not the field, absorb the data.
  Vector initial_params(const Dataset&, double) const override { return Vector::Constant(1, std::log(100.0)); }
};

}  // namespace

const BagLikelihood& negative_binomial_likelihood() {
  static const NegativeBinomial nb;
  return nb;
}

}  // namespace vbagg
