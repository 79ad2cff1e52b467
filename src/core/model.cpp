#include "model.hpp"

#include <algorithm>
#include <cmath>

#include "likelihood.hpp"
#include "linalg.hpp"
#include "link.hpp"
#include "param_layout.hpp"
#include "products.hpp"

namespace vbagg {

namespace {

// The spelling of each value of an enum whose values run 0, 1, ... in the order of `names`.
template <class E>
E parse_named(const std::string& s, const std::vector<std::string>& names, const char* what) {
  std::string allowed;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == s) return static_cast<E>(i);
    allowed += (i ? ", " : "") + names[i];
  }
  throw ConfigError(std::string("unknown ") + what + " '" + s + "' (allowed: " + allowed + ")");
}

}  // namespace

std::vector<std::string> likelihood_names() {
  std::vector<std::string> n;
  for (const BagLikelihood* l : likelihood_registry()) n.push_back(l->name());
  return n;
}
std::vector<std::string> link_names() {
  std::vector<std::string> n;
  for (const LinkFunction* l : link_registry()) n.push_back(l->name());
  return n;
}
std::vector<std::string> covariance_mode_names() { return {"nystrom", "exact"}; }
std::vector<std::string> aggregation_names() { return {"sum", "mean"}; }
std::vector<std::string> expectation_names() { return {"bound", "delta", "sample"}; }
std::vector<std::string> fixed_effects_names() { return {"point", "variational"}; }
std::vector<std::string> model_kind_names() { return {"vbagg", "bag_pixel", "nystrom", "constant"}; }

LikelihoodKind parse_likelihood(const std::string& s) {
  return parse_named<LikelihoodKind>(s, likelihood_names(), "likelihood");
}
Link parse_link(const std::string& s) { return parse_named<Link>(s, link_names(), "link"); }
CovarianceMode parse_covariance_mode(const std::string& s) {
  return parse_named<CovarianceMode>(s, covariance_mode_names(), "covariance mode");
}
Aggregation parse_aggregation(const std::string& s) {
  return parse_named<Aggregation>(s, aggregation_names(), "aggregation");
}
Expectation parse_expectation(const std::string& s) {
  return parse_named<Expectation>(s, expectation_names(), "expectation");
}
FixedEffects parse_fixed_effects(const std::string& s) {
  return parse_named<FixedEffects>(s, fixed_effects_names(), "fixed-effects estimate");
}
ModelKind parse_model_kind(const std::string& s) { return parse_named<ModelKind>(s, model_kind_names(), "model.kind"); }
std::string to_string(LikelihoodKind v) { return likelihood_of(v).name(); }
std::string to_string(Link v) { return link_of(v).name(); }
std::string to_string(CovarianceMode v) { return covariance_mode_names()[static_cast<size_t>(v)]; }
std::string to_string(Aggregation v) { return aggregation_names()[static_cast<size_t>(v)]; }
std::string to_string(Expectation v) { return expectation_names()[static_cast<size_t>(v)]; }
std::string to_string(FixedEffects v) { return fixed_effects_names()[static_cast<size_t>(v)]; }
std::string to_string(ModelKind v) { return model_kind_names()[static_cast<size_t>(v)]; }

SourceSpec ModelSpec::source(Index s) const {
  if (s == 0) return {source_name, likelihood, expectation, aggregation, unit_effect, link, task};
  if (s < 0 || s >= num_sources())
    throw ConfigError("source " + std::to_string(s) + " of a model of " + std::to_string(num_sources()) + " sources");
  return more_sources[static_cast<size_t>(s - 1)];
}

ModelSpec ModelSpec::for_source(Index s) const {
  const SourceSpec src = source(s);
  ModelSpec v = *this;
  v.more_sources.clear();
  v.source_name = src.name;
  v.likelihood = src.likelihood;
  v.expectation = src.expectation;
  v.aggregation = src.aggregation;
  v.unit_effect = src.unit_effect;
  v.link = src.link;
  v.task = src.task;
  return v;
}

bool ModelSpec::any_unit_effect() const {
  bool any = unit_effect;
  for (const SourceSpec& s : more_sources) any |= s.unit_effect;
  return any;
}

