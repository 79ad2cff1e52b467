// y_a ~ Exponential(mean eta_a), eta_a = sum_i w_i e^{f_i} (MODEL.md 4d): two concavity bounds,
//   l_a >= -y / sum_i w_i e^{m_i - s2_i/2} - log sum_i w_i e^{m_i + s2_i/2}.
// Exp link only (E[1/f^2] diverges for the square link); no delta method.
#include <cmath>

#include "core/likelihood.hpp"
#include "core/link.hpp"
#include "core/log_sum_exp.hpp"
#include "count.hpp"

namespace vbagg {

namespace {

class Exponential final : public BagLikelihood {
 public:
  LikelihoodKind id() const override { return LikelihoodKind::exponential; }
  const char* name() const override { return "exponential"; }
  std::vector<Link> links() const override { return {Link::exp}; }
  bool has_delta_method() const override { return false; }
  bool allows_map(const ModelSpec&) const override { return false; }
  BagNeeds needs(const ModelSpec&) const override { return BagNeeds::marginals; }

  double term(const ModelSpec&, const Vector&, const BagPosterior& b, BagGradient* g) const override {
    const Vector& w = b.weight;
    const Vector lw = log_weight(w);
    Vector soft1, soft2;
    const double lse1 = log_sum_exp(lw + b.m - 0.5 * b.s2, w, g ? &soft1 : nullptr);
    const double lse2 = log_sum_exp(lw + b.m + 0.5 * b.s2, w, g ? &soft2 : nullptr);
    const double r = b.y * std::exp(-lse1);  // y / A1
    if (g) {
      g->gm = r * soft1 - soft2;
      g->gs2 = -0.5 * r * soft1 - 0.5 * soft2;
      g->g_params.resize(0);
    }
    return -r - lse2;
  }

  // y ~ Exponential(mean eta): log p = -log eta - y / eta.
  double aggregate_log_p(const Vector&, const BagPosterior& b, const Vector&, double eta,
                         AggregateGradient* g) const override {
    if (g) g->d_eta = -1 / eta + b.y / (eta * eta);
    return -std::log(eta) - b.y / eta;
  }

  void initialise(const Dataset& train, Model& model) const override {
    model.mean = std::log(initial_rate(train)) - 0.5;
    model.likelihood_params.resize(0);
  }

  double predictive_nll(const Model& model, const Observation& obs, const Vector& w, const Vector& m, const Vector& v,
                        double, const UnitEffectMoments&) const override {
    const double eta = link_of(model.spec.link).expected_total(w, m, v);
    return std::log(eta) + obs.y / eta;
  }

  double draw(const Model&, double eta, double, const Vector&, std::mt19937_64& rng) const override {
    return std::exponential_distribution<double>(1.0 / eta)(rng);
  }
};

}  // namespace

const BagLikelihood& exponential_likelihood() {
  static const Exponential e;
  return e;
}

}  // namespace vbagg
