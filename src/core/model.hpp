// The VBAgg model: GP prior, whitened variational posterior and bag likelihood, plus the packing
// of its free parameters into one vector for the optimisers.
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "kernel.hpp"
#include "types.hpp"

namespace vbagg {

// Which bag likelihood and link a model uses. Their behaviour lives in one file each
// (likelihoods/*.cpp, links/*.cpp), found through the registries of likelihood.hpp and link.hpp;
// the names parsed and written here come from those registries.
enum class LikelihoodKind { poisson, negative_binomial, normal, exponential, binomial };
enum class Link { exp, square, identity, logit };
// How the expected log likelihood of a count bag is computed (MODEL.md 4a, 4b, 4e): `bound` is
// the Jensen bound for the exp link (and the Taylor approximation for the square link, which has
// no bound); `delta` keeps the posterior variance inside the log by the second-order delta method;
// `sample` averages the log likelihood over fresh draws of f every optimiser step (any likelihood
// and link; minibatch optimisers only).
enum class Expectation { bound, delta, sample };
// How the mean's intercept and covariate coefficients are estimated (MODEL.md section 2): `point`
// keeps mu (maximum likelihood) and beta (MAP under its Gaussian prior) as single values;
// `variational` makes the intercept's offset from mu and beta part of q, whitened beside the
// inducing values, so predictions carry their uncertainty and the kernel's hyperparameters are
// fitted as under REML (integrated over the fixed effects, not conditioned on a guess of them).
enum class FixedEffects { point, variational };
// How a bag term that needs the within-bag covariance gets it (MODEL.md 4b, 4c).
enum class CovarianceMode { nystrom, exact };
// Normal bag model: y_a is sum_i p_i f_i (sum) or that divided by P_a (mean).
enum class Aggregation { sum, mean };
// Which estimator a fitted model comes from (MODEL.md sections 3 and 9): the variational model
// (vbagg), the same fitted to units collapsed to their mean inputs (bag_pixel), the MAP Nystrom
// point estimate (nystrom), or a rate per unit with no GP at all (constant).
enum class ModelKind { vbagg, bag_pixel, nystrom, constant };

LikelihoodKind parse_likelihood(const std::string& s);
Link parse_link(const std::string& s);
CovarianceMode parse_covariance_mode(const std::string& s);
Aggregation parse_aggregation(const std::string& s);
Expectation parse_expectation(const std::string& s);
FixedEffects parse_fixed_effects(const std::string& s);
ModelKind parse_model_kind(const std::string& s);
std::string to_string(LikelihoodKind v);
std::string to_string(Link v);
std::string to_string(CovarianceMode v);
std::string to_string(Aggregation v);
std::string to_string(Expectation v);
std::string to_string(FixedEffects v);
std::string to_string(ModelKind v);
// Every spelling a setting accepts, in the order of its enum (for help texts and validation).
std::vector<std::string> likelihood_names();
std::vector<std::string> link_names();
std::vector<std::string> covariance_mode_names();
std::vector<std::string> aggregation_names();
std::vector<std::string> expectation_names();
std::vector<std::string> fixed_effects_names();
std::vector<std::string> model_kind_names();

// How the bags of one data source observe the latent field (docs/sources.md): the source's name, its
// likelihood, its expectation, its aggregation (normal), whether its units carry a unit effect, its
// link and the task it observes.
struct SourceSpec {
  std::string name;
  LikelihoodKind likelihood = LikelihoodKind::poisson;
  Expectation expectation = Expectation::bound;
  Aggregation aggregation = Aggregation::sum;
  bool unit_effect = false;
  Link link = Link::exp;
  Index task = 0;  // which task (ModelSpec::tasks) the source observes
};

// The model's settings. The observation fields (likelihood, expectation, aggregation,
// unit_effect, link, task) are those of the first data source; a joint fit of several sources
// (docs/sources.md) lists the others in more_sources, and bags of source s are evaluated with
// for_source(s). Every function that takes one source's view (a spec without more_sources) works
// unchanged.
struct ModelSpec {
  LikelihoodKind likelihood = LikelihoodKind::poisson;
  Link link = Link::exp;
  CovarianceMode covariance = CovarianceMode::nystrom;
  Aggregation aggregation = Aggregation::sum;
  Expectation expectation = Expectation::bound;
  bool learn_inducing = false;
  // Linear mean mu + beta^T x over the first `linear_inputs` inputs (the standardised covariates;
  // coordinates come after them), beta ~ N(0, linear_prior_sd^2 I) (MODEL.md section 2). 0: a
  // constant mean.
  Index linear_inputs = 0;
  double linear_prior_sd = 1.0;
  // Point: beta at its MAP point. Variational: the intercept's offset c_0 ~ N(0, linear_prior_sd^2)
  // and beta are the last num_fixed_effects() entries of q, as w = c / linear_prior_sd ~ N(0, I),
  // one block per task.
  FixedEffects fixed_effects = FixedEffects::point;
  // MAP point estimate instead of a variational posterior (the nystrom baseline of MODEL.md
  // section 9): q collapses to m_v (no L_v), the likelihood is evaluated at f = m, and the KL is
  // replaced by the prior penalty prior_precision * |m_v|^2 / 2. Poisson with exp link, or normal
  // (nystrom covariance, which is zero for a point mass).
  bool map_estimate = false;
  double prior_precision = 1.0;
  // A random effect u_a of sd sigma_u on the linear predictor of every unit (MODEL.md 4g: a count's
  // log rate, the binomial's logit), integrated out of its likelihood, sigma_u learned. Count
  // likelihoods and the binomial.
  bool unit_effect = false;
  // With bags of several periods (ids <unit>@<period>, unit_of_bag): one effect per unit, shared by
  // its periods' bags, instead of one per bag. A unit's bags then enter the ELBO as one term
  // (shared_unit_effect_score), so minibatches hold whole units. Needs the exp link, the delta
  // method and the nystrom covariance (the months' covariances come from its h = T r).
  bool unit_effect_shared = false;
  // Penalised-complexity prior on sigma_u of every unit effect (Simpson et al. 2017, as R
  // disaggregation's iid effect): sigma_u ~ Exponential(rate), so P(sigma_u > U) = alpha for
  // rate = -log(alpha) / U; it pulls sigma_u toward 0. 0: none, sigma_u at its maximum-ELBO value.
  double unit_effect_prior_rate = 0;
  // Normal priors on one kernel part's log variance and log lengthscales (each latent's part
  // `part`), centred on the data's scales, of sd `sd`: they keep a field fitted where few units
  // report from collapsing (its variance to 0, or its lengthscale to a constant field), so that
  // units without counts are predicted with the field's uncertainty. A fixed variance has no prior.
  struct KernelPrior {
    Index part = -1;  // -1: none
    double log_variance = 0, log_lengthscale = 0, sd = 1;
  };
  KernelPrior kernel_prior;
  // Draws of f per bag and step for the sampled expectation.
  int samples = 8;
  // The deterministic expectations in residual form (the delta method, the binomial's and the
  // Normal's within-bag covariances): in a bag of more pixels than this, the residual variance d_i
  // is computed at this many pixels, each standing for a run of its neighbours in the bag's order.
  // d_i weighs about 1/N_a of a large bag's variance but costs a quadratic form in P per pixel, as
  // much again as the bound's pass. 0: every pixel's own.
  Index residual_pixels = 128;
  // The first source's name (empty for a model of one source) and the further sources.
  std::string source_name;
  std::vector<SourceSpec> more_sources;
  // Shared latent fields (docs/sources.md, "Tasks and shared latent fields"): `latents` sparse GPs
  // u_q, each with its own kernel and inducing inputs, and the tasks the sources observe, task d's
  // latent being f_d = mu_d + sum_q w_dq u_q. One task and one latent is the plain model, with no
  // mixing weights. `task` is the first source's task (in a source's view, that source's).
  Index latents = 1;
  std::vector<std::string> tasks;  // names; empty: one unnamed task
  Index task = 0;

