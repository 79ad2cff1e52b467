#include "binomial_effect.hpp"

#include <cmath>

#include "core/gauss_hermite.hpp"

namespace vbagg {

namespace {

const int kLogitNodes = 16;  // over ell: the mixture is smooth in it (16 and 32 agree to 1e-10 at a fit's variance)

// y log sigma(x) + (n - y) log sigma(-x): concave in x.
class BinomialKernel final : public PredictorKernel {
 public:
  BinomialKernel(double y, double n) : y_(y), n_(n) {}
  // With e = e^{-|x|}: log sigma(+-x) = -log(1 + e) - max(0, -+x), one exponential and one logarithm.
  double at(Index, double x, double* d1, double* d2, Vector*) const override {
    const double e = slopes_at(x, d1, d2);
    return -n_ * std::log1p(e) + (x >= 0 ? -(n_ - y_) * x : y_ * x);
  }
  void slopes(Index, double x, double* d1, double* d2) const override { slopes_at(x, d1, d2); }

 private:
  // The slopes at x, from e = e^{-|x|} (returned): sigma(+-x) are 1 / (1 + e) and e / (1 + e).
  double slopes_at(double x, double* d1, double* d2) const {
    const double e = std::exp(-std::abs(x)), a = 1 / (1 + e), b = e * a;
    const double p = x >= 0 ? a : b, q = x >= 0 ? b : a;
    *d1 = y_ * q - (n_ - y_) * p;
    *d2 = -n_ * p * q;
    return e;
  }

  double y_, n_;
};

}  // namespace

EffectMixture binomial_mixture(double y, double n, double x, double log_sd, double start) {
  return effect_mixture(BinomialKernel(y, n), &x, 1, log_sd, start, 0, false);
}

LogitExpectation binomial_effect_expectation(double y, double n, double c, double s, double log_sd, bool derivatives) {
  const NormalQuadrature& g = normal_quadrature(kLogitNodes);
  LogitExpectation out;
  double start = 0, d2 = 0;  // each node's search for the mode starts at the last node's
  for (Index k = 0; k < g.nodes.size(); ++k) {
    const double w = g.weights[k], z = g.nodes[k];
    const EffectMixture m = binomial_mixture(y, n, c + s * z, log_sd, start);
    start = m.mode;
    out.value += w * m.value;
    if (!derivatives) continue;
    out.d_centre += w * m.d1[0];
    out.d_tau += w * m.d1[0] * z;
    d2 += w * m.d2[0];
    out.d_log_sd += w * m.d_log_sd;
  }
  out.d_tau = s < kSteinBelow ? 0.5 * d2 : out.d_tau / (2 * s);
  return out;
}

}  // namespace vbagg
