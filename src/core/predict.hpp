// Prediction of the pixel-level intensity lambda = Psi(f) (MODEL.md section 7; predict.cpp), of
// bags' totals, unit effects and densities (bag_predict.cpp), and joint draws (draws.cpp).
#pragma once

#include <vector>

#include "model.hpp"
#include "point_spread.hpp"

namespace vbagg {

// Distribution of lambda = Psi(f) for f ~ N(m, s^2) under a link.
double intensity_mean(Link link, double m, double s2);
double intensity_variance(Link link, double m, double s2);
double intensity_quantile(Link link, double m, double s2, double q);
double intensity_exceedance(Link link, double m, double s2, double threshold);  // P(lambda > t)

struct PredictOptions {
  std::vector<double> quantiles;   // levels in (0, 1)
  std::vector<double> exceedance;  // thresholds t
  int threads = 1;
  Index block = 4096;  // pixels per block: bounds the M x block workspace
};

// What every prediction from one model shares: q's posterior (O(M^3)) and the point estimates'
// spread (SpreadShifts: a posterior per direction and side). Made once, it serves any number of
// strips of a map or bags' draws.
class LatentField {
 public:
  explicit LatentField(Model model);
  const Model& model() const { return model_; }
  const Posterior& posterior() const { return post_; }
  const SpreadShifts& shifts() const { return shifts_; }

 private:
  Model model_;
  Posterior post_;
  SpreadShifts shifts_;
};

struct Prediction {
  Vector latent_mean, latent_var;  // f
  Vector mean, sd;                 // lambda
  Matrix quantiles;                // N x quantiles.size()
  Matrix exceedance;               // N x exceedance.size()
};

// Predicts at the inputs (D x N), in blocks and threads; each pixel is independent. The latent
// variance includes the point estimates' spread where the model has one.
Prediction predict(const LatentField& field, const Matrix& X, const PredictOptions& options);
Prediction predict(const Model& model, const Matrix& X, const PredictOptions& options);

// Latent mean and variance only.
void predict_latent(const LatentField& field, const Matrix& X, Vector& mean, Vector& var, int threads,
                    Index block = 4096);
void predict_latent(const Model& model, const Matrix& X, Vector& mean, Vector& var, int threads, Index block = 4096);

}  // namespace vbagg

namespace vbagg {

struct Dataset;

// The unit effect of each listed bag: for a unit the model was fitted to (by Dataset::bag_id, when
// fitted_units) its conditional given its count and its expected total (a count model's with its
// loading on the field's draws, UnitEffectMoments), the prior N(-sigma_u^2/2, sigma_u^2) for any
// other; (0, 0) without a unit effect.
std::vector<UnitEffectMoments> bag_unit_effects(const Model& model, const Dataset& data, const std::vector<Index>& bags,
                                                int threads, bool fitted_units = true);

// Predicted bag totals yhat_a = E[e^u] sum_i c_i p_i E[lambda_i] for the listed bags (the factor
// of the unit effect u as bag_unit_effects gives it: 1 for a unit not fitted, and without one).
Vector predicted_bag_totals(const Model& model, const Dataset& data, const std::vector<Index>& bags, int threads,
                            bool fitted_units = true);

// Mean predictive NLL of the listed bags' observations: Poisson NLL of y given yhat (poisson),
// Normal NLL with the marginal variances (normal), exponential NLL with mean yhat (exponential),
// beta-binomial with the prevalence's mean and variance under q, covariances included (binomial).
// A unit effect enters as the mixture of the count model over its prior (also for training units:
// the density of a count does not condition on it); an effect shared by a unit's periods over its
// distribution given the unit's other fitted periods.
// `integrated`: each observation's density under the predictive distribution with the field's
// uncertainty integrated (BagLikelihood::predictive_nll_integrated; counts: their lognormal total
// mixed into the count model), the proper score of the intervals the draws give.
double bag_predictive_nll(const Model& model, const Dataset& data, const std::vector<Index>& bags, int threads,
                          bool integrated = false);

}  // namespace vbagg

