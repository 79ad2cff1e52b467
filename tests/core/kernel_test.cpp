// The kernel against closed forms and finite differences: sums and products of parts, the periodic
// kernel through the time inputs and the cycle less its mean, fixed variances, and the derivatives
// with respect to the hyperparameters and the first inputs.
#include "core/kernel.hpp"

#include <gtest/gtest.h>

#include <Eigen/Eigenvalues>
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

// The space-time kernel with its seasonal part `season`; a finite `season_log_lengthscale`
// replaces that part's.
Kernel space_time_kernel(const std::string& season = "periodic", double season_log_lengthscale = NAN) {
  Kernel k = make_kernel("ard", "matern32", kCov, kCoords, "seasonal+trend", season);
  Vector theta(k.num_params());
  for (Index i = 0; i < theta.size(); ++i) theta[i] = 0.1 * static_cast<double>(i % 5) - 0.2;
  k.set_params(theta);
  if (std::isfinite(season_log_lengthscale)) k.parts()[2].log_lengthscale[0] = season_log_lengthscale;
  return k;
}

// The closed forms of the space-time kernel's parts between input columns a and b: the ard on the
// covariates, the periodic kernel with a one-year period (MacKay's form) and the rbf trend on time.
double ard_value(const KernelPart& ard, const Matrix& X1, Index i, const Matrix& X2, Index j) {
  const Vector dc =
      (X1.col(i).head(kCov) - X2.col(j).head(kCov)).cwiseQuotient(ard.log_lengthscale.array().exp().matrix());
  return std::exp(ard.log_variance - 0.5 * dc.squaredNorm());
}
double space_distance(const Matrix& X1, Index i, const Matrix& X2, Index j) {
  return (X1.col(i).segment(kCov, kCoords) - X2.col(j).segment(kCov, kCoords)).norm();
}
double time_difference(const Matrix& X1, Index i, const Matrix& X2, Index j) {
  return X1(kCov + kCoords, i) - X2(kCov + kCoords, j);
}
double periodic_value(const KernelPart& seasonal, double dt) {
  const double ls = std::exp(seasonal.log_lengthscale[0]);
  return std::exp(seasonal.log_variance) * std::exp(-2 * std::pow(std::sin(M_PI * dt), 2) / (ls * ls));
}
double trend_value(const KernelPart& trend, double dt) {
  const double lt = std::exp(trend.log_lengthscale[0]);
  return std::exp(trend.log_variance - 0.5 * dt * dt / (lt * lt));
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
      const double r = space_distance(X1, i, X2, j) / std::exp(space.log_lengthscale[0]);
      const double dt = time_difference(X1, i, X2, j);
      EXPECT_NEAR(K(i, j),
                  ard_value(ard, X1, i, X2, j) + matern32(r) * (periodic_value(seasonal, dt) + trend_value(trend, dt)),
                  1e-12)
          << i << "," << j;
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

// The cycle kernel of one part on the two circle inputs, variance e^0.3 and lengthscale e^log_l.
Kernel cycle_kernel(double log_l) {
  Kernel k = make_kernel("none", "none", 0, 0, "seasonal", "cycle");
  k.parts()[0].log_variance = 0.3;
  k.parts()[0].log_lengthscale[0] = log_l;
  return k;
}

// The time inputs of phases theta (one column each), their circle inputs scaled by `radius`.
Matrix circle_inputs(const std::vector<double>& theta, double radius = 1) {
  Matrix U(kTimeInputs, static_cast<Index>(theta.size()));
  for (size_t j = 0; j < theta.size(); ++j) {
    time_inputs(theta[j] / (2 * M_PI), U.col(static_cast<Index>(j)));
    U.col(static_cast<Index>(j)).tail(2) *= radius;
  }
  return U;
}

// The cycle is the periodic kernel less its mean over the year, rescaled to its variance: checked
// against that mean by the trapezoid rule over the circle (exact to rounding for a smooth periodic
// function), not the Bessel functions the kernel takes it from, at lengthscales of each regime.
TEST(Kernel, CycleIsThePeriodicKernelLessItsMeanOverTheYear) {
  const std::vector<double> theta = {0.0, 0.4, 1.9, 3.1, 5.0};
  for (double log_l : {4.0, 0.5, -0.7, -2.0, -3.4}) {
    const Kernel k = cycle_kernel(log_l);
    const double x = std::exp(-2 * log_l), var = std::exp(0.3);
    const auto periodic = [&](double delta) { return std::exp(x * (std::cos(delta) - 1)); };  // over var
    const int n = 20000;
    double mean = 0;
    for (int i = 0; i < n; ++i) mean += periodic(2 * M_PI * i / n) / n;
    const Matrix U = circle_inputs(theta);
    Matrix K;
    k.cross(U, U, K);
    for (Index i = 0; i < U.cols(); ++i)
      for (Index j = 0; j < U.cols(); ++j) {
        const double want =
            var * (periodic(theta[static_cast<size_t>(i)] - theta[static_cast<size_t>(j)]) - mean) / (1 - mean);
        EXPECT_NEAR(K(i, j), want, 1e-8 * var) << "log l " << log_l << " at " << i << "," << j;
      }
    EXPECT_NEAR(k.diag_value(), var, 1e-15);
  }
}

TEST(Kernel, CycleHasNoMeanAndTendsToTheFirstHarmonic) {
  std::vector<double> year;
  for (int i = 0; i < 12; ++i) year.push_back(2 * M_PI * i / 12);
  const Matrix months = circle_inputs(year), one = circle_inputs({0.7});
  for (double log_l : {1.0, 0.0}) {
    Matrix K;
    cycle_kernel(log_l).cross(one, months, K);
    // Months spread evenly over the year average the periodic kernel's mean: what is left is 0
    // (up to its harmonics of order 12 and above, below 1e-11 at these lengthscales).
    EXPECT_NEAR(K.mean(), 0.0, 1e-9) << log_l;
  }
  // At a long lengthscale the harmonics above the first vanish: var cos(theta - theta').
  Matrix K;
  cycle_kernel(8.0).cross(one, months, K);
  for (Index j = 0; j < months.cols(); ++j)
    EXPECT_NEAR(K(0, j), std::exp(0.3) * std::cos(0.7 - year[static_cast<size_t>(j)]), 1e-6) << j;
}

// k-means puts inducing inputs inside the circle: there the cycle reads their phase, so its Gram
// matrix is the one of the same phases on the circle, and positive semi-definite.
TEST(Kernel, CycleReadsOnlyThePhaseOfInputsInsideTheCircle) {
  std::vector<double> theta;
  for (int i = 0; i < 30; ++i) theta.push_back(0.37 * i * i);
  const Kernel k = cycle_kernel(-0.3);
  Matrix inside = circle_inputs(theta, 1.0);
  for (Index j = 0; j < inside.cols(); ++j) inside.col(j).tail(2) *= 0.05 + 0.03 * static_cast<double>(j);
  Matrix K_inside, K_circle;
  k.cross(inside, inside, K_inside);
  k.cross(circle_inputs(theta), circle_inputs(theta), K_circle);
  EXPECT_LT((K_inside - K_circle).cwiseAbs().maxCoeff(), 1e-12);
  const Eigen::SelfAdjointEigenSolver<Matrix> eig(K_inside);
  EXPECT_GT(eig.eigenvalues().minCoeff(), -1e-10);
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

// cross_backward's gradients of sum_ij G_ij k(x1_i, x2_j) against central differences.
void expect_gradients_match_finite_differences(const Kernel& k, const Matrix& X1, const Matrix& X2) {
  const Index n1 = X1.cols();
  const Matrix G = random_weights(n1, X2.cols(), 5);

  Matrix K;
  KernelCache cache;
  k.cross(X1, X2, K, &cache);
  Vector g_theta = Vector::Zero(k.num_params());
  Matrix g_X1 = Matrix::Zero(kD, n1);
  k.cross_backward(G, cache, g_theta, &g_X1);

  const double h = 1e-6;
  const Vector theta = k.params();
  for (Index p = 0; p < theta.size(); ++p) {
    const double numeric = central_difference(k, p, h, [&](const Kernel& at) { return weighted_sum(at, X1, X2, G); });
    EXPECT_NEAR(g_theta[p], numeric, 1e-6 * (1 + std::abs(numeric))) << k.param_names()[p];
  }
  for (Index d = 0; d < kD; ++d)
    for (Index i = 0; i < n1; ++i) {
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

// space_time "separate": space_a x season + space_b x trend, each space part with its own
// lengthscale and no variance of its own.
TEST(Kernel, SeparateSpaceTimeGivesEachTimePartItsOwnSpaceKernel) {
  Kernel k = make_kernel("ard", "matern32", kCov, kCoords, "seasonal+trend", "periodic", "separate");
  ASSERT_EQ(k.parts().size(), 5u);
  ASSERT_EQ(k.terms().size(), 3u);
  // ard (1 + 2) + two matern32 without variance (1 + 1) + seasonal (2) + trend (2).
  EXPECT_EQ(k.num_params(), 9);
  Vector theta(k.num_params());
  for (Index i = 0; i < theta.size(); ++i) theta[i] = 0.15 * static_cast<double>(i % 4) - 0.25;
  k.set_params(theta);
  const auto& ard = k.parts()[0];
  const auto& space_season = k.parts()[1];
  const auto& seasonal = k.parts()[2];
  const auto& trend = k.parts()[3];
  const auto& space_trend = k.parts()[4];
  EXPECT_TRUE(space_season.fixed_variance);
  EXPECT_TRUE(space_trend.fixed_variance);
  ASSERT_NE(space_season.log_lengthscale[0], space_trend.log_lengthscale[0]);

  const Matrix X1 = random_inputs(5, 11), X2 = random_inputs(4, 12);
  Matrix K;
  k.cross(X1, X2, K);
  for (Index i = 0; i < X1.cols(); ++i)
    for (Index j = 0; j < X2.cols(); ++j) {
      const double d = space_distance(X1, i, X2, j), dt = time_difference(X1, i, X2, j);
      EXPECT_NEAR(K(i, j),
                  ard_value(ard, X1, i, X2, j) +
                      matern32(d / std::exp(space_season.log_lengthscale[0])) * periodic_value(seasonal, dt) +
                      matern32(d / std::exp(space_trend.log_lengthscale[0])) * trend_value(trend, dt),
                  1e-12)
          << i << "," << j;
    }
  expect_gradients_match_finite_differences(k, random_inputs(6, 13), random_inputs(7, 14));
  // Only a space kernel times seasonal+trend has two time parts to separate; shared is the one-product layout.
  EXPECT_EQ(make_kernel("ard", "matern32", kCov, kCoords, "trend", "periodic", "separate").terms().size(), 2u);
  EXPECT_EQ(make_kernel("ard", "matern32", kCov, kCoords, "seasonal+trend", "cycle", "shared").terms().size(), 2u);
  EXPECT_THROW(make_kernel("ard", "matern32", kCov, kCoords, "seasonal+trend", "periodic", "apart"), ConfigError);
}

// ard+additive: the ard over all covariates and a squared exponential on each covariate alone, each
// with its own variance and lengthscale. With a space kernel after them, and the space-time product
// built on the space part whatever comes before it.
TEST(Kernel, AdditiveCovariateKernelHasAPartPerCovariate) {
  Kernel k = make_kernel("ard+additive", "matern32", kCov, kCoords);
  ASSERT_EQ(k.parts().size(), 1u + kCov + 1u);
  EXPECT_TRUE(k.is_sum());
  // ard (1 + kCov) + an rbf per covariate (2 each) + matern32 (2).
  EXPECT_EQ(k.num_params(), 1 + kCov + 2 * kCov + 2);
  Vector theta(k.num_params());
  for (Index i = 0; i < theta.size(); ++i) theta[i] = 0.13 * static_cast<double>(i % 5) - 0.3;
  k.set_params(theta);
  const Matrix X1 = random_inputs(5, 21), X2 = random_inputs(4, 22);
  Matrix K;
  k.cross(X1, X2, K);
  const auto& space = k.parts()[1 + kCov];
  for (Index i = 0; i < X1.cols(); ++i)
    for (Index j = 0; j < X2.cols(); ++j) {
      double want =
          ard_value(k.parts()[0], X1, i, X2, j) +
          std::exp(space.log_variance) * matern32(space_distance(X1, i, X2, j) / std::exp(space.log_lengthscale[0]));
      for (Index c = 0; c < kCov; ++c) {
        const auto& one = k.parts()[1 + static_cast<size_t>(c)];
        EXPECT_EQ(one.type, KernelType::rbf);
        EXPECT_EQ(one.begin, c);
        EXPECT_EQ(one.dim, 1);
        const double u = (X1(c, i) - X2(c, j)) / std::exp(one.log_lengthscale[0]);
        want += std::exp(one.log_variance - 0.5 * u * u);
      }
      EXPECT_NEAR(K(i, j), want, 1e-12) << i << "," << j;
    }
  expect_gradients_match_finite_differences(k, random_inputs(6, 23), random_inputs(7, 24));

  // In a space-time kernel the product still takes the space part.
  const Kernel st = make_kernel("ard+additive", "matern32", kCov, kCoords, "seasonal+trend");
  ASSERT_EQ(st.terms().size(), 1u + kCov + 1u);
  EXPECT_EQ(st.parts()[static_cast<size_t>(st.terms().back()[0][0])].type, KernelType::matern32);
  EXPECT_TRUE(st.parts()[static_cast<size_t>(st.terms().back()[0][0])].fixed_variance);
  expect_gradients_match_finite_differences(st, random_inputs(6, 25), random_inputs(7, 26));
  try {
    make_kernel("ard+additive", "matern32", 0, kCoords);
    ADD_FAILURE() << "no covariates for ard+additive";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'ard+additive' but there are no covariates"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_kernel("additive", "matern32", kCov, kCoords), ConfigError);
}

TEST(Kernel, ProductGradientsMatchFiniteDifferences) {
  expect_gradients_match_finite_differences(space_time_kernel(), random_inputs(6, 3), random_inputs(7, 4));
}

// The cycle's lengthscale reaches its values through the mean it removes too. Its three regimes of
// that mean (the series for x = 1 / l^2 < 0.5, Boost's Bessel function, the asymptotic series past
// x = 700), with first inputs inside the circle, where only their phase may move the kernel.
TEST(Kernel, CycleGradientsMatchFiniteDifferences) {
  Matrix X1 = random_inputs(6, 3);
  for (Index i = 0; i < X1.cols(); ++i) X1.col(i).tail(2) *= 0.3 + 0.1 * static_cast<double>(i);
  for (double log_l : {2.0, 0.0, -3.4}) {
    SCOPED_TRACE("cycle log lengthscale " + std::to_string(log_l));
    expect_gradients_match_finite_differences(space_time_kernel("cycle", log_l), X1, random_inputs(7, 4));
  }
}

// A part whose inputs are the same in every column of X2 (the time parts over one period's
// pixels) is evaluated once and repeated: its values and gradients are those of the columns taken
// one at a time, where nothing is repeated.
void expect_constant_parts_match_columns(const Kernel& k) {
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

TEST(Kernel, PartsConstantOverTheColumnsMatchColumnByColumn) {
  for (const char* season : {"periodic", "cycle"}) {
    SCOPED_TRACE(season);
    expect_constant_parts_match_columns(space_time_kernel(season));
  }
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
