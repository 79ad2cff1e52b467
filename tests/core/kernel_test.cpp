// The kernel against closed forms and finite differences: sums and products of parts, the periodic
// kernel through the time inputs, fixed variances, and the derivatives with respect to the
// hyperparameters and the first inputs.
#include "core/kernel.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace vbagg::kernel_test {

const Index kCov = 2, kCoords = 2, kD = kCov + kCoords + kTimeInputs;

double matern32(double r) { return (1 + std::sqrt(3.0) * r) * std::exp(-std::sqrt(3.0) * r); }

// Inputs with covariates and coordinates N(0, 1) and a time of up to three years.
Matrix random_inputs(Index n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> years(0.0, 3.0);
  Matrix X(kD, n);
  for (Index i = 0; i < n; ++i) {
    for (Index d = 0; d < kCov + kCoords; ++d) X(d, i) = normal(rng);
    time_inputs(years(rng), X.col(i).tail(kTimeInputs));
  }
  return X;
}

Kernel space_time_kernel() {
  Kernel k = make_kernel("ard", "matern32", kCov, kCoords, "seasonal+trend");
  Vector theta(k.num_params());
  for (Index i = 0; i < theta.size(); ++i) theta[i] = 0.1 * static_cast<double>(i % 5) - 0.2;
  k.set_params(theta);
  return k;
}

TEST(Kernel, SpaceTimeMatchesItsClosedForm) {
  const Kernel k = space_time_kernel();
  ASSERT_EQ(k.parts().size(), 4u);
  EXPECT_FALSE(k.is_sum());
  // ard (1 + 2) + matern32 without variance (1) + seasonal (2) + trend (2).
  EXPECT_EQ(k.num_params(), 8);
  const auto& ard = k.parts()[0];
  const auto& space = k.parts()[1];
  const auto& seasonal = k.parts()[2];
  const auto& trend = k.parts()[3];
  EXPECT_TRUE(space.fixed_variance);
  EXPECT_EQ(space.log_variance, 0.0);

  const Matrix X1 = random_inputs(5, 1), X2 = random_inputs(4, 2);
  Matrix K;
  k.cross(X1, X2, K);
  for (Index i = 0; i < X1.cols(); ++i)
    for (Index j = 0; j < X2.cols(); ++j) {
      const Vector dc =
          (X1.col(i).head(kCov) - X2.col(j).head(kCov)).cwiseQuotient(ard.log_lengthscale.array().exp().matrix());
      const double k_ard = std::exp(ard.log_variance - 0.5 * dc.squaredNorm());
      const double r = (X1.col(i).segment(kCov, kCoords) - X2.col(j).segment(kCov, kCoords)).norm() /
                       std::exp(space.log_lengthscale[0]);
      const double dt = X1(kCov + kCoords, i) - X2(kCov + kCoords, j);
      const double ls = std::exp(seasonal.log_lengthscale[0]), lt = std::exp(trend.log_lengthscale[0]);
      // The periodic kernel with a one-year period (MacKay's form) and an rbf trend.
      const double k_season =
          std::exp(seasonal.log_variance) * std::exp(-2 * std::pow(std::sin(M_PI * dt), 2) / (ls * ls));
      const double k_trend = std::exp(trend.log_variance - 0.5 * dt * dt / (lt * lt));
      EXPECT_NEAR(K(i, j), k_ard + matern32(r) * (k_season + k_trend), 1e-12) << i << "," << j;
    }
  // k(x, x) = ard variance + 1 x (seasonal + trend variances).
  EXPECT_NEAR(k.diag_value(),
              std::exp(ard.log_variance) + std::exp(seasonal.log_variance) + std::exp(trend.log_variance), 1e-14);
}

TEST(Kernel, SeasonalPartRepeatsEveryYear) {
  const Kernel k = make_kernel("none", "none", 0, 0, "seasonal");
  Matrix X(kTimeInputs, 3);
  time_inputs(2020.25, X.col(0));
  time_inputs(2021.25, X.col(1));
  time_inputs(2020.75, X.col(2));
  Matrix K;
  k.cross(X, X, K);
  EXPECT_NEAR(K(0, 1), k.diag_value(), 1e-12);  // a year apart: fully correlated
  EXPECT_LT(K(0, 2), 0.5 * k.diag_value());     // half a year apart: least correlated
}

// N(0, 1) weights G of a sum over the kernel's values.
Matrix random_weights(Index rows, Index cols, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  Matrix G(rows, cols);
  for (Index i = 0; i < G.size(); ++i) G.data()[i] = normal(rng);
  return G;
}

// L = sum_ij G_ij k(x1_i, x2_j) for a fixed random G: its gradient is cross_backward's.
double weighted_sum(const Kernel& k, const Matrix& X1, const Matrix& X2, const Matrix& G) {
  Matrix K;
  k.cross(X1, X2, K);
  return (G.array() * K.array()).sum();
}

