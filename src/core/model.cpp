#include "model.hpp"

#include <algorithm>
#include <cmath>

#include "likelihood.hpp"
#include "linalg.hpp"
#include "link.hpp"
#include "param_layout.hpp"

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
  if (s == 0) return {source_name, likelihood, expectation, aggregation, unit_effect};
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

void ModelSpec::validate() const {
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
        for_source(s).validate();
      } catch (const ConfigError& e) {
        throw ConfigError("source '" + source(s).name + "': " + e.what());
      }
    }
    return;
  }
  const BagLikelihood& lik = likelihood_of(likelihood);
  if (linear_inputs < 0) throw ConfigError("the number of inputs of the linear mean cannot be negative");
  if (!(linear_prior_sd > 0)) throw ConfigError("the prior sd of the linear mean must be positive");
  if (!(prior_precision > 0)) throw ConfigError("the prior precision must be positive");
  const std::vector<Link> links = lik.links();
  if (std::find(links.begin(), links.end(), link) == links.end()) {
    std::string allowed;
    for (Link l : links) allowed += (allowed.empty() ? "" : ", ") + to_string(l);
    throw ConfigError("likelihood '" + to_string(likelihood) + "' with link '" + to_string(link) +
                      "' is not supported (" + to_string(likelihood) + " allows: " + allowed + ")");
  }
  if (expectation == Expectation::bound && !lik.has_bound())
    throw ConfigError("likelihood '" + to_string(likelihood) +
                      "' has only the sampled expectation (model.expectation: sample)");
  if (expectation == Expectation::delta && !lik.has_delta_method())
    throw ConfigError("likelihood '" + to_string(likelihood) + "' has no delta-method expectation (use bound)");
  if (expectation == Expectation::sample && (map_estimate || covariance != CovarianceMode::nystrom))
    throw ConfigError(
        "the sampled expectation draws f from the nystrom form of a variational posterior: it needs "
        "covariance 'nystrom' and no MAP estimate");
  if (fixed_effects == FixedEffects::variational && map_estimate)
    throw ConfigError("variational fixed effects are part of q: a MAP estimate has point fixed effects");
  if (expectation == Expectation::sample && samples < 1) throw ConfigError("the number of samples must be at least 1");
  if (map_estimate && !lik.allows_map(*this))
    throw ConfigError(
        "the MAP (nystrom) model is defined for count likelihoods with exp link and for normal (nystrom covariance)");
  if (unit_effect && (!lik.is_count() || map_estimate))
    throw ConfigError(
        "a unit effect is defined for the count likelihoods (poisson, negative_binomial) of a "
        "variational model; likelihood '" +
        to_string(likelihood) + "'" + (map_estimate ? " with a MAP estimate" : "") + " has none");
  if (unit_effect && link == Link::exp && expectation == Expectation::bound)
    throw ConfigError(
        "a unit effect is integrated with the second-order moments of the log rate (or over draws of "
        "it): with the exp link it needs expectation 'delta' or 'sample'");
}

ModelGradient::ModelGradient(const Model& m)
    : q_mean(Vector::Zero(m.num_q())),
      q_chol(Matrix::Zero(m.num_q(), m.num_q())),
      linear_mean(Vector::Zero(m.spec.num_linear_point())),
      kernel(Vector::Zero(m.kernel.num_params())),
      likelihood(Vector::Zero(param_slice(m, ParamBlockId::likelihood).size)),
      unit_effect(Vector::Zero(param_slice(m, ParamBlockId::unit_effect).size)),
      inducing(Matrix::Zero(m.num_inputs(), m.num_inducing())) {}

ModelGradient& ModelGradient::operator+=(const ModelGradient& o) {
  q_mean += o.q_mean;
  q_chol += o.q_chol;
  mean += o.mean;
  linear_mean += o.linear_mean;
  kernel += o.kernel;
  likelihood += o.likelihood;
  unit_effect += o.unit_effect;
  inducing += o.inducing;
  return *this;
}

