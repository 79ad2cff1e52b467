// y_a ~ NB(mean mu_a, dispersion r), variance mu + mu^2 / r (MODEL.md 4f), with log r learned:
//   log p = lgamma(y + r) - lgamma(r) - lgamma(y + 1) + r log(r / (r + mu)) + y log(mu / (r + mu)).
// E[log mu] comes from the link (bound or delta method); E[log(r + mu)] ~ log(r + mean)
// - Var[mu] / (2 (r + mean)^2), with Var[mu] = rho mean^2 (0 under the bound, where
// -log(r + E mu) <= E[-log(r + mu)] keeps the whole term a lower bound).
#include <boost/math/special_functions/digamma.hpp>
#include <cmath>

#include "count.hpp"

namespace vbagg {

namespace {

using boost::math::digamma;

class NegativeBinomial final : public CountLikelihood {
 public:
  LikelihoodKind id() const override { return LikelihoodKind::negative_binomial; }
  const char* name() const override { return "negative_binomial"; }
  std::vector<std::string> param_names() const override { return {"log_dispersion"}; }

  double score(double y, const CountMoments& mo, const Vector& params, CountMomentsGradient* d,
               Vector* g) const override {
    const double r = std::exp(params[0]), mu = mo.mean, c = r + mu;
    const double k = mo.rho * mu * mu / (2 * c * c);  // the delta correction of E[log(r + mu)]
    // r log r - (r + y) log c written with log1p so that large r (near Poisson) keeps its digits.
    const double value = std::lgamma(y + r) - std::lgamma(r) - std::lgamma(y + 1) - r * std::log1p(mu / r) -
                         y * std::log(c) + (r + y) * k + (y != 0 ? y * mo.elog : 0.0);
    if (d) {
      d->elog = y;
      d->mean = -(r + y) * (1 / c - mo.rho * mu * r / (c * c * c));
      d->rho = (r + y) * mu * mu / (2 * c * c);
    }
    if (g) {
      const double dr = digamma(y + r) - digamma(r) - std::log1p(mu / r) + (mu - y) / c + k -
                        (r + y) * mo.rho * mu * mu / (c * c * c);
      *g = Vector::Constant(1, r * dr);
    }
    return value;
  }
  double count_nll(double y, double mean, const Vector& params) const override {
    const double r = std::exp(params[0]);
    return -(std::lgamma(y + r) - std::lgamma(r) - std::lgamma(y + 1) - r * std::log1p(mean / r) +
             (y != 0 ? y * (std::log(mean) - std::log(r + mean)) : 0.0));
  }
  // Gamma-Poisson mixture.
  double count_draw(double mean, const Vector& params, std::mt19937_64& rng) const override {
    if (!(mean > 0)) return 0.0;
    const double r = std::exp(params[0]);
    const double rate = std::gamma_distribution<double>(r, mean / r)(rng);
    return rate > 0 ? static_cast<double>(std::poisson_distribution<long long>(rate)(rng)) : 0.0;
  }

 protected:
  // 1/r from the moments of the counts around the overall rate, var = mu + mu^2 / r. Covariates
  // explain part of that spread, so it is an upper bound on the overdispersion: kept within
  // [0.01, 1] and learned from there.
  Vector initial_params(const Dataset& train, double rate) const override {
    const Vector P = train.bag_weights();
    double phi = 0;
    Index n = 0;
    for (Index a = 0; a < train.num_bags(); ++a) {
      const double mu = rate * P[a];
      if (!(mu > 0)) continue;
      const double e = train.response[a] - mu;
      phi += (e * e - mu) / (mu * mu);
      ++n;
    }
    phi = n ? std::clamp(phi / static_cast<double>(n), 0.01, 1.0) : 0.1;
    return Vector::Constant(1, -std::log(phi));
  }
};

}  // namespace

const BagLikelihood& negative_binomial_likelihood() {
  static const NegativeBinomial nb;
  return nb;
}

}  // namespace vbagg
