// The intensity averaged over a span of periods at each pixel of a space-time model (the annual
// mean of monthly intensities), with its uncertainty from joint draws of f over the span: the
// periods of one pixel are correlated, so averaging their sds would be wrong.
#pragma once

#include <cstdint>
#include <vector>

#include "model.hpp"

namespace vbagg {

class SpreadShifts;

// The joint posterior of f at a few inputs (D x g): mean (g) and covariance (g x g),
// cov(x, x') = k(x, x') - phi(x)^T Q phi(x') (model.hpp's Posterior: Q = P - B^T B), plus
// a(x)^T a(x') of the point estimates' spread when `shifts` (made from the same model) has any.
void latent_joint(const Model& model, const Posterior& post, const Eigen::Ref<const Matrix>& X, Vector& mean,
                  Matrix& cov, const SpreadShifts* shifts = nullptr);

struct SpanPrediction {
  Vector mean, sd;   // of A_i = (1/P) sum_p Psi(f(x_ip)), per pixel
  Matrix quantiles;  // pixels x quantile levels
};

// X holds each pixel's inputs in the span's P periods: pixel i in columns [i P, (i + 1) P). The
// mean is exact (the average of the periods' means), and so is the sd under the exp link (the
// lognormal covariances); otherwise the sd, and the quantiles always, come from `samples` joint
// draws of f over the pixel's periods, keyed by (seed, keys[i]), so a pixel's draws depend on
// neither the threads nor the other pixels.
SpanPrediction predict_span_means(const Model& model, const Matrix& X, Index periods,
                                  const std::vector<std::int64_t>& keys, const std::vector<double>& quantiles,
                                  int samples, unsigned long long seed, int threads);

}  // namespace vbagg