namespace vbagg {

// Posterior predictive draws of one bag's observation: joint draws of f over the bag's pixels
// (f = m + T^T z + sqrt(d) e, the nystrom form of q), lambda = Psi(f), eta = sum_i w_i lambda_i,
// then y ~ Poisson(eta) (poisson), N(eta, tau sum w^2) (normal, eta a sum or mean per
// aggregation), Exponential(mean eta) or Binomial(trials, eta) (eta the bag's prevalence). Inputs as in the model (D x
// N_a), w = c_i p_i. A count model's unit effect u ~ N(unit.mean, unit.var) multiplies eta by e^u, one u per draw;
// with a loading, u's mean moves with the draw's f (mean + shift + loading . zeta): a training unit's
// effect given its counts, conditioned on each draw of the field rather than on its mean.
// Blocks of the bag's pixels are shared over `threads`; the draws are the same for any number.
Vector bag_predictive_draws(const LatentField& field, const Matrix& X, const Vector& w, int samples,
                            unsigned long long seed, const UnitEffectMoments& unit = {}, double trials = 0,
                            int threads = 1);
Vector bag_predictive_draws(const Model& model, const Matrix& X, const Vector& w, int samples, unsigned long long seed,
                            const UnitEffectMoments& unit = {}, double trials = 0, int threads = 1);

// The normals zeta that every joint draw of f with this seed shares (samples x (num_q + the point
// spread's directions)): q's z, then the spread's eta. A unit effect's loading (UnitEffectMoments)
// is read against them.
Matrix shared_draw_normals(const LatentField& field, int samples, unsigned long long seed);

// Draws of one bag's eta = sum_i w_i Psi(f_i) (as bag_predictive_draws takes them, without the unit
// effect and the observation noise). Bags drawn with one seed share zeta, so their draws are joint
// in it; each pixel's own residual is keyed by its column of X, so two such calls share those too,
// column by column, where a joint draw would not.
Vector bag_total_draws(const LatentField& field, const Matrix& X, const Vector& w, int samples, unsigned long long seed,
                       int threads = 1);

// For bags whose pixels are the columns start[k] .. start[k + 1] - 1 of X, each bag's sums over
// its pixels (a column each): rows 0..R-1 hold sum_i g_i (t_i; a_i), the last sum_i g_i^2 (|t_i|^2 +
// |a_i|^2), with (t_i; a_i) pixel i's factors of q's covariance in the form the draws take (T = B K
// on q's z, then the point estimates' spread on its eta; no t_i for a MAP estimate). The same for
// any number of threads. std::invalid_argument when `start` does not rise from 0 to X's columns or
// g has not one weight per column.
Matrix bag_factor_sums(const LatentField& field, const Matrix& X, const Vector& g, const std::vector<Index>& start,
                       int threads = 1);

// For bags whose pixels are the columns start[k] .. start[k + 1] - 1 of X, each bag's
// sum_{i != j} g_i g_j Cov_q(f_i, f_j): with g_i = w_i E[Psi'(f_i)], the pixels' covariances'
// first-order share of Var[sum_i w_i Psi(f_i)] (for the identity link, all of it). q in the
// nystrom form that the draws take (Cov(f_i, f_j) = t_i . t_j off the diagonal), with the point
// estimates' spread. The same for any number of threads.
Vector bag_cross_covariances(const LatentField& field, const Matrix& X, const Vector& g,
                             const std::vector<Index>& start, int threads = 1);
// The same from the bags' bag_factor_sums: |sum_i g_i (t_i; a_i)|^2 - sum_i g_i^2 |(t_i; a_i)|^2.
Vector cross_covariances_of(const Matrix& sums);

// Joint pseudo-observations of the listed bags, as a calibrated model's observations would be:
// draw s of f over all the bags' pixels at once (z shared by every bag, as the truth's field is),
// then each bag's eta, its unit effect (units[k], its mean moving with the draw's field where it
// has a loading) and its observation noise. `model` is the bags' source's view. Each bag draws its
// effect on its own; with `effect_of` (an index in 0 .. bags - 1 per bag), bags of one index share
// one draw of its standard normal, which each scales by its own moments: one draw of the effect
// where their moments are the same, as for a unit's periods sharing their unit's effect
// (ModelSpec::unit_effect_shared). Column k holds bag k's draws. Seeded; the same for any number
// of threads.
Matrix joint_bag_draws(const Model& model, const Dataset& data, const std::vector<Index>& bags,
                       const std::vector<UnitEffectMoments>& units, int samples, unsigned long long seed,
                       int threads = 1, const std::vector<Index>& effect_of = {});

// How a calibrated model's coverage of one map strays from nominal. Joint draws of the latent f
// at the columns of X from q (as in bag_predictive_draws: z shared by every pixel), mapped by the
// link, are checked against intervals [lo(j, l), hi(j, l)] per pixel j and level l: entry (s, l)
// is the fraction of pixels whose draw s lies inside. Were the truth such a draw, the marginal
// intervals would be calibrated by construction, yet one map's coverage varies from draw to draw,
// because neighbouring pixels share the field's errors. Seeded; the same for any number of threads.
Matrix draw_coverage(const Model& model, const Matrix& X, const Matrix& lo, const Matrix& hi, int samples,
                     unsigned long long seed, int threads = 1);

}  // namespace vbagg