Posterior compute_posterior(const Model& model) {
  const Index M = model.num_inducing(), Mq = model.num_q();
  if (model.q_mean.size() != Mq || (!model.spec.map_estimate && model.q_chol.rows() != Mq))
    throw ConfigError("q holds " + std::to_string(model.q_mean.size()) + " entries for " + std::to_string(M) +
                      " inducing points and " + std::to_string(Mq - M) + " fixed effects");
  Posterior p;
  p.kdiag = model.kernel.diag_value();
  Matrix Kww;
  model.kernel.cross(model.inducing, model.inducing, Kww);
  double eps = model.jitter * p.kdiag;
  p.L = jittered_cholesky(Kww, eps, 0.1 * p.kdiag);
  p.jitter_used = eps / p.kdiag;
  p.Linv = lower_inverse(p.L);
  p.Lambda = Matrix::Identity(Mq, Mq);
  p.Lambda.topLeftCorner(M, M) = p.Linv;
  p.alpha = p.Lambda.transpose() * model.q_mean;
  p.B = model.q_chol.transpose().triangularView<Eigen::Upper>() * p.Lambda;
  // Q = blockdiag(Linv^T Linv, 0) - B^T B as two symmetric rank updates (half the flops of two
  // products).
  p.P = Matrix::Zero(Mq, Mq);
  p.P.topLeftCorner(M, M).selfadjointView<Eigen::Lower>().rankUpdate(p.Linv.transpose(), 1.0);
  p.Q = p.P;
  p.Q.selfadjointView<Eigen::Lower>().rankUpdate(p.B.transpose(), -1.0);
  p.P = p.P.selfadjointView<Eigen::Lower>();
  p.Q = p.Q.selfadjointView<Eigen::Lower>();
  return p;
}

void features_into(const Model& model, const Eigen::Ref<const Matrix>& X, Eigen::Ref<Matrix> F, KernelCache& cache) {
  const Index M = model.num_inducing(), P = model.spec.num_fixed_effects();
  model.kernel.cross_into(model.inducing, X, F.topRows(M), cache);
  if (P == 0) return;
  const double s = model.spec.linear_prior_sd;
  F.row(M).setConstant(s);
  F.middleRows(M + 1, P - 1) = s * X.topRows(P - 1);
}

void latent_marginals(const Model& model, const Posterior& post, const Matrix& X, Vector& mean, Vector& var) {
  mean.resize(X.cols());
  var.resize(X.cols());
  LatentScratch scratch;
  latent_marginals_into(model, post, X, mean, var, scratch);
}

void latent_marginals_into(const Model& model, const Posterior& post, const Eigen::Ref<const Matrix>& X,
                           Eigen::Ref<Vector> mean, Eigen::Ref<Vector> var, LatentScratch& scratch) {
  const auto K = scratch.K.shape(model.num_q(), X.cols());
  features_into(model, X, K, scratch.kernel);
  mean.noalias() = K.transpose() * post.alpha;
  mean.array() += model.mean;
  const Index linear = model.spec.num_linear_point();
  if (linear > 0) mean.noalias() += X.topRows(linear).transpose() * model.linear_mean;
  if (model.spec.map_estimate) {
    var.setZero();  // a point estimate carries no uncertainty
    return;
  }
  auto R = scratch.R.shape(model.num_q(), X.cols());
  R.noalias() = post.Q * K;
  var = (post.kdiag - K.cwiseProduct(R).colwise().sum().array()).cwiseMax(0.0).matrix().transpose();
}

FixedEffectEstimates fixed_effect_estimates(const Model& model) {
  const Index d = model.spec.linear_inputs, P = model.spec.num_fixed_effects();
  FixedEffectEstimates e{Vector::Zero(1 + d), Vector::Zero(1 + d)};
  e.mean[0] = model.mean;
  if (P == 0) {
    e.mean.tail(d) = model.linear_mean;
    return e;
  }
  // c = s w over q's last P entries: mean s m_w, covariance s^2 (rows of L_v) (rows of L_v)^T.
  const double s = model.spec.linear_prior_sd;
  e.mean += s * model.q_mean.tail(P);
  e.sd = s * model.q_chol.bottomRows(P).rowwise().norm();
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

}  // namespace

double kl_divergence(const Model& model, ModelGradient* grad) {
  double linear = 0;
  if (model.spec.num_linear_point() > 0) {
    const double precision = 1.0 / (model.spec.linear_prior_sd * model.spec.linear_prior_sd);
    linear = 0.5 * precision * model.linear_mean.squaredNorm();
    if (grad) grad->linear_mean += precision * model.linear_mean;
  }
  return linear + q_divergence(model, grad);
}

}  // namespace vbagg