  Index num_sources() const { return 1 + static_cast<Index>(more_sources.size()); }
  Index num_tasks() const { return std::max<Index>(1, static_cast<Index>(tasks.size())); }
  // Whether the model mixes latents into tasks (and so learns the weights w_dq).
  bool mixed() const { return num_tasks() > 1 || latents > 1; }
  // The task's name: tasks[d], or "" for the one task of an unmixed model.
  std::string task_name(Index d) const { return tasks.empty() ? std::string() : tasks[static_cast<size_t>(d)]; }
  // The index of the task named `name` in tasks, or -1 if none is.
  Index find_task(const std::string& name) const {
    const auto it = std::find(tasks.begin(), tasks.end(), name);
    return it == tasks.end() ? -1 : static_cast<Index>(it - tasks.begin());
  }
  SourceSpec source(Index s) const;
  // The spec as source s's bags see it: its observation fields in the first source's place and no
  // further sources. for_source(0) of a one-source spec is the spec itself.
  ModelSpec for_source(Index s) const;
  // Whether any source has a unit effect, or uses the sampled expectation.
  bool any_unit_effect() const;
  bool any_sampled() const;

  // Throws ConfigError for combinations MODEL.md does not define (e.g. exponential + square), in
  // any source (named in the message when there are several).
  void validate() const;
  // Entries of q after the inducing values: the intercept's offset and beta when variational, for
  // every task (task d's are the d-th block of fixed_effects_per_task()).
  Index fixed_effects_per_task() const { return fixed_effects == FixedEffects::variational ? 1 + linear_inputs : 0; }
  Index num_fixed_effects() const { return fixed_effects_per_task() * num_tasks(); }
  // Coefficients held as a point value (Model::linear_mean).
  Index num_linear_point() const { return fixed_effects == FixedEffects::point ? linear_inputs : 0; }
  // Point coefficients of every task (each task has its own linear mean).
  Index num_linear_coefficients() const { return num_linear_point() * num_tasks(); }
};

// Mean and variance of a unit's effect u: its conditional given its count for a training unit,
// the prior (BagLikelihood::unit_effect_prior) for any other, (0, 0) without a unit effect.
struct UnitEffectMoments {
  UnitEffectMoments() = default;
  UnitEffectMoments(double mean, double var) : mean(mean), var(var) {}
  double mean = 0, var = 0;
  // A training unit's effect given its counts moves with the field it was conditioned on:
  // the counts fix the sum of the unit's log rates and its effect far better than either part. For
  // a draw of the field whose shared normals are zeta (q's z, then the point estimates' spread's
  // eta, as LatentDraws orders them), the effect's conditional mean is mean + shift + loading .
  // zeta. Empty: the effect is independent of the field's draw.
  Vector loading;
  double shift = 0;
};

// The least log sigma_u a fit takes. Where no spread is best, the ELBO keeps rewarding a smaller
// sigma_u ever more faintly, and Adam, whose steps do not shrink with the gradient, walks log sigma_u
// down without end, to where sigma_u^2 underflows and the terms turn NaN. At e^-10 (4.5e-5) the
// effect moves a rate by 0.005 %: no count tells that from none.
constexpr double kUnitLogSdFloor = -10;

// The unit effect on the linear predictor of every unit (MODEL.md 4g): u_a ~ N(-sigma_u^2/2,
// sigma_u^2) on a count's log rate (the mean makes E[e^u] = 1, so the maps are expected rates),
// N(0, sigma_u^2) on the binomial's logit. Integrated out of each bag's likelihood in the fit
// (likelihoods/unit_effect.cpp, binomial_effect.cpp), so its one parameter is
// log sigma_u. `units` names the training units (Dataset::bag_id): their own effect given their
// count is known and predicted; any other unit's comes from the prior.
struct UnitEffect {
  double log_sd = -2.302585092994046;  // log 0.1: close to no effect at the start of a fit
  std::vector<std::string> units;
  // An effect shared by a unit's periods (ModelSpec::unit_effect_shared): each training unit's
  // effect given all its fitted periods' counts at the end of the fit (fit(); the unit's id
  // without its period). Predictions of a period whose data hold none of the unit's fitted
  // periods, such as a forecast, take it from here.
  std::map<std::string, UnitEffectMoments> posterior;
};

// The spread of the point estimates after q (the mean, fixed effects, kernel, mixing weights and
// noise parameters), which q's intervals otherwise take as known: a Laplace approximation of
// max_q ELBO over them (point_spread.hpp). Column k of each matrix is one direction of
// N(0, Sigma), Sigma = D D^T: its change of the field's parameters (the layout's entries from the
// mean block to the mixing block, the same in every source's view) and the change of q's mean
// that follows it (q's optimum moves with them). A map's latent f then carries
// sum_k a_k(x) eta_k, eta ~ N(0, I), a_k(x) the derivative of its mean along direction k. No
// columns: the point estimates are taken as known.
struct PointSpread {
  Matrix field;   // F x K
  Matrix q_mean;  // num_q x K
  // The sd of each parameter after q under Sigma, by Model::param_names (for the log and the file).
  std::vector<std::string> names;
  Vector sd;
  Index directions() const { return field.cols(); }
};

struct Model {
  ModelSpec spec;
  Kernel kernel;    // latent 0's kernel
  Matrix inducing;  // D x M inducing inputs W of every latent, latent after latent
  // q(v) over the M whitened inducing values, then spec.num_fixed_effects() whitened fixed effects.
  Vector q_mean;       // m_v (num_q())
  Matrix q_chol;       // L_v (num_q() x num_q() lower, positive diagonal)
  double mean = 0.0;   // constant prior mean mu
  Vector linear_mean;  // beta of every task, task after task (spec.num_linear_coefficients() entries)
  // The likelihood's own parameters, named by BagLikelihood::param_names (log tau of the Normal
  // model, log r of the negative binomial; empty for Poisson).
  Vector likelihood_params;
  UnitEffect unit_effect;  // used when spec.unit_effect
  double jitter = 1e-6;    // relative jitter: K_WW + jitter * k(x,x) * I
  // The likelihood parameters and unit effect of each further source (spec.more_sources).
  struct SourceParams {
    Vector likelihood_params;
    UnitEffect unit_effect;
  };
  std::vector<SourceParams> more_sources;
  // Shared latent fields (spec.latents > 1 or several tasks): the kernels of latents 1.., the number
  // of inducing inputs of each latent (empty: all are latent 0's), the mixing weights w_dq (tasks x
  // latents) and the intercepts mu_d of tasks 1.. (task 0's is `mean`).
  std::vector<Kernel> more_kernels;
  std::vector<Index> inducing_sizes;
  Matrix mixing;
  Vector task_means;
  PointSpread spread;  // empty unless the fit estimated it (FitOptions::point_spread)