// The central difference of value(kernel) in hyperparameter p.
template <class F>
double central_difference(const Kernel& k, Index p, double h, F value) {
  Kernel plus = k, minus = k;
  Vector t = k.params();
  t[p] += h;
  plus.set_params(t);
  t[p] -= 2 * h;
  minus.set_params(t);
  return (value(plus) - value(minus)) / (2 * h);
}

TEST(Kernel, ProductGradientsMatchFiniteDifferences) {
  const Kernel k = space_time_kernel();
  const Matrix X1 = random_inputs(6, 3), X2 = random_inputs(7, 4);
  const Matrix G = random_weights(6, 7, 5);

  Matrix K;
  KernelCache cache;
  k.cross(X1, X2, K, &cache);
  Vector g_theta = Vector::Zero(k.num_params());
  Matrix g_X1 = Matrix::Zero(kD, 6);
  k.cross_backward(G, cache, g_theta, &g_X1);

  const double h = 1e-6;
  const Vector theta = k.params();
  for (Index p = 0; p < theta.size(); ++p) {
    const double numeric = central_difference(k, p, h, [&](const Kernel& at) { return weighted_sum(at, X1, X2, G); });
    EXPECT_NEAR(g_theta[p], numeric, 1e-6 * (1 + std::abs(numeric))) << k.param_names()[p];
  }
  for (Index d = 0; d < kD; ++d)
    for (Index i = 0; i < 6; ++i) {
      Matrix plus = X1, minus = X1;
      plus(d, i) += h;
      minus(d, i) -= h;
      const double numeric = (weighted_sum(k, plus, X2, G) - weighted_sum(k, minus, X2, G)) / (2 * h);
      EXPECT_NEAR(g_X1(d, i), numeric, 1e-6 * (1 + std::abs(numeric))) << "input " << d << " of " << i;
    }

  // The diagonal's gradient: d k(x, x) / d theta.
  Vector g_diag = Vector::Zero(k.num_params());
  k.diag_backward(1.0, g_diag);
  for (Index p = 0; p < theta.size(); ++p)
    EXPECT_NEAR(g_diag[p], central_difference(k, p, h, [](const Kernel& at) { return at.diag_value(); }), 1e-8)
        << k.param_names()[p];
}

// A part whose inputs are the same in every column of X2 (the time parts over one period's
// pixels) is evaluated once and repeated: its values and gradients are those of the columns taken
// one at a time, where nothing is repeated.
TEST(Kernel, PartsConstantOverTheColumnsMatchColumnByColumn) {
  const Kernel k = space_time_kernel();
  const Matrix X1 = random_inputs(6, 7);
  Matrix X2 = random_inputs(9, 8);
  for (Index j = 1; j < X2.cols(); ++j) X2.col(j).tail(kTimeInputs) = X2.col(0).tail(kTimeInputs);
  X2.row(0).setConstant(0.3);  // one covariate too, not the other: the ard part is not constant
  const Matrix G = random_weights(6, 9, 9);

  Matrix K;
  KernelCache cache;
  k.cross(X1, X2, K, &cache);
  EXPECT_FALSE(cache.parts[0].constant);
  EXPECT_FALSE(cache.parts[1].constant);
  EXPECT_TRUE(cache.parts[2].constant);
  EXPECT_TRUE(cache.parts[3].constant);
  Vector g_theta = Vector::Zero(k.num_params());
  Matrix g_X1 = Matrix::Zero(kD, 6);
  k.cross_backward(G, cache, g_theta, &g_X1);

  Vector one_theta = Vector::Zero(k.num_params());
  Matrix one_X1 = Matrix::Zero(kD, 6);
  for (Index j = 0; j < X2.cols(); ++j) {
    Matrix Kj;
    KernelCache cj;
    k.cross(X1, X2.col(j), Kj, &cj);
    EXPECT_FALSE(cj.parts[2].constant);
    EXPECT_LT((Kj.col(0) - K.col(j)).cwiseAbs().maxCoeff(), 1e-15) << "column " << j;
    k.cross_backward(G.col(j), cj, one_theta, &one_X1);
  }
  EXPECT_LT((g_theta - one_theta).cwiseAbs().maxCoeff(), 1e-12 * (1 + one_theta.cwiseAbs().maxCoeff()));
  EXPECT_LT((g_X1 - one_X1).cwiseAbs().maxCoeff(), 1e-12 * (1 + one_X1.cwiseAbs().maxCoeff()));
}

TEST(Kernel, TermsMustUseEveryPartOnce) {
  KernelPart p;
  EXPECT_THROW(Kernel({p, p}, {{{0}}}), ConfigError);      // part 1 unused
  EXPECT_THROW(Kernel({p}, {{{0}}, {{0}}}), ConfigError);  // part 0 twice
  EXPECT_THROW(Kernel({p}, {{{0}, {}}}), ConfigError);     // an empty factor
  EXPECT_THROW(make_kernel("ard", "matern32", 1, 2, "weekly"), ConfigError);
  EXPECT_NO_THROW(Kernel({p, p}, {{{0}, {1}}}));
}

}  // namespace vbagg::kernel_test
