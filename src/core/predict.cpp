#include "predict.hpp"

#include <cmath>
#include <utility>

#include "denormals.hpp"
#include "likelihood.hpp"
#include "link.hpp"
#include "point_spread.hpp"

namespace vbagg {

namespace {

void check_level(double q) {
  if (!(q > 0 && q < 1)) throw ConfigError("quantile level " + std::to_string(q) + " is not in (0, 1)");
}

}  // namespace

double intensity_mean(Link link, double m, double s2) { return link_of(link).mean(m, s2); }
double intensity_variance(Link link, double m, double s2) { return link_of(link).variance(m, s2); }
double intensity_quantile(Link link, double m, double s2, double q) {
  check_level(q);
  if (!std::isfinite(m) || !std::isfinite(s2)) return NAN;
  return link_of(link).quantile(m, s2, q);
}
double intensity_exceedance(Link link, double m, double s2, double t) { return link_of(link).exceedance(m, s2, t); }

LatentField::LatentField(Model model) : model_(std::move(model)), post_(compute_posterior(model_)), shifts_(model_) {}

void predict_latent(const Model& model, const Matrix& X, Vector& mean, Vector& var, int threads, Index block) {
  predict_latent(LatentField(model), X, mean, var, threads, block);
}

void predict_latent(const LatentField& field, const Matrix& X, Vector& mean, Vector& var, int threads, Index block) {
  const Model& model = field.model();
  const Posterior& post = field.posterior();
  const SpreadShifts& shifts = field.shifts();
  const Index N = X.cols();
  mean.resize(N);
  var.resize(N);
  const Index blocks = (N + block - 1) / block;
#pragma omp parallel num_threads(std::max(1, threads))
  {
    const FlushDenormals flush;
    LatentScratch scratch;
    Matrix A;
#pragma omp for schedule(static)
    for (Index b = 0; b < blocks; ++b) {
      const Index begin = b * block, len = std::min(block, N - begin);
      latent_marginals_into(model, post, X.middleCols(begin, len), mean.segment(begin, len), var.segment(begin, len),
                            scratch);
      if (shifts.directions() == 0) continue;
      shifts.into(X.middleCols(begin, len), mean.segment(begin, len), A, scratch);
      var.segment(begin, len) += A.colwise().squaredNorm().transpose();
    }
  }
}

Prediction predict(const Model& model, const Matrix& X, const PredictOptions& o) {
  return predict(LatentField(model), X, o);
}

Prediction predict(const LatentField& field, const Matrix& X, const PredictOptions& o) {
  for (double q : o.quantiles) check_level(q);
  Prediction p;
  predict_latent(field, X, p.latent_mean, p.latent_var, o.threads, o.block);
  const Index N = X.cols();
  const Link link = field.model().spec.link;
  p.mean.resize(N);
  p.sd.resize(N);
  p.quantiles.resize(N, static_cast<Index>(o.quantiles.size()));
  p.exceedance.resize(N, static_cast<Index>(o.exceedance.size()));
#pragma omp parallel for schedule(static, 1024) num_threads(std::max(1, o.threads))
  for (Index i = 0; i < N; ++i) {
    const double m = p.latent_mean[i], s2 = p.latent_var[i];
    p.mean[i] = intensity_mean(link, m, s2);
    p.sd[i] = std::sqrt(intensity_variance(link, m, s2));
    for (size_t k = 0; k < o.quantiles.size(); ++k)
      p.quantiles(i, static_cast<Index>(k)) = intensity_quantile(link, m, s2, o.quantiles[k]);
    for (size_t k = 0; k < o.exceedance.size(); ++k)
      p.exceedance(i, static_cast<Index>(k)) = intensity_exceedance(link, m, s2, o.exceedance[k]);
  }
  return p;
}

}  // namespace vbagg

#include <algorithm>
#include <map>
#include <unordered_set>

#include "dataset.hpp"
#include "likelihoods/count.hpp"
#include "metrics.hpp"

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

}  // namespace