bool ModelSpec::any_sampled() const {
  bool any = expectation == Expectation::sample;
  for (const SourceSpec& s : more_sources) any |= s.expectation == Expectation::sample;
  return any;
}

Model Model::for_source(Index s) const {
  Model v = *this;
  v.spec = spec.for_source(s);
  v.more_sources.clear();
  v.likelihood_params = likelihood_params_of(s);
  v.unit_effect = unit_effect_of(s);
  return v;
}

namespace {

// The rules of one source's observation model.
void validate_source(const ModelSpec& spec) {
  const BagLikelihood& lik = likelihood_of(spec.likelihood);
  if (spec.linear_inputs < 0) throw ConfigError("the number of inputs of the linear mean cannot be negative");
  if (!(spec.linear_prior_sd > 0)) throw ConfigError("the prior sd of the linear mean must be positive");
  if (!(spec.prior_precision > 0)) throw ConfigError("the prior precision must be positive");
  if (!(spec.unit_effect_prior_rate >= 0) || !std::isfinite(spec.unit_effect_prior_rate))
    throw ConfigError("the rate of the unit effect's prior must be finite and not negative");
  const ModelSpec::KernelPrior& kp = spec.kernel_prior;
  if (kp.part >= 0 &&
      !(kp.sd > 0 && std::isfinite(kp.sd) && std::isfinite(kp.log_variance) && std::isfinite(kp.log_lengthscale)))
    throw ConfigError("the kernel prior needs a positive sd and finite centres");
  const std::vector<Link> links = lik.links();
  if (std::find(links.begin(), links.end(), spec.link) == links.end()) {
    std::string allowed;
    for (Link l : links) allowed += (allowed.empty() ? "" : ", ") + to_string(l);
    throw ConfigError("likelihood '" + to_string(spec.likelihood) + "' with link '" + to_string(spec.link) +
                      "' is not supported (" + to_string(spec.likelihood) + " allows: " + allowed + ")");
  }
  if (spec.expectation == Expectation::bound && !lik.has_bound())
    throw ConfigError("likelihood '" + to_string(spec.likelihood) + "' has no bound expectation (model.expectation: " +
                      (lik.has_delta_method() ? "delta or sample)" : "sample)"));
  if (spec.expectation == Expectation::delta && !lik.has_delta_method())
    throw ConfigError("likelihood '" + to_string(spec.likelihood) + "' has no delta-method expectation (use bound)");
  if (spec.expectation == Expectation::sample && (spec.map_estimate || spec.covariance != CovarianceMode::nystrom))
    throw ConfigError(
        "the sampled expectation draws f from the nystrom form of a variational posterior: it needs "
        "covariance 'nystrom' and no MAP estimate");
  if (spec.fixed_effects == FixedEffects::variational && spec.map_estimate)
    throw ConfigError("variational fixed effects are part of q: a MAP estimate has point fixed effects");
  if (spec.expectation == Expectation::sample && spec.samples < 1)
    throw ConfigError("the number of samples must be at least 1");
  if (spec.residual_pixels < 0) throw ConfigError("residual_pixels must be 0 (every pixel's own residual) or more");
  if (spec.map_estimate && !lik.allows_map(spec))
    throw ConfigError(
        "the MAP (nystrom) model is defined for count likelihoods with exp link and for normal (nystrom covariance)");
  if (spec.unit_effect && (!lik.defines_unit_effect() || spec.map_estimate))
    throw ConfigError(
        "a unit effect is defined for the count likelihoods (poisson, negative_binomial) and the binomial of a "
        "variational model; likelihood '" +
        to_string(spec.likelihood) + "'" + (spec.map_estimate ? " with a MAP estimate" : "") + " has none");
  if (spec.unit_effect && spec.link == Link::exp && spec.expectation == Expectation::bound)
    throw ConfigError(
        "a unit effect is integrated with the second-order moments of the log rate (or over draws of "
        "it): with the exp link it needs expectation 'delta' or 'sample'");
  if (spec.unit_effect && spec.unit_effect_shared &&
      (spec.expectation != Expectation::delta || spec.link != Link::exp || spec.covariance != CovarianceMode::nystrom))
    throw ConfigError(
        "a unit effect shared by a unit's periods is integrated over the joint delta-method moments of its periods' "
        "log rates: it needs the exp link, expectation 'delta' and covariance 'nystrom' (or an effect per unit and "
        "period)");
}

// The shared latent fields' own rules: every task is observed by a source whose link it shares,
// and the mean, covariance and estimate are those the mixing is defined for.
void validate_tasks(const ModelSpec& spec) {
  if (spec.latents < 1) throw ConfigError("the number of latent fields must be at least 1");
  for (size_t i = 0; i < spec.tasks.size(); ++i) {
    if (spec.tasks[i].empty()) throw ConfigError("every task needs a name");
    if (std::find(spec.tasks.begin(), spec.tasks.begin() + static_cast<std::ptrdiff_t>(i), spec.tasks[i]) !=
        spec.tasks.begin() + static_cast<std::ptrdiff_t>(i))
      throw ConfigError("two tasks are named '" + spec.tasks[i] + "'");
  }
  std::vector<int> seen(static_cast<size_t>(spec.num_tasks()), 0);
  std::vector<Link> links(static_cast<size_t>(spec.num_tasks()));
  for (Index s = 0; s < spec.num_sources(); ++s) {
    const SourceSpec src = spec.source(s);
    if (src.task < 0 || src.task >= spec.num_tasks())
      throw ConfigError("source '" + src.name + "' observes task " + std::to_string(src.task) + " of " +
                        std::to_string(spec.num_tasks()));
    auto& n = seen[static_cast<size_t>(src.task)];
    auto& l = links[static_cast<size_t>(src.task)];
    if (n++ > 0 && l != src.link)
      throw ConfigError((spec.tasks.empty() ? std::string("the sources of one task")
                                            : "the sources of task '" + spec.task_name(src.task) + "'") +
                        " use the links '" + to_string(l) + "' and '" + to_string(src.link) +
                        "': a task has one link (give sources of another quantity a task of their own)");
    l = src.link;
  }
  if (!spec.mixed()) return;
  for (Index d = 0; d < spec.num_tasks(); ++d)
    if (seen[static_cast<size_t>(d)] == 0) throw ConfigError("no source observes task '" + spec.task_name(d) + "'");
  if (spec.map_estimate || spec.covariance != CovarianceMode::nystrom)
    throw ConfigError("shared latent fields need a variational model with covariance 'nystrom'");
}

}  // namespace

