#include "predictor.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <random>

#include "core/dataset.hpp"
#include "core/likelihood.hpp"
#include "core/metrics.hpp"

namespace vbagg::cli {

namespace {

// By the bag's place in the whole data, so an MPI job's processes draw what one process would.
unsigned long long draw_seed(const Dataset& d, Index bag) {
  return 1000 + static_cast<unsigned long long>(d.global_bag_of(bag));
}

// The joint draws of draw_coverage: any fixed seed, so eval's figures repeat.
constexpr unsigned long long kCoverageDrawSeed = 20181203;

// vbagg, bag_pixel and nystrom: a GP model (nystrom's q is a point mass, so it has no posterior).
class GpPredictor final : public Predictor {
 public:
  GpPredictor(const Model& model, bool posterior, bool same_units)
      : model_(model), posterior_(posterior), same_units_(same_units) {}

  bool has_posterior() const override { return posterior_; }
  bool has_latent() const override { return true; }
  bool needs_pixel_units() const override { return false; }
  bool counts(int source) const override { return likelihood_of(model_.spec.source(source).likelihood).is_count(); }

  Vector unit_totals(const Dataset& d, const std::vector<Index>& bags, int threads) const override {
    return predicted_bag_totals(model_, d, bags, threads, same_units_);
  }

  void unit_draws(const Dataset& d, const std::vector<Index>& bags, int samples, int threads,
                  const DrawsOf& use) const override {
    if (bags.empty()) return;  // an MPI process may hold no units
    const std::vector<UnitEffectMoments> units = bag_unit_effects(model_, d, bags, threads, same_units_);
    for (size_t k = 0; k < bags.size(); ++k) {
      const Index a = bags[k], b = d.bag_begin(a), n = d.bag_size(a);
      const Vector w = d.coverage.segment(b, n).cwiseProduct(d.population.segment(b, n));
      Vector draws = bag_predictive_draws(view_of(d, a), d.inputs.middleCols(b, n), w, samples, draw_seed(d, a),
                                          units[k], d.trials_of(a), threads);
      std::sort(draws.data(), draws.data() + draws.size());
      use(k, draws);
    }
  }

  // A Poisson model without a unit effect is scored by the Poisson NLL of its totals (exact);
  // every other likelihood by its own predictive density.
  double bag_nll_mean(const Dataset& d, const std::vector<Index>& bags, const Vector& totals,
                      int threads) const override {
    if (model_.spec.num_sources() == 1 && model_.spec.likelihood == LikelihoodKind::poisson &&
        !model_.spec.unit_effect) {
      Vector y(static_cast<Index>(bags.size()));
      for (size_t k = 0; k < bags.size(); ++k) y[static_cast<Index>(k)] = d.response[bags[k]];
      return bag_poisson_nll(y, totals).mean;
    }
    return bag_predictive_nll(model_, d, bags, threads);
  }

  double predictive_nll_mean(const Dataset& d, const std::vector<Index>& bags, const Vector& totals,
                             int threads) const override {
    if (!posterior_) return bag_nll_mean(d, bags, totals, threads);
    return bag_predictive_nll(model_, d, bags, threads, true);
  }

  Prediction predict_pixels(const Matrix& X, const std::vector<const std::string*>&, const PredictOptions& options,
                            int task) const override {
    return predict(fields().tasks[static_cast<size_t>(task)], X, options);
  }

  Matrix joint_unit_draws(const Dataset& d, const std::vector<Index>& bags, int samples, int threads) const override {
    if (!posterior_ || bags.empty()) return {};
    // A unit's periods share one draw of its effect, as they share the effect itself.
    std::vector<Index> effect_of;
    if (model_.spec.unit_effect && model_.spec.unit_effect_shared) {
      std::map<std::string, Index> index;
      for (Index a : bags)
        effect_of.push_back(index.emplace(unit_of_bag(d.bag_id(a)), static_cast<Index>(index.size())).first->second);
    }
    return joint_bag_draws(view_of(d, bags.front()).model(), d, bags,
                           bag_unit_effects(model_, d, bags, threads, same_units_), samples, kCoverageDrawSeed, threads,
                           effect_of);
  }

  Matrix draw_coverage(const Matrix& X, const Matrix& lo, const Matrix& hi, int samples, int threads,
                       int task) const override {
    return vbagg::draw_coverage(fields().tasks[static_cast<size_t>(task)].model(), X, lo, hi, samples,
                                kCoverageDrawSeed, threads);
  }

