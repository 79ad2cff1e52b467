#include "span.hpp"

#include <Eigen/Eigenvalues>
#include <algorithm>

#include "counter_rng.hpp"
#include "denormals.hpp"
#include "link.hpp"
#include "metrics.hpp"
#include "predict.hpp"

namespace vbagg {

void latent_joint(const Model& model, const Posterior& post, const Eigen::Ref<const Matrix>& X, Vector& mean,
                  Matrix& cov, const SpreadShifts* shifts) {
  const Index g = X.cols();
  LatentScratch scratch;
  Vector var(g);
  mean.resize(g);
  latent_marginals_into(model, post, X, mean, var, scratch);
  cov = Matrix::Zero(g, g);
  if (model.spec.map_estimate) return;  // a point estimate carries no uncertainty
  const auto F = scratch.K.view();
  Matrix K;
  for (Index q = 0; q < model.num_latents(); ++q) {
    model.kernel_of(q).cross(X, X, K);
    cov += model.weight(post.task, q) * model.weight(post.task, q) * K;
  }
  // Q = P - B^T B: the same matrix whose quadratic form gives the marginal variances.
  cov.noalias() -= F.transpose() * (post.Q * F);
  if (shifts && shifts->directions() > 0) {
    Matrix A;
    shifts->into(X, mean, A, scratch);
    cov.noalias() += A.transpose() * A;
  }
}

SpanPrediction predict_span_means(const Model& model, const Matrix& X, Index periods,
                                  const std::vector<std::int64_t>& keys, const std::vector<double>& quantiles,
                                  int samples, unsigned long long seed, int threads) {
  if (periods < 1 || X.cols() % periods != 0)
    throw DataError("a span's inputs must hold the same number of periods for every pixel");
  const Index N = X.cols() / periods;
  if (static_cast<Index>(keys.size()) != N) throw DataError("a span needs one draw key per pixel");
  if (samples < 2) throw ConfigError("a span's uncertainty needs at least 2 draws");
  const LatentField field(model);
  const LinkFunction& link = link_of(model.spec.link);
  SpanPrediction out{Vector(N), Vector(N), Matrix(N, static_cast<Index>(quantiles.size()))};
#pragma omp parallel num_threads(std::max(1, threads))
  {
    const FlushDenormals flush;
    Vector m, draws(samples), z(static_cast<Index>(samples) * periods);
    Matrix C;
    Eigen::SelfAdjointEigenSolver<Matrix> eig;
#pragma omp for schedule(dynamic, 64)
    for (Index i = 0; i < N; ++i) {
      latent_joint(model, field.posterior(), X.middleCols(i * periods, periods), m, C, &field.shifts());
      double mean = 0;
      for (Index p = 0; p < periods; ++p) mean += link.mean(m[p], C(p, p));
      out.mean[i] = mean / static_cast<double>(periods);
      // f = m + V sqrt(max(Lambda, 0)) z: a square root of C that tolerates its rounding.
      eig.compute(C);
      const Matrix root = eig.eigenvectors() * eig.eigenvalues().cwiseMax(0.0).cwiseSqrt().asDiagonal();
      stream_normals(counter_stream(seed, 2, static_cast<std::uint64_t>(keys[static_cast<size_t>(i)])), z.size(),
                     z.data());
      const Eigen::Map<const Matrix> Z(z.data(), periods, samples);
      const Matrix f = (root * Z).colwise() + m;
      for (int s = 0; s < samples; ++s) {
        double a = 0;
        for (Index p = 0; p < periods; ++p) a += link.psi(f(p, s));
        draws[s] = a / static_cast<double>(periods);
      }
      if (model.spec.link == Link::exp) {
        // Exact under the exp link (draws of a lognormal's sd converge slowly):
        // cov(e^{f_p}, e^{f_q}) = E_p E_q (e^{C_pq} - 1).
        const Vector E = (m.array() + 0.5 * C.diagonal().array()).exp();
        const Matrix cov = (C.array().unaryExpr([](double c) { return std::expm1(c); })).matrix();
        out.sd[i] = std::sqrt(std::max(0.0, E.dot(cov * E))) / static_cast<double>(periods);
      } else {
        const double dm = draws.mean();
        out.sd[i] = std::sqrt((draws.array() - dm).square().sum() / static_cast<double>(samples - 1));
      }
      std::sort(draws.data(), draws.data() + samples);
      for (size_t k = 0; k < quantiles.size(); ++k)
        out.quantiles(i, static_cast<Index>(k)) = empirical_quantile(draws, quantiles[k]);
    }
  }
  return out;
}

}  // namespace vbagg