  Index num_latents() const { return 1 + static_cast<Index>(more_kernels.size()); }
  const Kernel& kernel_of(Index q) const { return q == 0 ? kernel : more_kernels[static_cast<size_t>(q - 1)]; }
  Kernel& kernel_of(Index q) { return q == 0 ? kernel : more_kernels[static_cast<size_t>(q - 1)]; }
  // Latent q's inducing inputs are the columns [latent_begin(q), latent_begin(q) + latent_size(q)).
  Index latent_begin(Index q) const;
  Index latent_size(Index q) const;
  // Kernel hyperparameters of every latent, latent after latent (the kernel block of the layout).
  Index num_kernel_params() const;
  // w_dq, 1 for an unmixed model.
  double weight(Index d, Index q) const { return spec.mixed() ? mixing(d, q) : 1.0; }
  double mean_of(Index d) const { return d == 0 ? mean : task_means[d - 1]; }
  // Task d's point coefficients beta_d.
  auto linear_of(Index d) const { return linear_mean.segment(d * spec.num_linear_point(), spec.num_linear_point()); }
  double& mean_of(Index d) { return d == 0 ? mean : task_means[d - 1]; }

  // The model as task d's maps see it: the view of the first source observing task d.
  Model for_task(Index d) const;
  // The correlation of the tasks' latent fields at one place under the fitted prior,
  // sum_q w_dq w_eq k_q(x,x) / sqrt(...) (tasks x tasks; 1 x 1 for an unmixed model).
  Matrix task_correlations() const;