Model Model::for_task(Index d) const {
  for (Index s = 0; s < spec.num_sources(); ++s)
    if (spec.source(s).task == d) return for_source(s);
  throw ConfigError("no source observes task " + std::to_string(d));
}

Matrix Model::task_correlations() const {
  const Index T = spec.num_tasks();
  Matrix C = Matrix::Zero(T, T);
  for (Index q = 0; q < num_latents(); ++q) {
    const double k = kernel_of(q).diag_value();
    for (Index d = 0; d < T; ++d)
      for (Index e = 0; e < T; ++e) C(d, e) += weight(d, q) * weight(e, q) * k;
  }
  const Vector sd = C.diagonal().cwiseSqrt();
  return sd.cwiseInverse().asDiagonal() * C * sd.cwiseInverse().asDiagonal();
}

void ModelSpec::validate() const {
  validate_tasks(*this);
  if (!more_sources.empty()) {
    std::vector<std::string> names{source_name};
    for (const SourceSpec& s : more_sources) names.push_back(s.name);
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i].empty()) throw ConfigError("every source of a joint fit needs a name");
      if (std::find(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(i), names[i]) !=
          names.begin() + static_cast<std::ptrdiff_t>(i))
        throw ConfigError("two sources are named '" + names[i] + "'");
    }
    for (Index s = 0; s < num_sources(); ++s) {
      try {
        validate_source(for_source(s));
      } catch (const ConfigError& e) {
        throw ConfigError("source '" + source(s).name + "': " + e.what());
      }
    }
    return;
  }
  validate_source(*this);
}