namespace {

// Each listed bag's sums over its pixels, the bags' pixels being the columns start[k] ..
// start[k + 1] - 1 of X: rows 0..R-1 hold sum_i g_i (t_i; a_i), the last sum_i g_i^2 (|t_i|^2 +
// |a_i|^2), with (t_i; a_i) pixel i's factors of q's covariance in the form the draws take (T = B K,
// then the point estimates' spread; no t_i for a MAP estimate). The same for any number of threads.
Matrix bag_factor_sums(const LatentField& field, const Matrix& X, const Vector& g, const std::vector<Index>& start,
                       int threads);

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
  const bool any = std::find(fitted.begin(), fitted.end(), true) != fitted.end();
  if (!any) return unit_effects_given(model, data, bags, fitted, Vector());
  Matrix loads;
  const bool moving = likelihood_of(model.spec.likelihood).is_count() && !model.spec.map_estimate;
  const Vector all = field_totals(model, data, bags, threads, moving ? &loads : nullptr);
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
  const Index n_bags = static_cast<Index>(bags.size());
  Vector cross = Vector::Zero(n_bags);
  Matrix sums;  // bag_factor_sums of the bags' totals
  if (integrated || lik.predictive_reads_covariance()) {
    const LinkFunction& link = link_of(model.spec.link);
    Vector g(w.size());
    for (Index i = 0; i < w.size(); ++i) g[i] = w[i] * link.mean_slope(m[i], v[i]);
    std::vector<Index> start{0};
    for (Index a : bags) start.push_back(start.back() + data.bag_size(a));
    sums = bag_factor_sums(field, X, g, start, threads);
    const Index rank = sums.rows() - 1;
    cross = sums.topRows(rank).colwise().squaredNorm().transpose() - sums.row(rank).transpose();
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
    const LinkFunction& link = link_of(model.spec.link);
    Index pos = 0;
    for (Index k = 0; k < n_bags; ++k) {
      const Index n = data.bag_size(bags[static_cast<size_t>(k)]);
      UnitEffectMoments& u = units[static_cast<size_t>(k)];
      double total = 0;
      for (Index i = pos; i < pos + n; ++i) total += w[i] * link.mean(m[i], v[i]);
      pos += n;
      if (u.loading.size() != sums.rows() - 1 || !(total > 0)) continue;
      const Vector G = sums.col(k).head(sums.rows() - 1) / total;
      u = {u.mean + u.shift, u.var + u.loading.squaredNorm() + 2 * G.dot(u.loading)};
    }
  }
  double nll = 0;
  Index pos = 0;
  for (size_t k = 0; k < bags.size(); ++k) {
    const Index a = bags[k], n = data.bag_size(a);
    const Observation obs{data.response[a], data.trials_of(a)};
    nll += integrated ? lik.predictive_nll_integrated(model, obs, w.segment(pos, n), m.segment(pos, n),
                                                      v.segment(pos, n), cross[static_cast<Index>(k)], units[k])
                      : lik.predictive_nll(model, obs, w.segment(pos, n), m.segment(pos, n), v.segment(pos, n),
                                           cross[static_cast<Index>(k)], units[k]);
    pos += n;
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

#include <algorithm>
#include <random>
#include <stdexcept>

#include "counter_rng.hpp"

namespace vbagg {

namespace {

constexpr Index kDrawBlock = 1024;

// The low-rank factors of q's covariance at the pixels X in the nystrom form that draws and bag
// terms take: Cov(f_i, f_j) = t_i . t_j + a_i . a_j off the diagonal, with T = B K (K: the kernel
// rows, which the caller's latent pass over X left in scratch) and A the point estimates' spread
// (none: 0 rows). `m` is the model's latent mean at X, which the spread's directions start from.
void covariance_factors(const Posterior& post, const SpreadShifts& shifts, const Eigen::Ref<const Matrix>& X,
                        const Vector& m, Matrix& T, Matrix& A, LatentScratch& scratch) {
  T.noalias() = post.B * scratch.K.view();
  if (shifts.directions() > 0)
    shifts.into(X, m, A, scratch);
  else
    A.resize(0, X.cols());
}

// Joint draws of the latent f from q: f = m + T^T z + r e with z ~ N(0, I) over q's entries,
// shared by every pixel, and e independent per pixel; with the point estimates' spread
// (Model::spread) also + a^T eta, eta ~ N(0, I) over its directions, shared by every pixel. All are
// counter-based normals keyed by the seed and their place (z by entry, e by pixel, eta by
// direction), so blocks of pixels go to any thread and the draws do not depend on the threads.
class LatentDraws {
 public:
  struct Scratch {
    LatentScratch latent;
    Vector m, s2, e;
    Matrix T, A;
  };

  LatentDraws(const LatentField& field, int samples, unsigned long long seed)
      : model_(field.model()),
        post_(field.posterior()),
        shifts_(field.shifts()),
        samples_(samples),
        seed_(seed),
        Zeta_(shared_draw_normals(field, samples, seed)) {}

  static Index blocks(Index n) { return (n + kDrawBlock - 1) / kDrawBlock; }

  // The draws' shared normals (shared_draw_normals), a draw per row.
  const Matrix& zeta() const { return Zeta_; }

  // Calls use(b, begin, Ft) for each block b of kDrawBlock pixels of X (the last may be shorter),
  // which starts at pixel `begin`, with Ft its draws (block below), the blocks shared over `threads`.
  template <class Use>
  void over_blocks(const Matrix& X, int threads, Use&& use) const {
    const Index n = X.cols(), count = blocks(n);
#pragma omp parallel num_threads(std::max(1, threads)) if (threads > 1 && count > 1)
    {
      const FlushDenormals flush;
      Scratch scratch;
      Matrix Ft;
#pragma omp for schedule(dynamic, 1)
      for (Index b = 0; b < count; ++b) {
        const Index begin = b * kDrawBlock, len = std::min(kDrawBlock, n - begin);
        block(X.middleCols(begin, len), begin, Ft, scratch);
        use(b, begin, Ft);
      }
    }
  }

  // Ft (samples x len): the draws at the pixels X (len columns) that start at place `begin` of
  // the whole set, pixel i's draws in column i.
  void block(const Eigen::Ref<const Matrix>& X, Index begin, Matrix& Ft, Scratch& s) const {
    const Index len = X.cols();
    s.m.resize(len);
    s.s2.resize(len);
    latent_marginals_into(model_, post_, X, s.m, s.s2, s.latent);
    Ft.resize(samples_, len);
    // A MAP estimate has no latent uncertainty.
    if (model_.spec.map_estimate) {
      Ft.rowwise() = s.m.transpose();
      return;
    }
    covariance_factors(post_, shifts_, X, s.m, s.T, s.A, s.latent);
    const Vector resid_sd = (s.s2 - s.T.colwise().squaredNorm().transpose()).cwiseMax(0.0).cwiseSqrt();
    Ft.noalias() = Zeta_.leftCols(s.T.rows()) * s.T;  // (T^T z)^T
    if (shifts_.directions() > 0) Ft.noalias() += Zeta_.rightCols(s.A.rows()) * s.A;
    s.e.resize(samples_);
    for (Index i = 0; i < len; ++i) {
      Ft.col(i).array() += s.m[i];
      if (resid_sd[i] > 0) {
        stream_normals(counter_stream(seed_, 1, static_cast<std::uint64_t>(begin + i)), samples_, s.e.data());
        Ft.col(i) += resid_sd[i] * s.e;
      }
    }
  }

 private:
  const Model& model_;
  const Posterior& post_;
  const SpreadShifts& shifts_;
  const int samples_;
  const unsigned long long seed_;
  Matrix Zeta_;  // (z, eta)^T: a draw per row
};

}  // namespace

Matrix shared_draw_normals(const LatentField& field, int samples, unsigned long long seed) {
  const Index Q = field.model().num_q(), K = field.shifts().directions();
  Matrix zeta(samples, Q + K);
  for (Index k = 0; k < Q; ++k)
    stream_normals(counter_stream(seed, 0, static_cast<std::uint64_t>(k)), samples, &zeta(0, k));
  for (Index k = 0; k < K; ++k)
    stream_normals(counter_stream(seed, 3, static_cast<std::uint64_t>(k)), samples, &zeta(0, Q + k));
  return zeta;
}

Vector bag_predictive_draws(const Model& model, const Matrix& X, const Vector& w, int samples, unsigned long long seed,
                            const UnitEffectMoments& unit, double trials, int threads) {
  return bag_predictive_draws(LatentField(model), X, w, samples, seed, unit, trials, threads);
}

namespace {

// loading . zeta_s of each draw s of `latent`, for a unit effect whose mean moves with the field.
Vector effect_shifts(const LatentDraws& latent, const UnitEffectMoments& unit) {
  if (unit.loading.size() != latent.zeta().cols())
    throw std::invalid_argument("a unit effect's loading has " + std::to_string(unit.loading.size()) +
                                " entries where the field's draws have " + std::to_string(latent.zeta().cols()));
  return latent.zeta() * unit.loading;
}

// The bag's eta = sum_i w_i Psi(f_i) (w aggregated) under each of `latent`'s draws. The blocks'
// partial sums are added in block order, so the total is the same for any threads.
Vector draw_totals(const LatentDraws& latent, const LinkFunction& link, const Matrix& X, const Vector& w, int samples,
                   int threads) {
  const Index blocks = LatentDraws::blocks(X.cols());
  Matrix partial = Matrix::Zero(samples, blocks);
  latent.over_blocks(X, threads, [&](Index b, Index begin, const Matrix& Ft) {
    auto eta = partial.col(b);
    for (Index i = 0; i < Ft.cols(); ++i)
      for (int s = 0; s < samples; ++s) eta[s] += w[begin + i] * link.psi(Ft(s, i));
  });
  Vector eta = Vector::Zero(samples);
  for (Index b = 0; b < blocks; ++b) eta += partial.col(b);
  return eta;
}

}  // namespace

Vector bag_total_draws(const LatentField& field, const Matrix& X, const Vector& w_in, int samples,
                       unsigned long long seed, int threads) {
  const Model& model = field.model();
  const Vector w = likelihood_of(model.spec.likelihood).aggregate_weights(model.spec, w_in);
  return draw_totals(LatentDraws(field, samples, seed), link_of(model.spec.link), X, w, samples, threads);
}

Vector bag_predictive_draws(const LatentField& field, const Matrix& X, const Vector& w_in, int samples,
                            unsigned long long seed, const UnitEffectMoments& unit, double trials, int threads) {
  const Model& model = field.model();
  const BagLikelihood& lik = likelihood_of(model.spec.likelihood);
  const Vector w = lik.aggregate_weights(model.spec, w_in);
  const LatentDraws latent(field, samples, seed);
  Vector eta = draw_totals(latent, link_of(model.spec.link), X, w, samples, threads);
  // The unit effect moves the bag's linear predictor (a count's log rate: e^u times the rate), one u
  // per draw, its mean with the draw's field where it was conditioned on one; then the observation
  // noise.
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  const bool moves = unit.loading.size() > 0 && !model.spec.map_estimate;
  const Vector along = moves ? effect_shifts(latent, unit) : Vector();
  if (unit.var > 0 || unit.mean != 0)
    for (int s = 0; s < samples; ++s) {
      const double mean = moves ? unit.mean + unit.shift + along[s] : unit.mean;
      eta[s] = lik.aggregate_with_unit_effect(eta[s], mean + std::sqrt(unit.var) * normal(rng));
    }
  Vector draws(samples);
  for (int s = 0; s < samples; ++s) draws[s] = lik.draw(model, eta[s], trials, w, rng);
  return draws;
}

namespace {

Matrix bag_factor_sums(const LatentField& field, const Matrix& X, const Vector& g, const std::vector<Index>& start,
                       int threads) {
  const Model& model = field.model();
  const Index bags = static_cast<Index>(start.size()) - 1, N = X.cols();
  const Index rank = (model.spec.map_estimate ? 0 : field.posterior().B.rows()) + field.shifts().directions();
  if (bags <= 0 || rank == 0) return Matrix::Zero(rank + 1, std::max<Index>(bags, 0));
  std::vector<Index> bag_of(static_cast<size_t>(N));
  for (Index k = 0; k < bags; ++k)
    std::fill(bag_of.begin() + start[static_cast<size_t>(k)], bag_of.begin() + start[static_cast<size_t>(k) + 1], k);
  // Each block's sums for the run of bags it touches (from first[b]), added in block order, so the
  // result is the same for any number of threads.
  const Index blocks = (N + kDrawBlock - 1) / kDrawBlock;
  std::vector<Matrix> part(static_cast<size_t>(blocks));
  std::vector<Index> first(static_cast<size_t>(blocks), 0);
#pragma omp parallel num_threads(std::max(1, threads)) if (threads > 1 && blocks > 1)
  {
    const FlushDenormals flush;
    LatentScratch scratch;
    Vector m;
    Matrix T, A, F;
#pragma omp for schedule(dynamic, 1)
    for (Index b = 0; b < blocks; ++b) {
      const Index begin = b * kDrawBlock, len = std::min(kDrawBlock, N - begin);
      const auto Xb = X.middleCols(begin, len);
      m.resize(len);
      latent_means_into(model, field.posterior(), Xb, m, scratch);
      covariance_factors(field.posterior(), field.shifts(), Xb, m, T, A, scratch);
      F.resize(rank, len);
      if (!model.spec.map_estimate) F.topRows(T.rows()) = T;
      F.bottomRows(A.rows()) = A;
      const Index k0 = bag_of[static_cast<size_t>(begin)], k1 = bag_of[static_cast<size_t>(begin + len - 1)];
      first[static_cast<size_t>(b)] = k0;
      Matrix& sums = part[static_cast<size_t>(b)];
      sums.setZero(rank + 1, k1 - k0 + 1);
      for (Index i = 0; i < len; ++i) {
        const double gi = g[begin + i];
        auto col = sums.col(bag_of[static_cast<size_t>(begin + i)] - k0);
        col.head(rank) += gi * F.col(i);
        col[rank] += gi * gi * F.col(i).squaredNorm();
      }
    }
  }
  Matrix sums = Matrix::Zero(rank + 1, bags);
  for (Index b = 0; b < blocks; ++b)
    sums.middleCols(first[static_cast<size_t>(b)], part[static_cast<size_t>(b)].cols()) += part[static_cast<size_t>(b)];
  return sums;
}

}  // namespace

Vector bag_cross_covariances(const LatentField& field, const Matrix& X, const Vector& g,
                             const std::vector<Index>& start, int threads) {
  const Matrix sums = bag_factor_sums(field, X, g, start, threads);
  const Index rank = sums.rows() - 1;
  return sums.topRows(rank).colwise().squaredNorm().transpose() - sums.row(rank).transpose();
}

Matrix joint_bag_draws(const Model& model, const Dataset& data, const std::vector<Index>& bags,
                       const std::vector<UnitEffectMoments>& units, int samples, unsigned long long seed, int threads) {
  const BagLikelihood& lik = likelihood_of(model.spec.likelihood);
  const LinkFunction& link = link_of(model.spec.link);
  const Index n = static_cast<Index>(bags.size());
  // The bags' pixels one after another, with each bag's weights and where it starts.
  std::vector<Index> start(static_cast<size_t>(n) + 1, 0);
  for (Index k = 0; k < n; ++k)
    start[static_cast<size_t>(k) + 1] = start[static_cast<size_t>(k)] + data.bag_size(bags[static_cast<size_t>(k)]);
  const Index N = start.back();
  Matrix X(data.num_inputs(), N);
  Vector w(N);
  std::vector<Index> bag_of(static_cast<size_t>(N));
  for (Index k = 0; k < n; ++k) {
    const Index a = bags[static_cast<size_t>(k)], b = data.bag_begin(a), len = data.bag_size(a),
                at = start[static_cast<size_t>(k)];
    X.middleCols(at, len) = data.inputs.middleCols(b, len);
    w.segment(at, len) =
        lik.aggregate_weights(model.spec, data.coverage.segment(b, len).cwiseProduct(data.population.segment(b, len)));
    std::fill(bag_of.begin() + at, bag_of.begin() + at + len, k);
  }
  // Each block's sums per bag it touches (a run of bags, from first[b]), added in block order.
  const Index blocks = LatentDraws::blocks(N);
  std::vector<Matrix> part(static_cast<size_t>(blocks));
  std::vector<Index> first(static_cast<size_t>(blocks), 0);
  const LatentField field(model);
  const LatentDraws latent(field, samples, seed);
  latent.over_blocks(X, threads, [&](Index b, Index begin, const Matrix& Ft) {
    const Index k0 = bag_of[static_cast<size_t>(begin)], k1 = bag_of[static_cast<size_t>(begin + Ft.cols() - 1)];
    first[static_cast<size_t>(b)] = k0;
    Matrix& eta = part[static_cast<size_t>(b)];
    eta.setZero(samples, k1 - k0 + 1);
    for (Index i = 0; i < Ft.cols(); ++i) {
      auto col = eta.col(bag_of[static_cast<size_t>(begin + i)] - k0);
      for (int s = 0; s < samples; ++s) col[s] += w[begin + i] * link.psi(Ft(s, i));
    }
  });
  Matrix eta = Matrix::Zero(samples, n);
  for (Index b = 0; b < blocks; ++b)
    eta.middleCols(first[static_cast<size_t>(b)], part[static_cast<size_t>(b)].cols()) += part[static_cast<size_t>(b)];
  // Each bag's unit effect (its mean moving with the draw's field where it has a loading, as in
  // bag_predictive_draws) and observation noise from a stream of its own.
  const bool moving =
      std::any_of(units.begin(), units.end(), [](const UnitEffectMoments& u) { return u.loading.size() > 0; }) &&
      !model.spec.map_estimate;
  Matrix y(samples, n);
  for (Index k = 0; k < n; ++k) {
    const Index a = bags[static_cast<size_t>(k)], at = start[static_cast<size_t>(k)];
    const Vector wk = w.segment(at, start[static_cast<size_t>(k) + 1] - at);
    std::mt19937_64 rng(counter_stream(seed, 2, static_cast<std::uint64_t>(k)));
    std::normal_distribution<double> normal;
    const UnitEffectMoments& u = units[static_cast<size_t>(k)];
    const Vector along = moving && u.loading.size() ? effect_shifts(latent, u) : Vector::Zero(samples);
    const double shift = moving ? u.shift : 0.0;
    for (int s = 0; s < samples; ++s) {
      const double e =
          u.var > 0 || u.mean != 0
              ? lik.aggregate_with_unit_effect(eta(s, k), u.mean + shift + along[s] + std::sqrt(u.var) * normal(rng))
              : eta(s, k);
      y(s, k) = lik.draw(model, e, data.trials_of(a), wk, rng);
    }
  }
  return y;
}

Matrix draw_coverage(const Model& model, const Matrix& X, const Matrix& lo, const Matrix& hi, int samples,
                     unsigned long long seed, int threads) {
  const Index n = X.cols(), L = lo.cols();
  if (lo.rows() != n || hi.rows() != n || hi.cols() != L)
    throw std::invalid_argument("draw_coverage: the intervals must have a row per pixel");
  const LinkFunction& link = link_of(model.spec.link);
  // Counts of pixels inside, per block: whole numbers, so their sum is exact in any order.
  std::vector<Matrix> inside(static_cast<size_t>(LatentDraws::blocks(n)));
  const LatentField field(model);
  LatentDraws(field, samples, seed).over_blocks(X, threads, [&](Index b, Index begin, const Matrix& Ft) {
    Matrix& c = inside[static_cast<size_t>(b)];
    c.setZero(samples, L);
    for (Index i = 0; i < Ft.cols(); ++i)
      for (int s = 0; s < samples; ++s) {
        const double v = link.psi(Ft(s, i));
        for (Index l = 0; l < L; ++l)
          if (v >= lo(begin + i, l) && v <= hi(begin + i, l)) c(s, l) += 1;
      }
  });
  Matrix total = Matrix::Zero(samples, L);
  for (const Matrix& c : inside) total += c;
  return n > 0 ? Matrix(total / static_cast<double>(n)) : total;
}

}  // namespace vbagg