 private:
  // The model as the bag's source sees it (its likelihood, parameters and unit effect).
  const LatentField& view_of(const Dataset& d, Index a) const {
    return fields().sources[model_.spec.num_sources() == 1 ? 0 : static_cast<size_t>(d.source_of(a))];
  }

  Model model_;
  // Each source's and task's view (of the task's first source) with its posterior and spread, made
  // at the first prediction and kept for every strip and bag.
  struct Fields {
    std::vector<LatentField> sources, tasks;
  };
  const Fields& fields() const {
    std::call_once(fields_made_, [this] {
      for (Index s = 0; s < model_.spec.num_sources(); ++s) fields_.sources.emplace_back(model_.for_source(s));
      for (Index d = 0; d < model_.spec.num_tasks(); ++d) fields_.tasks.emplace_back(model_.for_task(d));
    });
    return fields_;
  }
  mutable std::once_flag fields_made_;
  mutable Fields fields_;
  bool posterior_, same_units_;
};

// constant: the rate of the unit holding a pixel, Poisson counts per unit. No posterior.
class ConstantPredictor final : public Predictor {
 public:
  ConstantPredictor(const ConstantRates& rates, bool same_units) : rates_(rates), same_units_(same_units) {}

  bool has_posterior() const override { return false; }
  bool has_latent() const override { return false; }
  bool needs_pixel_units() const override { return true; }
  bool counts(int) const override { return true; }

  Vector unit_totals(const Dataset& d, const std::vector<Index>& bags, int) const override {
    const Vector P = d.bag_weights();
    Vector t(static_cast<Index>(bags.size()));
    for (size_t k = 0; k < bags.size(); ++k) t[static_cast<Index>(k)] = rate(&d.bag_ids[bag(bags[k])]) * P[bags[k]];
    return t;
  }

  void unit_draws(const Dataset& d, const std::vector<Index>& bags, int samples, int,
                  const DrawsOf& use) const override {
    const Vector P = d.bag_weights();
    Vector draws(samples);
    for (size_t k = 0; k < bags.size(); ++k) {
      const Index a = bags[k];
      std::mt19937_64 rng(draw_seed(d, a));
      std::poisson_distribution<long long> poisson(rate(&d.bag_ids[bag(a)]) * P[a]);
      for (int s = 0; s < samples; ++s) draws[s] = static_cast<double>(poisson(rng));
      std::sort(draws.data(), draws.data() + draws.size());
      use(k, draws);
    }
  }

  double bag_nll_mean(const Dataset& d, const std::vector<Index>& bags, const Vector& totals, int) const override {
    Vector y(static_cast<Index>(bags.size()));
    for (size_t k = 0; k < bags.size(); ++k) y[static_cast<Index>(k)] = d.response[bags[k]];
    return bag_poisson_nll(y, totals).mean;
  }

  Prediction predict_pixels(const Matrix&, const std::vector<const std::string*>& units, const PredictOptions&,
                            int) const override {
    const Index n = static_cast<Index>(units.size());
    Prediction p;
    p.mean.resize(n);
    p.sd = p.latent_mean = p.latent_var = Vector::Zero(n);
    for (Index j = 0; j < n; ++j) p.mean[j] = rate(units[static_cast<size_t>(j)]);
    return p;
  }

  // A point estimate: no posterior to draw from.
  Matrix joint_unit_draws(const Dataset&, const std::vector<Index>&, int, int) const override { return {}; }
  Matrix draw_coverage(const Matrix&, const Matrix&, const Matrix&, int, int, int) const override { return {}; }

 private:
  static size_t bag(Index a) { return static_cast<size_t>(a); }
  // A unit's own rate if it was a training unit of these data, else the overall training rate.
  double rate(const std::string* unit) const { return unit && same_units_ ? rates_.of(*unit) : rates_.overall; }

  ConstantRates rates_;
  bool same_units_;
};

}  // namespace

std::unique_ptr<const Predictor> make_predictor(const io::ModelFile& file, bool same_units) {
  switch (file.kind) {
    case ModelKind::constant:
      return std::make_unique<ConstantPredictor>(file.constant, same_units);
    case ModelKind::nystrom:
      return std::make_unique<GpPredictor>(file.model, false, same_units);
    case ModelKind::vbagg:
    case ModelKind::bag_pixel:
      break;
  }
  return std::make_unique<GpPredictor>(file.model, true, same_units);
}

}  // namespace vbagg::cli