ModelGradient::ModelGradient(const Model& m)
    : q_mean(Vector::Zero(m.num_q())),
      q_chol(Matrix::Zero(m.num_q(), m.num_q())),
      linear_mean(Vector::Zero(m.spec.num_linear_coefficients())),
      kernel(Vector::Zero(m.num_kernel_params())),
      task_means(Vector::Zero(m.spec.num_tasks() - 1)),
      mixing(m.spec.mixed() ? Matrix(Matrix::Zero(m.spec.num_tasks(), m.num_latents())) : Matrix()),
      likelihood(Vector::Zero(param_slice(m, ParamBlockId::likelihood).size)),
      unit_effect(Vector::Zero(param_slice(m, ParamBlockId::unit_effect).size)),
      inducing(Matrix::Zero(m.num_inputs(), m.num_inducing())) {}

ModelGradient& ModelGradient::operator+=(const ModelGradient& o) {
  q_mean += o.q_mean;
  q_chol += o.q_chol;
  mean += o.mean;
  task_means += o.task_means;
  mixing += o.mixing;
  linear_mean += o.linear_mean;
  kernel += o.kernel;
  likelihood += o.likelihood;
  unit_effect += o.unit_effect;
  inducing += o.inducing;
  return *this;
}

Index Model::latent_begin(Index q) const {
  Index b = 0;
  for (Index r = 0; r < q; ++r) b += latent_size(r);
  return b;
}

Index Model::latent_size(Index q) const {
  return inducing_sizes.empty() ? (q == 0 ? inducing.cols() : 0) : inducing_sizes[static_cast<size_t>(q)];
}

Index Model::num_kernel_params() const {
  Index n = 0;
  for (Index q = 0; q < num_latents(); ++q) n += kernel_of(q).num_params();
  return n;
}

namespace {

void check_latents(const Model& model) {
  const Index Q = model.num_latents();
  if (Q != model.spec.latents)
    throw ConfigError("the model holds " + std::to_string(Q) + " latent kernels for " +
                      std::to_string(model.spec.latents) + " latent fields");
  if (Q > 1 && static_cast<Index>(model.inducing_sizes.size()) != Q)
    throw ConfigError("the model's inducing inputs are split over " + std::to_string(model.inducing_sizes.size()) +
                      " latents for " + std::to_string(Q));
  if (model.latent_begin(Q) != model.inducing.cols())
    throw ConfigError("the latents' inducing sizes add up to " + std::to_string(model.latent_begin(Q)) + ", not " +
                      std::to_string(model.inducing.cols()));
  if (model.spec.mixed() && (model.mixing.rows() != model.spec.num_tasks() || model.mixing.cols() != Q))
    throw ConfigError("the mixing weights are " + std::to_string(model.mixing.rows()) + " x " +
                      std::to_string(model.mixing.cols()) + " for " + std::to_string(model.spec.num_tasks()) +
                      " tasks and " + std::to_string(Q) + " latents");
  if (model.task_means.size() != model.spec.num_tasks() - 1)
    throw ConfigError("the model holds " + std::to_string(model.task_means.size() + 1) + " task means for " +
                      std::to_string(model.spec.num_tasks()) + " tasks");
}

}  // namespace

InducingFactor factor_inducing(const Model& model, int threads) {
  const Index M = model.num_inducing(), Mq = model.num_q(), Q = model.num_latents();
  if (model.q_mean.size() != Mq || (!model.spec.map_estimate && model.q_chol.rows() != Mq))
    throw ConfigError("q holds " + std::to_string(model.q_mean.size()) + " entries for " + std::to_string(M) +
                      " inducing points and " + std::to_string(Mq - M) + " fixed effects");
  check_latents(model);
  InducingFactor f;
  f.latent_kdiag.resize(Q);
  for (Index q = 0; q < Q; ++q) f.latent_kdiag[q] = model.kernel_of(q).diag_value();
  // K_WW is block diagonal over the latents. Every block takes the same relative jitter, so that
  // eps_q = jitter * k_q(x, x) holds for the gradient: a block that needs more restarts the others.
  f.L = Matrix::Zero(M, M);
  double rel = model.jitter;
  for (Index q = 0; q < Q; ++q) {
    const Index b = model.latent_begin(q), n = model.latent_size(q);
    Matrix Kww;
    const Matrix W = model.inducing.middleCols(b, n);
    model.kernel_of(q).cross(W, W, Kww);
    const double kd = f.latent_kdiag[q];
    double eps = rel * kd;
    f.L.block(b, b, n, n) = jittered_cholesky(Kww, eps, 0.1 * kd);
    if (eps / kd > rel * (1 + 1e-12) && q > 0) {
      rel = eps / kd;
      q = -1;  // again from the first latent with the larger jitter
      continue;
    }
    rel = std::max(rel, eps / kd);
  }
  f.jitter_used = rel;
  f.Linv = Matrix::Zero(M, M);
  for (Index q = 0; q < Q; ++q) {
    const Index b = model.latent_begin(q), n = model.latent_size(q);
    f.Linv.block(b, b, n, n) = lower_inverse(f.L.block(b, b, n, n), threads);
  }
  return f;
}

