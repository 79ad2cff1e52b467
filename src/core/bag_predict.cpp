// Predictions of bags: their units' effects, their expected totals and the predictive density of
// their observations (predict.hpp).
#include <cmath>
#include <map>
#include <unordered_set>

#include "dataset.hpp"
#include "likelihood.hpp"
#include "likelihoods/count.hpp"
#include "link.hpp"
#include "predict.hpp"

namespace vbagg {

namespace {

// Latent marginals of the listed bags' pixels, concatenated in bag order.
void bag_latents(const LatentField& field, const Dataset& data, const std::vector<Index>& bags, int threads, Matrix& X,
                 Vector& w, Vector& m, Vector& v) {
  Index total = 0;
  for (Index a : bags) total += data.bag_size(a);
  X.resize(data.num_inputs(), total);
  w.resize(total);
  Index pos = 0;
  for (Index a : bags) {
    const Index b = data.bag_begin(a), n = data.bag_size(a);
    X.middleCols(pos, n) = data.inputs.middleCols(b, n);
    w.segment(pos, n) = data.coverage.segment(b, n).cwiseProduct(data.population.segment(b, n));
    pos += n;
  }
  predict_latent(field, X, m, v, threads);
}

// Pixels whose inputs field_totals copies at a time: the whole training data's totals (a shared
// unit effect's kept posteriors) then take a bounded copy, not a second pixel table.
constexpr Index kTotalsPixels = 1 << 20;

// sum_i w_i E[lambda_i] of each listed bag, without the unit effect. With `loadings`, column k
// the relative loading of bag k's total on the draws' shared normals zeta (UnitEffectMoments):
// log eta_k moves by G_k . zeta to first order, G_k = sum_i g_i (t_i; a_i) / E[eta_k] with
// g_i = w_i E[Psi'(f_i)] (bag_factor_sums).
Vector field_totals(const Model& model, const Dataset& data, const std::vector<Index>& bags, int threads,
                    Matrix* loadings = nullptr) {
  Vector totals(static_cast<Index>(bags.size()));
  const BagLikelihood& lik = likelihood_of(model.spec.likelihood);
  const LinkFunction& link = link_of(model.spec.link);
  const LatentField field(model);
  for (size_t first = 0; first < bags.size();) {
    std::vector<Index> chunk;
    for (Index pixels = 0;
         first < bags.size() && (chunk.empty() || pixels + data.bag_size(bags[first]) <= kTotalsPixels); ++first) {
      chunk.push_back(bags[first]);
      pixels += data.bag_size(bags[first]);
    }
    Matrix X;
    Vector w, m, v;
    bag_latents(field, data, chunk, threads, X, w, m, v);
    const Index at = static_cast<Index>(first - chunk.size());
    Vector g(w.size());
    std::vector<Index> start{0};
    for (size_t k = 0; k < chunk.size(); ++k) {
      const Index pos = start.back(), n = data.bag_size(chunk[k]);
      const Vector aw = lik.aggregate_weights(model.spec, w.segment(pos, n));
      totals[at + static_cast<Index>(k)] = lik.expected_observation(
          link.expected_total(aw, m.segment(pos, n), v.segment(pos, n)), data.trials_of(chunk[k]));
      if (loadings)
        for (Index i = 0; i < n; ++i) g[pos + i] = aw[i] * link.mean_slope(m[pos + i], v[pos + i]);
      start.push_back(pos + n);
    }
    if (!loadings) continue;
    const Matrix sums = bag_factor_sums(field, X, g, start, threads);
    if (first == chunk.size()) loadings->resize(sums.rows() - 1, static_cast<Index>(bags.size()));
    for (size_t k = 0; k < chunk.size(); ++k) {
      const Index c = at + static_cast<Index>(k);
      loadings->col(c) = totals[c] > 0 ? Vector(sums.col(static_cast<Index>(k)).head(sums.rows() - 1) / totals[c])
                                       : Vector::Zero(sums.rows() - 1);
    }
  }
  return totals;
}

UnitEffectMoments unit_effect_prior(const Model& model) {
  if (!model.spec.unit_effect) return {};
  return likelihood_of(model.spec.likelihood).unit_effect_prior(model.unit_effect.log_sd);
}

// Which listed bags are units the model was fitted to (their effect depends on their count).
std::vector<bool> fitted_bags(const Model& model, const Dataset& data, const std::vector<Index>& bags,
                              bool fitted_units) {
  std::vector<bool> out(bags.size(), false);
  if (!model.spec.unit_effect || !fitted_units) return out;
  const std::unordered_set<std::string> trained(model.unit_effect.units.begin(), model.unit_effect.units.end());
  for (size_t k = 0; k < bags.size(); ++k) out[k] = trained.count(data.bag_id(bags[k])) > 0;
  return out;
}

// A count model's effect given the counts y of bags with expected totals t (without the effect),
// and with `loads` (field_totals' loadings of those bags, one column each; none: empty), how its
// mean moves with the field's draw: a draw moves bag j's log total by delta_j = G_j . zeta -
// |G_j|^2 / 2 (its mean is the log of the expected total, less half its variance), and the effect's
// mean by slope_j delta_j (UnitEffectMoments::loading and shift).
UnitEffectMoments count_effect_given(const Model& model, const std::vector<double>& y, const std::vector<double>& t,
                                     const Matrix& loads) {
  const auto& lik = dynamic_cast<const CountLikelihood&>(likelihood_of(model.spec.likelihood));
  std::vector<double> slopes;
  UnitEffectMoments u = shared_unit_effect_posterior(lik, y, t, model.likelihood_params, model.unit_effect.log_sd,
                                                     loads.size() ? &slopes : nullptr);
  if (loads.size() == 0) return u;
  u.loading = Vector::Zero(loads.rows());
  for (size_t j = 0; j < y.size(); ++j) {
    u.loading += slopes[j] * loads.col(static_cast<Index>(j));
    u.shift -= 0.5 * slopes[j] * loads.col(static_cast<Index>(j)).squaredNorm();
  }
  return u;
}

// totals: each bag's expected total without the effect; read for the fitted bags only. `loads`:
// their loadings (field_totals), for a count model's effects that move with the field's draw.
std::vector<UnitEffectMoments> unit_effects_given(const Model& model, const Dataset& data,
                                                  const std::vector<Index>& bags, const std::vector<bool>& fitted,
                                                  const Vector& totals, const Matrix& loads = Matrix()) {
  std::vector<UnitEffectMoments> out(bags.size(), unit_effect_prior(model));
  if (!model.spec.unit_effect) return out;
  const BagLikelihood& lik = likelihood_of(model.spec.likelihood);
  for (size_t k = 0; k < bags.size(); ++k) {
    if (!fitted[k]) continue;
    const Index c = static_cast<Index>(k);
    out[k] = loads.size() ? count_effect_given(model, {data.response[bags[k]]}, {totals[c]}, loads.col(c))
                          : lik.unit_effect_given({data.response[bags[k]], data.trials_of(bags[k])}, totals[c],
                                                  model.likelihood_params, model.unit_effect.log_sd);
  }
  return out;
}

// A unit effect shared by a unit's periods: each listed bag's effect given the counts of every
// fitted bag of its unit (so a held-out period of a training unit borrows its unit's other
// periods), or the prior for a unit with none. The fit's own (UnitEffect::posterior, given all the
// unit's training periods) where the model keeps it, which also serves a forecast or a batch
// without the unit's fitted periods; otherwise from the fitted bags in the data.
// `leave_own_out` leaves each bag's own count out of its condition, for the density of that count:
// always from the data. `moving`: effects from the data carry their loading on the field's draws.
std::vector<UnitEffectMoments> shared_unit_effects(const Model& model, const Dataset& data,
                                                   const std::vector<Index>& bags, int threads, bool leave_own_out,
                                                   bool moving) {
  std::vector<UnitEffectMoments> out(bags.size(), unit_effect_prior(model));
  std::map<std::string, std::vector<Index>> evidence;  // units to condition from the data -> their fitted bags
  for (size_t k = 0; k < bags.size(); ++k) {
    const std::string unit = unit_of_bag(data.bag_id(bags[k]));
    const auto stored = model.unit_effect.posterior.find(unit);
    if (!leave_own_out && stored != model.unit_effect.posterior.end())
      out[k] = stored->second;
    else
      evidence.emplace(unit, std::vector<Index>());
  }
  if (evidence.empty()) return out;
  const std::unordered_set<std::string> trained(model.unit_effect.units.begin(), model.unit_effect.units.end());
  std::vector<Index> fitted;
  for (Index a = 0; a < data.num_bags(); ++a) {
    const std::string id = data.bag_id(a);
    const auto it = evidence.find(unit_of_bag(id));
    if (it == evidence.end() || !trained.count(id)) continue;
    it->second.push_back(a);
    fitted.push_back(a);
  }
  if (fitted.empty()) return out;
  // The effect given the unit's bags moves with the field's draw (UnitEffectMoments::loading); a MAP
  // estimate's draws are its mean.
  Matrix loads;
  const Vector totals =
      field_totals(model, data, fitted, threads, !moving || model.spec.map_estimate ? nullptr : &loads);
  std::map<Index, Index> place;
  for (size_t k = 0; k < fitted.size(); ++k) place[fitted[k]] = static_cast<Index>(k);
  // The effect given the unit's fitted bags but `left_out` (-1: none); the prior when none is left.
  auto posterior_of = [&](const std::vector<Index>& own, Index left_out) {
    std::vector<double> y, t;
    std::vector<Index> at;
    for (Index a : own)
      if (a != left_out) {
        y.push_back(data.response[a]);
        at.push_back(place[a]);
        t.push_back(totals[at.back()]);
      }
    if (y.empty()) return unit_effect_prior(model);
    return count_effect_given(model, y, t, loads.size() ? Matrix(loads(Eigen::all, at)) : Matrix());
  };
  std::map<std::string, UnitEffectMoments> posterior;
  if (!leave_own_out)
    for (const auto& [unit, own] : evidence)
      if (!own.empty()) posterior[unit] = posterior_of(own, -1);
  for (size_t k = 0; k < bags.size(); ++k) {
    const auto it = evidence.find(unit_of_bag(data.bag_id(bags[k])));
    if (it != evidence.end() && !it->second.empty())
      out[k] = leave_own_out ? posterior_of(it->second, bags[k]) : posterior[it->first];
  }
  return out;
}

// Each listed bag's unit effect (bag_unit_effects) for one source's view of the model. `totals`,
// when given, are the bags' expected totals without the effect (field_totals), so a caller that
// has them spares the latent pass.
std::vector<UnitEffectMoments> unit_effects_one_source(const Model& model, const Dataset& data,
                                                       const std::vector<Index>& bags, int threads, bool fitted_units,
                                                       const Vector* totals = nullptr) {
  if (model.spec.unit_effect && model.spec.unit_effect_shared && fitted_units)
    return shared_unit_effects(model, data, bags, threads, false, true);
  const std::vector<bool> fitted = fitted_bags(model, data, bags, fitted_units);
  if (totals) return unit_effects_given(model, data, bags, fitted, *totals);
  // Only a fitted unit's effect needs its expected total: new units (every held-out unit) skip
  // the latent pass. A fitted count's effect moves with the field's draw, as a shared one does.
  std::vector<Index> own, at;
  for (size_t k = 0; k < bags.size(); ++k)
    if (fitted[k]) {
      own.push_back(bags[k]);
      at.push_back(static_cast<Index>(k));
    }
  if (own.empty()) return unit_effects_given(model, data, bags, fitted, Vector());
  Matrix own_loads;
  const bool moving = likelihood_of(model.spec.likelihood).is_count() && !model.spec.map_estimate;
  const Vector own_totals = field_totals(model, data, own, threads, moving ? &own_loads : nullptr);
  Vector all = Vector::Zero(static_cast<Index>(bags.size()));
  Matrix loads = Matrix::Zero(own_loads.rows(), moving ? all.size() : 0);
  for (size_t j = 0; j < own.size(); ++j) {
    all[at[j]] = own_totals[static_cast<Index>(j)];
    if (moving) loads.col(at[j]) = own_loads.col(static_cast<Index>(j));
  }
  return unit_effects_given(model, data, bags, fitted, all, loads);
}

Vector totals_one_source(const Model& model, const Dataset& data, const std::vector<Index>& bags, int threads,
                         bool fitted_units) {
  Vector totals = field_totals(model, data, bags, threads);
  const std::vector<UnitEffectMoments> units =
      unit_effects_one_source(model, data, bags, threads, fitted_units, &totals);
  const BagLikelihood& lik = likelihood_of(model.spec.likelihood);
  for (size_t k = 0; k < bags.size(); ++k)
    if (units[k].var > 0 || units[k].mean != 0)
      totals[static_cast<Index>(k)] =
          lik.expected_with_unit_effect(totals[static_cast<Index>(k)], data.trials_of(bags[k]), units[k]);
  return totals;
}

// The sum of the listed bags' predictive NLLs (with the field's uncertainty integrated when
// `integrated`: BagLikelihood::predictive_nll_integrated).
double nll_one_source(const Model& model, const Dataset& data, const std::vector<Index>& bags, int threads,
                      bool integrated) {
  const LatentField field(model);
  const BagLikelihood& lik = likelihood_of(model.spec.likelihood);
  Matrix X;
  Vector w, m, v;
  bag_latents(field, data, bags, threads, X, w, m, v);
  const LinkFunction& link = link_of(model.spec.link);
  const Index n_bags = static_cast<Index>(bags.size());
  std::vector<Index> start{0};  // where each bag's pixels begin in X, w, m and v
  for (Index a : bags) start.push_back(start.back() + data.bag_size(a));
  Vector cross = Vector::Zero(n_bags);
  Matrix sums;  // bag_factor_sums of the bags' totals
  if (integrated || lik.predictive_reads_covariance()) {
    Vector g(w.size());
    for (Index i = 0; i < w.size(); ++i) g[i] = w[i] * link.mean_slope(m[i], v[i]);
    sums = bag_factor_sums(field, X, g, start, threads);
    cross = cross_covariances_of(sums);
  }
  // The density of a count must not condition on that count: every unit's effect comes from the
  // prior here, training units' too; an effect shared by a unit's periods, given its other fitted
  // periods.
  const bool shared = model.spec.unit_effect && model.spec.unit_effect_shared;
  std::vector<UnitEffectMoments> units = shared ? shared_unit_effects(model, data, bags, threads, true, integrated)
                                                : std::vector<UnitEffectMoments>(bags.size(), unit_effect_prior(model));
  // With the field's uncertainty integrated, a shared effect given the field's draw (its loading c)
  // moves against the bag's own log total (loading G): log(eta e^u) has variance
  // rho + var + |c|^2 + 2 G . c, as the draws of units.csv give it.
  if (integrated && shared && sums.size() > 0) {
    for (Index k = 0; k < n_bags; ++k) {
      const Index pos = start[static_cast<size_t>(k)], n = start[static_cast<size_t>(k) + 1] - pos;
      UnitEffectMoments& u = units[static_cast<size_t>(k)];
      const double total = link.expected_total(w.segment(pos, n), m.segment(pos, n), v.segment(pos, n));
      if (u.loading.size() != sums.rows() - 1 || !(total > 0)) continue;
      const Vector G = sums.col(k).head(sums.rows() - 1) / total;
      u = {u.mean + u.shift, u.var + u.loading.squaredNorm() + 2 * G.dot(u.loading)};
    }
  }
  double nll = 0;
  for (size_t k = 0; k < bags.size(); ++k) {
    const Index a = bags[k], pos = start[k], n = start[k + 1] - pos;
    const Observation obs{data.response[a], data.trials_of(a)};
    nll += integrated ? lik.predictive_nll_integrated(model, obs, w.segment(pos, n), m.segment(pos, n),
                                                      v.segment(pos, n), cross[static_cast<Index>(k)], units[k])
                      : lik.predictive_nll(model, obs, w.segment(pos, n), m.segment(pos, n), v.segment(pos, n),
                                           cross[static_cast<Index>(k)], units[k]);
  }
  return nll;
}

}  // namespace

// Each source's bags with that source's view of the model; results in the order of `bags`.
std::vector<UnitEffectMoments> bag_unit_effects(const Model& model, const Dataset& data, const std::vector<Index>& bags,
                                                int threads, bool fitted_units) {
  if (model.spec.num_sources() == 1) return unit_effects_one_source(model, data, bags, threads, fitted_units);
  std::vector<UnitEffectMoments> out(bags.size());
  for (const SourceGroup& g : group_by_source(data, bags)) {
    const auto part = unit_effects_one_source(model.for_source(g.source), data, g.bags, threads, fitted_units);
    for (size_t k = 0; k < g.at.size(); ++k) out[g.at[k]] = part[k];
  }
  return out;
}

Vector predicted_bag_totals(const Model& model, const Dataset& data, const std::vector<Index>& bags, int threads,
                            bool fitted_units) {
  if (model.spec.num_sources() == 1) return totals_one_source(model, data, bags, threads, fitted_units);
  Vector out(static_cast<Index>(bags.size()));
  for (const SourceGroup& g : group_by_source(data, bags)) {
    const Vector part = totals_one_source(model.for_source(g.source), data, g.bags, threads, fitted_units);
    for (size_t k = 0; k < g.at.size(); ++k) out[static_cast<Index>(g.at[k])] = part[static_cast<Index>(k)];
  }
  return out;
}

double bag_predictive_nll(const Model& model, const Dataset& data, const std::vector<Index>& bags, int threads,
                          bool integrated) {
  if (bags.empty()) return NAN;
  double nll = 0;
  if (model.spec.num_sources() == 1)
    nll = nll_one_source(model, data, bags, threads, integrated);
  else
    for (const SourceGroup& g : group_by_source(data, bags))
      nll += nll_one_source(model.for_source(g.source), data, g.bags, threads, integrated);
  return nll / static_cast<double>(bags.size());
}

}  // namespace vbagg
