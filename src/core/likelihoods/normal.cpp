// y_a ~ N(sum_i w_i f_i, tau sum_i w_i^2) with identity link and log tau learned (MODEL.md 4c).
// Its expectation is exact, so the expectation setting changes nothing here.
#include <cmath>

#include "core/likelihood.hpp"

namespace vbagg {

namespace {

const double kLog2Pi = std::log(2.0 * M_PI);

class Normal final : public BagLikelihood {
 public:
  LikelihoodKind id() const override { return LikelihoodKind::normal; }
  const char* name() const override { return "normal"; }
  std::vector<Link> links() const override { return {Link::identity}; }
  std::vector<std::string> param_names() const override { return {"log_noise"}; }
  bool allows_map(const ModelSpec& spec) const override { return spec.covariance == CovarianceMode::nystrom; }
  BagNeeds needs(const ModelSpec& spec) const override {
    // w'Cw reads T only through T w: the residual form.
    return spec.covariance == CovarianceMode::exact ? BagNeeds::exact : BagNeeds::residual;
  }
  Vector aggregate_weights(const ModelSpec& spec, const Vector& w) const override {
    return spec.aggregation == Aggregation::mean ? Vector(w / w.sum()) : w;
  }

  // -1/2 log(2 pi v) - ((y - w'm)^2 + w'Cw) / (2v), v = tau sum w^2.
  double term(const ModelSpec& spec, const Vector& params, const BagPosterior& b, BagGradient* g) const override {
    const Vector w = aggregate_weights(spec, b.weight);
    const double v = std::exp(params[0]) * w.squaredNorm();
    const double e = b.y - w.dot(b.m);
    double wCw;
    Vector Tw;
    if (spec.covariance == CovarianceMode::exact) {
      wCw = w.dot(*b.C * w);
    } else {
      Tw = b.t->times(w);
      wCw = (b.d->array() * w.array().square()).sum() + Tw.squaredNorm();
    }
    const double quad = e * e + wCw;
    const double value = -0.5 * (kLog2Pi + std::log(v)) - quad / (2 * v);
    if (g) {
      const double dq = -1 / (2 * v);  // d value / d wCw
      g->gm = (e / v) * w;
      g->g_params = Vector::Constant(1, -0.5 + quad / (2 * v));
      if (spec.covariance == CovarianceMode::exact) {
        g->gs2 = Vector::Zero(w.size());
        g->gC = dq * w * w.transpose();
      } else {
        g->gs2 = Vector::Zero(w.size());
        g->gd = dq * w.array().square().matrix();
        g->gT_factors.push_back({2.0 * dq * Tw, w});
      }
    }
    return value;
  }

  double aggregate_log_p(const Vector& params, const BagPosterior& b, const Vector& w, double eta,
                         AggregateGradient* g) const override {
    const double v = std::exp(params[0]) * w.squaredNorm(), e = b.y - eta;
    if (g) {
      g->d_eta = e / v;
      g->d_params = Vector::Constant(1, -0.5 + e * e / (2 * v));
    }
    return -0.5 * (kLog2Pi + std::log(v)) - e * e / (2 * v);
  }

  void initialise(const Dataset& train, Model& model) const override {
    model.mean = model.spec.aggregation == Aggregation::mean ? train.response.mean()
                                                             : train.response.sum() / train.bag_weights().sum();
    model.likelihood_params = Vector::Zero(1);
  }

  // The bag value's predictive is Normal with the marginal variances (the joint covariance is
  // dropped, as the paper does).
  double predictive_nll(const Model& model, const Observation& obs, const Vector& w_in, const Vector& m,
                        const Vector& v, double, const UnitEffectMoments&) const override {
    const Vector w = aggregate_weights(model.spec, w_in);
    const double mu = w.dot(m);
    const double var = std::exp(model.likelihood_params[0]) * w.squaredNorm() + w.array().square().matrix().dot(v);
    const double e = obs.y - mu;
    return 0.5 * (std::log(2 * M_PI * var) + e * e / var);
  }

  double draw(const Model& model, double eta, double, const Vector& w, std::mt19937_64& rng) const override {
    const double sd = std::sqrt(std::exp(model.likelihood_params[0]) * w.squaredNorm());
    return eta + sd * std::normal_distribution<double>()(rng);
  }
};

}  // namespace

const BagLikelihood& normal_likelihood() {
  static const Normal n;
  return n;
}

}  // namespace vbagg
