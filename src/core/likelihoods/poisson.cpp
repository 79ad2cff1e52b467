// y_a ~ Poisson(mu_a) (MODEL.md 4a, 4b, 4e): l_a = y E[log mu] - E[mu] - log y!.
#include <cmath>

#include "count.hpp"

namespace vbagg {

namespace {

class Poisson final : public CountLikelihood {
 public:
  LikelihoodKind id() const override { return LikelihoodKind::poisson; }
  const char* name() const override { return "poisson"; }

  double score(double y, const CountMoments& mo, const Vector&, CountMomentsGradient* d, Vector* g) const override {
    if (d) *d = {-1.0, y, 0.0, Vector()};
    if (g) g->resize(0);
    // y = 0 leaves E[log mu] out (it is -inf for a bag of zero weight).
    return (y != 0 ? y * mo.elog : 0.0) - mo.mean - std::lgamma(y + 1);
  }
  double count_nll(double y, double mean, const Vector&) const override {
    return mean - (y != 0 ? y * std::log(mean) : 0.0) + std::lgamma(y + 1);
  }
  double count_draw(double mean, const Vector&, std::mt19937_64& rng) const override { return poisson_draw(mean, rng); }
  // log p(y | e^s) = y s - e^s - log y!.
  double log_pmf_kernel(double y, double s, const Vector&, double* d1, double* d2, Vector* dparams) const override {
    const double e = std::exp(s);
    *d1 = y - e;
    *d2 = -e;
    if (dparams) dparams->resize(0);
    return y * s - e;
  }
  double log_pmf_constant(double y, const Vector&, Vector* dparams) const override {
    if (dparams) dparams->resize(0);
    return -std::lgamma(y + 1);
  }
};

}  // namespace

const BagLikelihood& poisson_likelihood() {
  static const Poisson p;
  return p;
}

}  // namespace vbagg
