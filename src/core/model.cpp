#include "model.hpp"

#include <cmath>

#include "linalg.hpp"

namespace vbagg {

LikelihoodKind parse_likelihood(const std::string& s) {
  if (s == "poisson") return LikelihoodKind::poisson;
  if (s == "normal") return LikelihoodKind::normal;
  if (s == "exponential") return LikelihoodKind::exponential;
  throw ConfigError("unknown likelihood '" + s + "' (allowed: poisson, normal, exponential)");
}
Link parse_link(const std::string& s) {
  if (s == "exp") return Link::exp;
  if (s == "square") return Link::square;
  if (s == "identity") return Link::identity;
  throw ConfigError("unknown link '" + s + "' (allowed: exp, square, identity)");
}
CovarianceMode parse_covariance_mode(const std::string& s) {
  if (s == "nystrom") return CovarianceMode::nystrom;
  if (s == "exact") return CovarianceMode::exact;
  throw ConfigError("unknown covariance mode '" + s + "' (allowed: nystrom, exact)");
}
Aggregation parse_aggregation(const std::string& s) {
  if (s == "sum") return Aggregation::sum;
  if (s == "mean") return Aggregation::mean;
  throw ConfigError("unknown aggregation '" + s + "' (allowed: sum, mean)");
}
std::string to_string(LikelihoodKind v) {
  return v == LikelihoodKind::poisson ? "poisson" : v == LikelihoodKind::normal ? "normal" : "exponential";
}
std::string to_string(Link v) { return v == Link::exp ? "exp" : v == Link::square ? "square" : "identity"; }
std::string to_string(CovarianceMode v) { return v == CovarianceMode::nystrom ? "nystrom" : "exact"; }
std::string to_string(Aggregation v) { return v == Aggregation::sum ? "sum" : "mean"; }

void ModelSpec::validate() const {
  const bool map_ok = (likelihood == LikelihoodKind::poisson && link == Link::exp) ||
                      (likelihood == LikelihoodKind::normal && covariance == CovarianceMode::nystrom);
  if (map_estimate && !map_ok)
    throw ConfigError("the MAP (nystrom) model is defined for poisson with exp link and for normal (nystrom covariance)");
  if (!(prior_precision > 0)) throw ConfigError("the prior precision must be positive");
  const std::string combo = "likelihood '" + to_string(likelihood) + "' with link '" + to_string(link) + "'";
  switch (likelihood) {
    case LikelihoodKind::poisson:
      if (link == Link::identity) throw ConfigError(combo + " is not supported (poisson allows: exp, square)");
      break;
    case LikelihoodKind::normal:
      if (link != Link::identity) throw ConfigError(combo + " is not supported (normal allows: identity)");
      break;
    case LikelihoodKind::exponential:
      if (link != Link::exp) throw ConfigError(combo + " is not supported (exponential allows: exp)");
      break;
  }
}

Index Model::num_params() const {
  const Index m = num_inducing();
  Index n = m + (spec.map_estimate ? 0 : m * (m + 1) / 2) + 1 + kernel.num_params();
  if (spec.likelihood == LikelihoodKind::normal) n += 1;
  if (spec.learn_inducing) n += inducing.size();
  return n;
}

Vector Model::pack() const {
  const Index m = num_inducing();
  Vector theta(num_params());
  Index k = 0;
  theta.segment(k, m) = q_mean;
  k += m;
  for (Index j = 0; j < m && !spec.map_estimate; ++j) {
    theta[k++] = std::log(q_chol(j, j));
    for (Index i = j + 1; i < m; ++i) theta[k++] = q_chol(i, j);
  }
  theta[k++] = mean;
  theta.segment(k, kernel.num_params()) = kernel.params();
  k += kernel.num_params();
  if (spec.likelihood == LikelihoodKind::normal) theta[k++] = log_noise;
  if (spec.learn_inducing) theta.segment(k, inducing.size()) = inducing.reshaped();
  return theta;
}

void Model::unpack(const Vector& theta) {
  const Index m = num_inducing();
  Index k = 0;
  q_mean = theta.segment(k, m);
  k += m;
  q_chol.setZero(m, m);
  for (Index j = 0; j < m && !spec.map_estimate; ++j) {
    q_chol(j, j) = std::exp(theta[k++]);
    for (Index i = j + 1; i < m; ++i) q_chol(i, j) = theta[k++];
  }
  mean = theta[k++];
  kernel.set_params(theta.segment(k, kernel.num_params()));
  k += kernel.num_params();
  if (spec.likelihood == LikelihoodKind::normal) log_noise = theta[k++];
  if (spec.learn_inducing) inducing.reshaped() = theta.segment(k, inducing.size());
}

std::vector<std::string> Model::param_names() const {
  const Index m = num_inducing();
  std::vector<std::string> names;
  for (Index i = 0; i < m; ++i) names.push_back("q_mean[" + std::to_string(i) + "]");
  for (Index j = 0; j < m && !spec.map_estimate; ++j) {
    names.push_back("log q_chol[" + std::to_string(j) + "," + std::to_string(j) + "]");
    for (Index i = j + 1; i < m; ++i) names.push_back("q_chol[" + std::to_string(i) + "," + std::to_string(j) + "]");
  }
  names.push_back("mean");
  for (const auto& n : kernel.param_names()) names.push_back("kernel." + n);
  if (spec.likelihood == LikelihoodKind::normal) names.push_back("log_noise");
  if (spec.learn_inducing)
    for (Index j = 0; j < m; ++j)
      for (Index d = 0; d < num_inputs(); ++d)
        names.push_back("inducing[" + std::to_string(d) + "," + std::to_string(j) + "]");
  return names;
}

ModelGradient::ModelGradient(const Model& m)
    : q_mean(Vector::Zero(m.num_inducing())),
      q_chol(Matrix::Zero(m.num_inducing(), m.num_inducing())),
      kernel(Vector::Zero(m.kernel.num_params())),
      inducing(Matrix::Zero(m.num_inputs(), m.num_inducing())) {}

ModelGradient& ModelGradient::operator+=(const ModelGradient& o) {
  q_mean += o.q_mean;
  q_chol += o.q_chol;
  mean += o.mean;
  kernel += o.kernel;
  log_noise += o.log_noise;
  inducing += o.inducing;
  return *this;
}

Vector ModelGradient::pack(const Model& m) const {
  const Index M = m.num_inducing();
  Vector g(m.num_params());
  Index k = 0;
  g.segment(k, M) = q_mean;
  k += M;
  for (Index j = 0; j < M && !m.spec.map_estimate; ++j) {
    g[k++] = q_chol(j, j) * m.q_chol(j, j);  // d/d log L_jj
    for (Index i = j + 1; i < M; ++i) g[k++] = q_chol(i, j);
  }
  g[k++] = mean;
  g.segment(k, kernel.size()) = kernel;
  k += kernel.size();
  if (m.spec.likelihood == LikelihoodKind::normal) g[k++] = log_noise;
  if (m.spec.learn_inducing) g.segment(k, inducing.size()) = inducing.reshaped();
  return g;
}

Posterior compute_posterior(const Model& model) {
  Posterior p;
  p.kdiag = model.kernel.diag_value();
  Matrix Kww;
  model.kernel.cross(model.inducing, model.inducing, Kww);
  double eps = model.jitter * p.kdiag;
  p.L = jittered_cholesky(Kww, eps, 0.1 * p.kdiag);
  p.jitter_used = eps / p.kdiag;
  p.Linv = lower_inverse(p.L);
  p.alpha = p.Linv.transpose() * model.q_mean;
  p.B = model.q_chol.transpose().triangularView<Eigen::Upper>() * p.Linv;
  // Q = Linv^T Linv - B^T B as two symmetric rank updates (half the flops of two products).
  p.Q = Matrix::Zero(p.L.rows(), p.L.cols());
  p.Q.selfadjointView<Eigen::Lower>().rankUpdate(p.Linv.transpose(), 1.0);
  p.Q.selfadjointView<Eigen::Lower>().rankUpdate(p.B.transpose(), -1.0);
  p.Q = p.Q.selfadjointView<Eigen::Lower>();
  return p;
}

void latent_marginals(const Model& model, const Posterior& post, const Matrix& X, Vector& mean, Vector& var) {
  mean.resize(X.cols());
  var.resize(X.cols());
  LatentScratch scratch;
  latent_marginals_into(model, post, X, mean, var, scratch);
}

void latent_marginals_into(const Model& model, const Posterior& post, const Eigen::Ref<const Matrix>& X,
                           Eigen::Ref<Vector> mean, Eigen::Ref<Vector> var, LatentScratch& scratch) {
  const auto K = scratch.K.shape(model.num_inducing(), X.cols());
  model.kernel.cross_into(model.inducing, X, K, scratch.kernel);
  mean.noalias() = K.transpose() * post.alpha;
  mean.array() += model.mean;
  if (model.spec.map_estimate) {
    var.setZero();  // a point estimate carries no uncertainty
    return;
  }
  auto R = scratch.R.shape(model.num_inducing(), X.cols());
  R.noalias() = post.Q * K;
  var = (post.kdiag - K.cwiseProduct(R).colwise().sum().array()).cwiseMax(0.0).matrix().transpose();
}

double kl_divergence(const Model& model, ModelGradient* grad) {
  if (model.spec.map_estimate) {
    if (grad) grad->q_mean += model.spec.prior_precision * model.q_mean;
    return 0.5 * model.spec.prior_precision * model.q_mean.squaredNorm();
  }
  const Matrix& L = model.q_chol;
  const Index m = model.num_inducing();
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

}  // namespace vbagg