Posterior compute_posterior(const Model& model, const InducingFactor& f, Index task, int threads) {
  const Index M = model.num_inducing(), Mq = model.num_q(), Q = model.num_latents();
  Posterior p;
  p.task = task;
  p.L = f.L;
  p.Linv = f.Linv;
  p.latent_kdiag = f.latent_kdiag;
  p.jitter_used = f.jitter_used;
  for (Index q = 0; q < Q; ++q) p.kdiag += model.weight(task, q) * model.weight(task, q) * f.latent_kdiag[q];
  p.Lambda = Matrix::Identity(Mq, Mq);
  p.Lambda.topLeftCorner(M, M) = p.Linv;
  // Variational fixed effects of several tasks: only the task's own block enters its latent.
  const Index fe = model.spec.fixed_effects_per_task();
  for (Index e = 0; e < model.spec.num_tasks() && fe > 0; ++e)
    if (e != task) p.Lambda.block(M + e * fe, M + e * fe, fe, fe).setZero();
  if (model.spec.mixed())
    for (Index q = 0; q < Q; ++q) {
      const Index b = model.latent_begin(q), n = model.latent_size(q);
      p.Lambda.block(b, b, n, n) *= model.weight(task, q);
    }
  p.alpha = p.Lambda.transpose() * model.q_mean;
  // Lambda is lower triangular (the latents' L_W^{-1} blocks, the fixed effects' identity), and
  // so is L_v: each product runs by column blocks, over rows j.. of the factors where columns j..
  // of Lambda are zero above row j.
  const Matrix& Lm = p.Lambda;
  p.B.resize(Mq, Mq);
  for_column_blocks(Mq, threads, [&](Index j, Index w) {
    p.B.middleCols(j, w).noalias() =
        model.q_chol.bottomRows(Mq - j).transpose() * Lm.block(j, j, Mq - j, w).triangularView<Eigen::Lower>();
  });
  // P = blockdiag(Lambda_W^T Lambda_W, 0) and Q = P - B^T B, their lower triangles (rows j.. of
  // columns j..), then mirrored.
  p.P = Matrix::Zero(Mq, Mq);
  p.Q.resize(Mq, Mq);
  for_column_blocks(Mq, threads, [&](Index j, Index w) {
    if (j < M) {
      const Index c = std::min(w, M - j);
      p.P.block(j, j, M - j, c).noalias() =
          Lm.block(j, j, M - j, M - j).transpose().triangularView<Eigen::Upper>() * Lm.block(j, j, M - j, c);
    }
    p.Q.block(j, j, Mq - j, w) = p.P.block(j, j, Mq - j, w);
    p.Q.block(j, j, Mq - j, w).noalias() -= p.B.rightCols(Mq - j).transpose() * p.B.middleCols(j, w);
  });
  p.P = p.P.selfadjointView<Eigen::Lower>();
  p.Q = p.Q.selfadjointView<Eigen::Lower>();
  return p;
}