  // The model as source s sees it: spec.for_source(s), with that source's likelihood parameters
  // and unit effect in the first source's place. The latent field is shared.
  Model for_source(Index s) const;
  // Source s's likelihood parameters and unit effect.
  const Vector& likelihood_params_of(Index s) const {
    return s == 0 ? likelihood_params : more_sources[static_cast<size_t>(s - 1)].likelihood_params;
  }
  Vector& likelihood_params_of(Index s) {
    return s == 0 ? likelihood_params : more_sources[static_cast<size_t>(s - 1)].likelihood_params;
  }
  const UnitEffect& unit_effect_of(Index s) const {
    return s == 0 ? unit_effect : more_sources[static_cast<size_t>(s - 1)].unit_effect;
  }
  UnitEffect& unit_effect_of(Index s) {
    return s == 0 ? unit_effect : more_sources[static_cast<size_t>(s - 1)].unit_effect;
  }

  Index num_inducing() const { return inducing.cols(); }
  Index num_q() const { return num_inducing() + spec.num_fixed_effects(); }
  // The entries of a unit effect's loading (UnitEffectMoments): the draws' shared normals, q's
  // entries then the point spread's directions; none for a MAP estimate, whose draws are its mean.
  Index loading_size() const { return spec.map_estimate ? 0 : num_q() + spread.directions(); }
  Index num_inputs() const { return inducing.rows(); }

