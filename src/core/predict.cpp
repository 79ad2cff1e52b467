#include "predict.hpp"

#include <cmath>
#include <utility>

#include "denormals.hpp"
#include "link.hpp"

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
