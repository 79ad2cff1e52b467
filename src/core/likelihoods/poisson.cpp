// y_a ~ Poisson(mu_a) (MODEL.md 4a, 4b, 4e): l_a = y E[log mu] - E[mu] - log y!. With a unit
// effect (4g) the rate is e^u mu_a: E[log] gains E[u] and E[rate] the factor E[e^u], exactly.
#include <cmath>

#include "count.hpp"

namespace vbagg {

namespace {

class Poisson final : public CountLikelihood {
 public:
  LikelihoodKind id() const override { return LikelihoodKind::poisson; }
  const char* name() const override { return "poisson"; }

  double score(double y, const CountMoments& mo, const Vector&, CountMomentsGradient* d, Vector* g) const override {
    const double factor = std::exp(mo.shift + 0.5 * mo.log_var), rate = mo.mean * factor;  // E[e^u] E[mu]
    if (d) *d = {-factor, y, 0.0, y - rate, -0.5 * rate};
    if (g) g->resize(0);
    // y = 0 leaves E[log mu] out (it is -inf for a bag of zero weight).
    return (y != 0 ? y * mo.rate_elog() : 0.0) - rate - std::lgamma(y + 1);
  }
  double count_nll(double y, double mean, const Vector&) const override {
    return mean - (y != 0 ? y * std::log(mean) : 0.0) + std::lgamma(y + 1);
  }
  double count_draw(double mean, const Vector&, std::mt19937_64& rng) const override { return poisson_draw(mean, rng); }
};

}  // namespace

const BagLikelihood& poisson_likelihood() {
  static const Poisson p;
  return p;
}

}  // namespace vbagg
