// The mean intensity over a span of periods: the joint posterior of f against the whitened SVGP
// formula, the span's mean and sd against the lognormal closed form, one period against the
// marginal prediction, and draws that do not depend on the threads.
#include "core/span.hpp"

#include <gtest/gtest.h>

#include "core/predict.hpp"
#include "test_util.hpp"

namespace vbagg::span_test {

const Index kD = 2 + 2 + kTimeInputs;

Model space_time_model() {
  ModelSpec spec;
  spec.link = Link::exp;
  Model m = test::random_model(spec, make_kernel("ard", "matern32", 2, 2, "seasonal+trend"), 12, kD, 7);
  m.mean = -2.0;
  return m;
}

// Pixel inputs in P consecutive months, pixel-major.
Matrix span_inputs(Index pixels, Index periods, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  Matrix X(kD, pixels * periods);
  for (Index i = 0; i < pixels; ++i) {
    Vector x(4);
    for (Index d = 0; d < 4; ++d) x[d] = normal(rng);
    for (Index p = 0; p < periods; ++p) {
      auto col = X.col(i * periods + p);
      col.head(4) = x;
      col[0] += 0.3 * static_cast<double>(p);  // a covariate that changes by month
      time_inputs((static_cast<double>(p) + 0.5) / 12.0, col.tail(kTimeInputs));
    }
  }
  return X;
}

TEST(Span, JointPosteriorIsTheWhitenedSvgpCovariance) {
  const Model m = space_time_model();
  const Posterior post = compute_posterior(m);
  const Matrix X = span_inputs(1, 5, 3);
  Vector mean;
  Matrix cov;
  latent_joint(m, post, X, mean, cov);
  // f = mu + A^T v with A = L^{-1} K_WX and v ~ N(m_v, L_v L_v^T), plus the prior's residual.
  Matrix Kwx, Kxx;
  m.kernel.cross(m.inducing, X, Kwx);
  m.kernel.cross(X, X, Kxx);
  const Matrix A = post.L.triangularView<Eigen::Lower>().solve(Kwx);
  const Matrix S = m.q_chol * m.q_chol.transpose();
  const Vector want_mean = (A.transpose() * m.q_mean).array() + m.mean;
  const Matrix want_cov = Kxx - A.transpose() * A + A.transpose() * S * A;
  EXPECT_LE((mean - want_mean).norm(), 1e-10 * (1 + want_mean.norm()));
  EXPECT_LE((cov - want_cov).norm(), 1e-10 * (1 + want_cov.norm()));
  // Its diagonal is the marginal prediction's.
  Vector pm, pv;
  predict_latent(m, X, pm, pv, 1);
  EXPECT_LE((cov.diagonal() - pv).norm(), 1e-10);
  // The months of one pixel are strongly correlated: the reason a span needs joint draws.
  EXPECT_GT(cov(0, 1) / std::sqrt(cov(0, 0) * cov(1, 1)), 0.3);
}

TEST(Span, MeanAndSdMatchTheLognormalClosedForm) {
  const Model m = space_time_model();
  const Posterior post = compute_posterior(m);
  const Index P = 12, N = 4;
  const Matrix X = span_inputs(N, P, 5);
  std::vector<std::int64_t> keys = {10, 11, 12, 13};
  const SpanPrediction s = predict_span_means(m, X, P, keys, {0.025, 0.5, 0.975}, 40000, 9, 2);
  for (Index i = 0; i < N; ++i) {
    Vector mean;
    Matrix C;
    latent_joint(m, post, X.middleCols(i * P, P), mean, C);
    // A = (1/P) sum_p e^{f_p}: E e^{f_p} = e^{m_p + C_pp / 2}, cov = E_p E_q (e^{C_pq} - 1).
    const Vector E = (mean.array() + 0.5 * C.diagonal().array()).exp();
    const double want_mean = E.mean();
    double var = 0;
    for (Index p = 0; p < P; ++p)
      for (Index q = 0; q < P; ++q) var += E[p] * E[q] * std::expm1(C(p, q));
    const double want_sd = std::sqrt(var) / static_cast<double>(P);
    EXPECT_NEAR(s.mean[i], want_mean, 1e-12 * want_mean);
    EXPECT_NEAR(s.sd[i], want_sd, 1e-10 * want_sd) << "pixel " << i;
    // Averaging the periods' sds instead would claim far more spread than the joint draws show,
    // or far less if they were taken as independent.
    double independent = 0;
    for (Index p = 0; p < P; ++p) independent += E[p] * E[p] * std::expm1(C(p, p));
    EXPECT_GT(want_sd, 1.2 * std::sqrt(independent) / static_cast<double>(P));
    EXPECT_LT(s.quantiles(i, 0), s.quantiles(i, 1));
    EXPECT_LT(s.quantiles(i, 1), s.quantiles(i, 2));
  }
}

// Under the square link the sd comes from the draws: against Isserlis' closed form,
// cov(f_p^2, f_q^2) = 2 C_pq^2 + 4 m_p m_q C_pq.
TEST(Span, DrawnSdMatchesTheSquareLinkClosedForm) {
  ModelSpec spec;
  spec.link = Link::square;
  const Model m = test::random_model(spec, make_kernel("ard", "matern32", 2, 2, "seasonal+trend"), 12, kD, 17);
  const Posterior post = compute_posterior(m);
  const Index P = 6, N = 3;
  const Matrix X = span_inputs(N, P, 19);
  const SpanPrediction s = predict_span_means(m, X, P, {5, 6, 7}, {0.5}, 100000, 3, 2);
  for (Index i = 0; i < N; ++i) {
    Vector mean;
    Matrix C;
    latent_joint(m, post, X.middleCols(i * P, P), mean, C);
    const double want_mean = (mean.array().square() + C.diagonal().array()).mean();
    const Matrix cov = 2 * C.array().square() + 4 * (mean * mean.transpose()).array() * C.array();
    const double want_sd = std::sqrt(cov.sum()) / static_cast<double>(P);
    EXPECT_NEAR(s.mean[i], want_mean, 1e-12 * want_mean);
    EXPECT_NEAR(s.sd[i], want_sd, 0.02 * want_sd) << "pixel " << i;
  }
}

TEST(Span, OnePeriodIsTheMarginalPrediction) {
  const Model m = space_time_model();
  const Matrix X = span_inputs(3, 1, 11);
  const SpanPrediction s = predict_span_means(m, X, 1, {1, 2, 3}, {0.1, 0.9}, 40000, 4, 1);
  PredictOptions o;
  o.quantiles = {0.1, 0.9};
  const Prediction p = predict(m, X, o);
  for (Index i = 0; i < 3; ++i) {
    EXPECT_NEAR(s.mean[i], p.mean[i], 1e-12 * p.mean[i]);
    EXPECT_NEAR(s.sd[i], p.sd[i], 1e-10 * p.sd[i]);
    // The draws' quantiles, on the latent scale, within 4 standard errors of an empirical quantile
    // of 40000 draws: sqrt(q (1 - q) / n) / phi(z_q) latent sds.
    const double se = std::sqrt(0.1 * 0.9 / 40000) / 0.17550 * std::sqrt(p.latent_var[i]);
    for (Index k = 0; k < 2; ++k)
      EXPECT_NEAR(std::log(s.quantiles(i, k)), std::log(p.quantiles(i, k)), 4 * se) << i << ", " << k;
  }
}

TEST(Span, DrawsDoNotDependOnThreadsOrNeighbours) {
  const Model m = space_time_model();
  const Matrix X = span_inputs(40, 6, 13);
  std::vector<std::int64_t> keys;
  for (Index i = 0; i < 40; ++i) keys.push_back(1000 + i);
  const SpanPrediction one = predict_span_means(m, X, 6, keys, {0.05}, 300, 2, 1);
  const SpanPrediction two = predict_span_means(m, X, 6, keys, {0.05}, 300, 2, 2);
  EXPECT_EQ(one.sd, two.sd);
  EXPECT_EQ(one.quantiles, two.quantiles);
  // Pixel 7 alone has the draws it had among the others.
  const SpanPrediction alone = predict_span_means(m, X.middleCols(7 * 6, 6), 6, {keys[7]}, {0.05}, 300, 2, 1);
  EXPECT_EQ(alone.sd[0], one.sd[7]);
  EXPECT_THROW(predict_span_means(m, X.leftCols(7), 6, keys, {}, 300, 2, 1), DataError);
}

}  // namespace vbagg::span_test