void features_into(const Model& model, const Eigen::Ref<const Matrix>& X, Eigen::Ref<Matrix> F, FeatureCache& cache) {
  const Index M = model.num_inducing(), P = model.spec.num_fixed_effects(), Q = model.num_latents();
  if (static_cast<Index>(cache.latents.size()) < Q) cache.latents.resize(static_cast<size_t>(Q));
  for (Index q = 0; q < Q; ++q) {
    const Index b = model.latent_begin(q), n = model.latent_size(q);
    model.kernel_of(q).cross_into(model.inducing.middleCols(b, n), X, F.middleRows(b, n),
                                  cache.latents[static_cast<size_t>(q)]);
  }
  if (P == 0) return;
  // Every task's block holds the same s z(x); a task's posterior reads only its own (its Lambda is
  // zero on the others').
  const double s = model.spec.linear_prior_sd;
  const Index p = model.spec.fixed_effects_per_task();
  for (Index b = M; b < M + P; b += p) {
    F.row(b).setConstant(s);
    F.middleRows(b + 1, p - 1) = s * X.topRows(p - 1);
  }
}

void features_backward(const Model& model, const Eigen::Ref<const Matrix>& dF, FeatureCache& cache, Vector& grad_kernel,
                       Matrix* grad_inducing) {
  const Index Q = model.num_latents();
  if (Q == 1) {
    model.kernel.cross_backward(dF, cache.latents[0], grad_kernel, grad_inducing);
    return;
  }
  Index k = 0;
  for (Index q = 0; q < Q; ++q) {
    const Kernel& kq = model.kernel_of(q);
    const Index b = model.latent_begin(q), n = model.latent_size(q), np = kq.num_params();
    Vector g = Vector::Zero(np);
    Matrix gW;
    if (grad_inducing) gW.setZero(model.num_inputs(), n);
    kq.cross_backward(dF.middleRows(b, n), cache.latents[static_cast<size_t>(q)], g, grad_inducing ? &gW : nullptr);
    grad_kernel.segment(k, np) += g;
    if (grad_inducing) grad_inducing->middleCols(b, n) += gW;
    k += np;
  }
}

void latent_marginals(const Model& model, const Posterior& post, const Matrix& X, Vector& mean, Vector& var) {
  mean.resize(X.cols());
  var.resize(X.cols());
  LatentScratch scratch;
  latent_marginals_into(model, post, X, mean, var, scratch);
}

void latent_means_into(const Model& model, const Posterior& post, const Eigen::Ref<const Matrix>& X,
                       Eigen::Ref<Vector> mean, LatentScratch& scratch) {
  const auto K = scratch.K.shape(model.num_q(), X.cols());
  features_into(model, X, K, scratch.kernel);
  mean.noalias() = K.transpose() * post.alpha;
  mean.array() += model.mean_of(post.task);
  const Index linear = model.spec.num_linear_point();
  if (linear > 0) mean.noalias() += X.topRows(linear).transpose() * model.linear_of(post.task);
}

void latent_marginals_into(const Model& model, const Posterior& post, const Eigen::Ref<const Matrix>& X,
                           Eigen::Ref<Vector> mean, Eigen::Ref<Vector> var, LatentScratch& scratch) {
  latent_means_into(model, post, X, mean, scratch);
  const auto K = scratch.K.view();
  if (model.spec.map_estimate) {
    var.setZero();  // a point estimate carries no uncertainty
    return;
  }
  auto R = scratch.R.shape(model.num_q(), X.cols());
  gemm(1.0, post.Q, false, K, false, 0.0, R);
  var = (post.kdiag - K.cwiseProduct(R).colwise().sum().array()).cwiseMax(0.0).matrix().transpose();
}

FixedEffectEstimates fixed_effect_estimates(const Model& model) {
  const Index d = model.spec.linear_inputs, P = model.spec.fixed_effects_per_task();
  FixedEffectEstimates e{Vector::Zero(1 + d), Vector::Zero(1 + d)};
  e.mean[0] = model.mean_of(model.spec.task);
  if (P == 0) {
    e.mean.tail(d) = model.linear_of(model.spec.task);
    return e;
  }
  // c = s w over the task's P entries of q: mean s m_w, covariance s^2 (rows of L_v) (rows of L_v)^T.
  const double s = model.spec.linear_prior_sd;
  const Index off = model.num_inducing() + model.spec.task * P;
  e.mean += s * model.q_mean.segment(off, P);
  e.sd = s * model.q_chol.middleRows(off, P).rowwise().norm();
  return e;
}