  // Free parameters in the order of param_layout.hpp: m_v, L_v (lower triangle by column,
  // diagonal as its log; absent for a MAP estimate), mu, beta (linear mean), kernel
  // log-hyperparameters, the likelihood's parameters, the unit effect's log sigma_u, W (when
  // learned).
  Index num_params() const;
  Vector pack() const;
  void unpack(const Vector& theta);
  std::vector<std::string> param_names() const;
};

// Gradient of a scalar with respect to the model's parameters, in the model's own shapes.
struct ModelGradient {
  Vector q_mean;
  Matrix q_chol;  // with respect to L_v entries (lower triangle)
  double mean = 0;
  Vector linear_mean;
  Vector kernel;
  Vector task_means;
  Matrix mixing;  // tasks x latents when spec.mixed()
  // With respect to every source's likelihood parameters, source after source.
  Vector likelihood;
  // With respect to log sigma_u of each source with a unit effect, in source order (empty without).
  Vector unit_effect;
  Matrix inducing;  // D x M

  explicit ModelGradient(const Model& m);
  ModelGradient& operator+=(const ModelGradient& o);
  // In the order of Model::pack, converting the L_v diagonal to its log parameterisation.
  Vector pack(const Model& m) const;
};

// Quantities of q shared by every pixel, computed once per parameter value (O(M^3)).
// Every pixel x has the features phi(x) = [k_W(x); s z(x)] (M + P entries): its kernel against
// the inducing inputs, then, with variational fixed effects, z(x) = (1, x_1..x_d) scaled by the
// prior sd s. Whitening maps them by Lambda = blockdiag(L^{-1}, I_P), so f(x) = mu + phi^T Lambda^T
// w with w ~ q = N(m_v, L_v L_v^T) and the prior N(0, I).
// With shared latent fields, k_W(x) stacks every latent's k_q(W_q, x), L is block diagonal, and a
// task d's posterior scales latent q's block of Lambda by w_dq: f_d = mu_d + sum_q w_dq u_q.
struct Posterior {
  Index task = 0;
  Matrix L;     // chol(K_WW + eps I), block diagonal over the latents
  Matrix Linv;  // L^{-1}
  // blockdiag(w_d1 L_1^{-1}, ..., w_dQ L_Q^{-1}, I_P); with variational fixed effects of several
  // tasks, zero on the other tasks' blocks of the P entries
  Matrix Lambda;
  Vector alpha;  // Lambda^T m_v: mean m(x) = mu + phi(x)^T alpha
  Matrix B;      // L_v^T Lambda
  // blockdiag(L^{-T} L^{-1}, 0) - B^T B: variance s^2(x) = k(x,x) - phi(x)^T Q phi(x)
  Matrix Q;
  // blockdiag(L^{-T} L^{-1}, 0): the residual variance k(x,x) - phi(x)^T P phi(x) that the
  // inducing values leave (the covariance of f is T^T T plus its diagonal)
  Matrix P;
  double kdiag = 0;        // the task's k(x, x) = sum_q w_dq^2 k_q(x, x)
  Vector latent_kdiag;     // k_q(x, x) of each latent
  double jitter_used = 0;  // relative jitter that made the Cholesky succeed
};

// What every task's posterior shares: the block-diagonal Cholesky of K_WW + eps I, its inverse, each
// latent's k(x, x) and the relative jitter used (O(M^3), once per parameter value).
struct InducingFactor {
  Matrix L, Linv;
  Vector latent_kdiag;
  double jitter_used = 0;
};
// `threads` share the O(M^3) products by fixed column blocks (the result is the same for any count).
InducingFactor factor_inducing(const Model& model, int threads = 1);

// The posterior of task d from the shared factor (only its products with q, no factorisation), or
// with its own factor; by default of the task of the model's view, spec.task.
Posterior compute_posterior(const Model& model, const InducingFactor& factor, Index task, int threads = 1);
inline Posterior compute_posterior(const Model& model, Index task) {
  return compute_posterior(model, factor_inducing(model), task);
}
inline Posterior compute_posterior(const Model& model) { return compute_posterior(model, model.spec.task); }

// Per-pixel mean and variance of f for inputs stored one per column.
void latent_marginals(const Model& model, const Posterior& post, const Matrix& X, Vector& mean, Vector& var);

// Kernel scratch of the features of a block of pixels: one cache per latent.
struct FeatureCache {
  std::vector<KernelCache> latents;
};

// phi(x) of every column of X into the (M + P) x X.cols() matrix F (see Posterior).
void features_into(const Model& model, const Eigen::Ref<const Matrix>& X, Eigen::Ref<Matrix> F, FeatureCache& cache);

// Given dF = dL/dF for the kernel rows of the last features_into that filled `cache`, adds the
// gradient of every latent's kernel to grad_kernel (Model::num_kernel_params() entries) and, when
// grad_inducing is non-null, of the inducing inputs to it (D x M). Consumes the cache.
void features_backward(const Model& model, const Eigen::Ref<const Matrix>& dF, FeatureCache& cache, Vector& grad_kernel,
                       Matrix* grad_inducing);

// Buffers of latent_marginals_into, kept by a caller that predicts block after block so the
// M x block matrices are allocated once.
struct LatentScratch {
  Buffer K, R;
  FeatureCache kernel;
};

// The latent mean alone into a preallocated output (the kernel rows of X land in scratch.K).
void latent_means_into(const Model& model, const Posterior& post, const Eigen::Ref<const Matrix>& X,
                       Eigen::Ref<Vector> mean, LatentScratch& scratch);

// The same into preallocated outputs of X.cols() entries.
void latent_marginals_into(const Model& model, const Posterior& post, const Eigen::Ref<const Matrix>& X,
                           Eigen::Ref<Vector> mean, Eigen::Ref<Vector> var, LatentScratch& scratch);

// The intercept (entry 0) and the covariate coefficients beta of the mean, with their posterior
// sd: q's marginal for variational fixed effects, 0 for point estimates.
struct FixedEffectEstimates {
  Vector mean, sd;
};
FixedEffectEstimates fixed_effect_estimates(const Model& model);

// KL(q || N(0, I)) over the inducing values and any variational fixed effects (for a MAP estimate:
// the prior penalty), plus the prior penalties of the point estimates: the linear mean's
// |beta|^2 / (2 sd^2), each unit effect's -log p(log sigma_u) (unit_effect_prior_rate) and the
// kernel prior's (kernel_prior); adds its gradient to grad.
double kl_divergence(const Model& model, ModelGradient* grad);

}  // namespace vbagg