namespace {

// KL(q(v) || N(0, I)), or the prior penalty of a MAP estimate.
double q_divergence(const Model& model, ModelGradient* grad) {
  if (model.spec.map_estimate) {
    if (grad) grad->q_mean += model.spec.prior_precision * model.q_mean;
    return 0.5 * model.spec.prior_precision * model.q_mean.squaredNorm();
  }
  const Matrix& L = model.q_chol;
  const Index m = model.num_q();
  double logdet = 0;
  for (Index j = 0; j < m; ++j) logdet += std::log(L(j, j));
  const double kl = 0.5 * (L.squaredNorm() + model.q_mean.squaredNorm() - static_cast<double>(m) - 2.0 * logdet);
  if (grad) {
    grad->q_mean += model.q_mean;
    grad->q_chol += L.triangularView<Eigen::Lower>().toDenseMatrix();
    grad->q_chol.diagonal().array() -= L.diagonal().array().inverse();
  }
  return kl;
}

// -log p(log sigma_u) of each unit effect under sigma_u ~ Exponential(rate): the density of
// log sigma_u is rate sigma_u e^{-rate sigma_u} (the Jacobian sigma_u keeps it proper, so its mode
// is sigma_u = 1 / rate, not 0).
double unit_effect_prior_penalty(const Model& model, ModelGradient* grad) {
  const double rate = model.spec.unit_effect_prior_rate;
  if (!(rate > 0)) return 0;
  double penalty = 0;
  for (Index s = 0; s < model.spec.num_sources(); ++s) {
    if (!model.spec.source(s).unit_effect) continue;
    const double log_sd = model.unit_effect_of(s).log_sd;
    const double sd = std::exp(log_sd);
    penalty += rate * sd - log_sd - std::log(rate);
    if (grad) grad->unit_effect[source_unit_effect_offset(model, s)] += rate * sd - 1;
  }
  return penalty;
}

// -log p of the kernel prior's part in every latent: (theta - centre)^2 / (2 sd^2) summed over
// its log variance (unless fixed) and log lengthscales.
double kernel_prior_penalty(const Model& model, ModelGradient* grad) {
  const ModelSpec::KernelPrior& prior = model.spec.kernel_prior;
  if (prior.part < 0) return 0;
  const double precision = 1.0 / (prior.sd * prior.sd);
  double penalty = 0;
  Index latent_offset = 0;
  for (Index q = 0; q < model.num_latents(); ++q) {
    const Kernel& k = model.kernel_of(q);
    if (prior.part >= static_cast<Index>(k.parts().size()))
      throw ConfigError("the kernel prior's part " + std::to_string(prior.part) + " is not a part of the kernel");
    Index at = latent_offset;
    for (Index c = 0; c < prior.part; ++c) at += k.parts()[static_cast<size_t>(c)].num_params();
    const KernelPart& part = k.parts()[static_cast<size_t>(prior.part)];
    auto add = [&](double theta, double centre) {
      const double e = theta - centre;
      penalty += 0.5 * precision * e * e;
      if (grad) grad->kernel[at] += precision * e;
      ++at;
    };
    if (!part.fixed_variance) add(part.log_variance, prior.log_variance);
    for (Index j = 0; j < part.log_lengthscale.size(); ++j) add(part.log_lengthscale[j], prior.log_lengthscale);
    latent_offset += k.num_params();
  }
  return penalty;
}

}  // namespace

double kl_divergence(const Model& model, ModelGradient* grad) {
  double linear = 0;
  if (model.spec.num_linear_point() > 0) {
    const double precision = 1.0 / (model.spec.linear_prior_sd * model.spec.linear_prior_sd);
    linear = 0.5 * precision * model.linear_mean.squaredNorm();
    if (grad) grad->linear_mean += precision * model.linear_mean;
  }
  return linear + unit_effect_prior_penalty(model, grad) + kernel_prior_penalty(model, grad) +
         q_divergence(model, grad);
}

}  // namespace vbagg
