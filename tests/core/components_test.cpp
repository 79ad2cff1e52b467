// Kernels against their closed forms, k-means++, the swiss-roll generator, dataset checks,
// and the fit loop's stopping rules.
#include <gtest/gtest.h>

#include <Eigen/Eigenvalues>
#include <random>
#include <set>

#include "core/baselines.hpp"
#include "core/collective.hpp"
#include "core/country.hpp"
#include "core/fit.hpp"
#include "core/inducing.hpp"
#include "core/init.hpp"
#include "core/metrics.hpp"
#include "core/predict.hpp"
#include "core/swissroll.hpp"
#include "test_util.hpp"

namespace vbagg {
namespace {

TEST(Kernel, ClosedFormsForOnePair) {
  Matrix x(3, 1), z(3, 1);
  x << 0.3, -1.0, 2.0;
  z << 1.1, 0.5, 1.0;
  const double var = 1.7, ls = 0.8;
  const double r = (x - z).norm() / ls;
  auto value = [&](const std::string& name) {
    Kernel k = make_kernel(name, "none", 3, 0);
    Vector th = k.params();
    th.setConstant(std::log(ls));
    th[0] = std::log(var);
    k.set_params(th);
    Matrix K;
    k.cross(x, z, K);
    return K(0, 0);
  };
  EXPECT_NEAR(value("rbf"), var * std::exp(-0.5 * r * r), 1e-14);
  EXPECT_NEAR(value("ard"), var * std::exp(-0.5 * r * r), 1e-14);
  EXPECT_NEAR(value("matern12"), var * std::exp(-r), 1e-14);
  EXPECT_NEAR(value("matern32"), var * (1 + std::sqrt(3.0) * r) * std::exp(-std::sqrt(3.0) * r), 1e-14);
  EXPECT_NEAR(value("matern52"), var * (1 + std::sqrt(5.0) * r + 5 * r * r / 3) * std::exp(-std::sqrt(5.0) * r), 1e-14);
}

TEST(Kernel, ArdUsesOneLengthscalePerDimensionAndSumAddsParts) {
  Matrix x(3, 1), z(3, 1);
  x << 0.0, 0.0, 0.0;
  z << 1.0, 2.0, 3.0;
  Kernel k = make_kernel("ard", "matern32", 2, 1);
  Vector th(6);
  th << std::log(2.0), std::log(0.5), std::log(4.0), std::log(0.7), std::log(1.5), 0;
  k.set_params(th);
  Matrix K;
  k.cross(x, z, K);
  const double ard = 2.0 * std::exp(-0.5 * (4.0 + 0.25));
  const double r = 3.0 / 1.5;
  const double m32 = 0.7 * (1 + std::sqrt(3.0) * r) * std::exp(-std::sqrt(3.0) * r);
  EXPECT_NEAR(K(0, 0), ard + m32, 1e-14);
  EXPECT_NEAR(k.diag_value(), 2.7, 1e-14);
}

TEST(Kernel, GramMatricesArePositiveSemidefinite) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal;
  Matrix X(2, 60);
  for (Index i = 0; i < X.size(); ++i) X.data()[i] = normal(rng);
  for (const char* name : {"rbf", "ard", "matern12", "matern32", "matern52"}) {
    Matrix K;
    make_kernel(name, "none", 2, 0).cross(X, X, K);
    EXPECT_GT(Eigen::SelfAdjointEigenSolver<Matrix>(K).eigenvalues().minCoeff(), -1e-10) << name;
  }
}

TEST(Kernel, RejectsUnknownNames) {
  EXPECT_THROW(make_kernel("gauss", "none", 2, 0), ConfigError);
  EXPECT_THROW(make_kernel("ard", "ard", 2, 2), ConfigError);
  EXPECT_THROW(make_kernel("none", "none", 2, 2), ConfigError);
  EXPECT_THROW(make_kernel("ard", "matern32", 2, 0), ConfigError);
  EXPECT_THROW(make_kernel("none", "matern32", 0, 2, "seasonal", "weekly"), ConfigError);
  EXPECT_THROW(make_kernel("cycle", "none", 2, 0), ConfigError);  // a seasonal shape, not a covariate kernel
  // cycle reads two circle inputs: a part of another width (a broken model file) is refused.
  KernelPart part;
  part.type = KernelType::cycle;
  part.dim = 3;
  EXPECT_THROW(Kernel({part}), ConfigError);
  part.dim = 2;
  EXPECT_NO_THROW(Kernel({part}));
}

TEST(KMeans, SeededDistinctAndCapped) {
  std::mt19937_64 rng(1);
  std::normal_distribution<double> normal;
  Matrix X(2, 500);
  for (Index i = 0; i < X.size(); ++i) X.data()[i] = normal(rng);
  KMeansOptions o;
  o.seed = 5;
  const Matrix a = kmeans_plus_plus(X, 20, o), b = kmeans_plus_plus(X, 20, o);
  EXPECT_EQ(a.cols(), 20);
  EXPECT_TRUE(a == b);
  o.seed = 6;
  EXPECT_FALSE(a == kmeans_plus_plus(X, 20, o));
  // Lloyd iterations leave each centre at the mean of its cluster: inside the data's range.
  EXPECT_LE(a.maxCoeff(), X.maxCoeff());
  // Only three distinct points: at most three centres, all distinct.
  Matrix dup(2, 30);
  for (Index i = 0; i < 30; ++i) dup.col(i) = Vector::Constant(2, static_cast<double>(i % 3));
  const Matrix c = kmeans_plus_plus(dup, 10, o);
  EXPECT_EQ(c.cols(), 3);
  std::set<double> firsts;
  for (Index j = 0; j < c.cols(); ++j) firsts.insert(c(0, j));
  EXPECT_EQ(firsts.size(), 3u);
}

// Lloyd iterations run to their fixed point on more pixels than one block of distances holds
// (5,000: two whole blocks of 2,048 and a part): every centre is then the mean of the pixels
// nearest to it, found here by brute force.
TEST(KMeans, ConvergedCentresAreTheMeansOfTheirNearestPixels) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal;
  const Index n = 5000, k = 8;
  Matrix X(3, n);
  for (Index i = 0; i < n; ++i)
    for (Index r = 0; r < 3; ++r) X(r, i) = 6.0 * static_cast<double>((i * (r + 1)) % k) + normal(rng);
  KMeansOptions o;
  o.iterations = 200;
  const Matrix C = kmeans_plus_plus(X, k, o);
  ASSERT_EQ(C.cols(), k);
  Matrix sum = Matrix::Zero(3, k);
  Vector count = Vector::Zero(k);
  for (Index i = 0; i < n; ++i) {
    const Vector dist = (C.colwise() - X.col(i)).colwise().squaredNorm().transpose();
    Index best = 0;
    dist.minCoeff(&best);
    sum.col(best) += X.col(i);
    count[best] += 1;
  }
  for (Index j = 0; j < k; ++j) {
    ASSERT_GT(count[j], 0) << "centre " << j;
    EXPECT_LT((sum.col(j) / count[j] - C.col(j)).norm(), 1e-9) << "centre " << j;
  }
}

// Overdispersion multiplies each unit's expected count by e^u, u ~ N(-sd^2/2, sd^2), and leaves
// everything else of the country (and a country without it) unchanged.
TEST(Country, UnitNoiseIsLognormalWithMeanOneAndChangesOnlyTheCounts) {
  CountryOptions o;
  o.width = 80;
  o.height = 80;
  o.units = 400;
  o.seed = 5;
  const Country plain = make_country(o);
  o.unit_noise_sd = 0.5;
  const Country noisy = make_country(o);
  EXPECT_EQ(plain.unit_effect.cwiseAbs().maxCoeff(), 0.0);
  EXPECT_EQ(plain.intensity, noisy.intensity);
  EXPECT_EQ(plain.unit_of_pixel, noisy.unit_of_pixel);
  const Vector& u = noisy.unit_effect;
  const double mean = u.mean(), sd = std::sqrt((u.array() - mean).square().mean());
  EXPECT_NEAR(sd, 0.5, 0.05);
  EXPECT_NEAR(u.array().exp().mean(), 1.0, 0.06);
  EXPECT_NE(plain.counts, noisy.counts);
  // Each unit's expected count is its pixels' population times intensity, and its count is a
  // Poisson draw of that times e^u: standardised residuals have mean 0 and variance 1.
  Vector expected = Vector::Zero(o.units);
  for (Index i = 0; i < noisy.population.size(); ++i)
    expected[noisy.unit_of_pixel[static_cast<size_t>(i)]] += noisy.population[i] * noisy.intensity[i];
  EXPECT_LT((expected - noisy.expected).cwiseAbs().maxCoeff(), 1e-9 * expected.maxCoeff());
  EXPECT_EQ(plain.expected, noisy.expected);
  const Vector mean_count = noisy.expected.array() * u.array().exp();
  const Vector z = (noisy.counts - mean_count).array() / mean_count.array().sqrt();
  EXPECT_NEAR(z.mean(), 0.0, 0.2);
  EXPECT_NEAR(z.squaredNorm() / static_cast<double>(o.units), 1.0, 0.2);
  o.unit_noise_sd = -1;
  EXPECT_THROW(make_country(o), ConfigError);
}

// Survey noise moves each survey unit's and cluster's prevalence on the logit scale: positives vary
// far more than binomial draws allow, and the true prevalence and the counts are unchanged. (The
// surveys' draws share their streams, so who is tested and where differ once positives do.)
TEST(Country, SurveyNoiseOverdispersesOnlyThePositives) {
  CountryOptions o;
  o.width = 80;
  o.height = 80;
  o.units = 400;
  o.seed = 6;
  const Country plain = make_country(o);
  o.survey_noise_sd = 0.5;
  const Country noisy = make_country(o);
  EXPECT_EQ(plain.prevalence, noisy.prevalence);
  EXPECT_EQ(plain.counts, noisy.counts);
  EXPECT_NE(plain.positives, noisy.positives);
  EXPECT_NE(plain.cluster_positives, noisy.cluster_positives);
  // Each unit's survey against Binomial(tested, its population-weighted prevalence): standardised
  // residuals of variance 1 without the noise; with it about 1 + (n - 1) Var(pi') / (pi (1 - pi)),
  // near 10 for 100-500 tested at sd 0.5.
  Vector infected = Vector::Zero(o.units), people = Vector::Zero(o.units);
  for (Index i = 0; i < plain.population.size(); ++i) {
    infected[plain.unit_of_pixel[static_cast<size_t>(i)]] += plain.population[i] * plain.prevalence[i];
    people[plain.unit_of_pixel[static_cast<size_t>(i)]] += plain.population[i];
  }
  auto dispersion = [&](const Country& c) {
    double sum = 0;
    for (int u = 0; u < o.units; ++u) {
      const double pi = infected[u] / people[u], n = c.tested[u];
      sum += std::pow(c.positives[u] - n * pi, 2) / (n * pi * (1 - pi));
    }
    return sum / o.units;
  };
  EXPECT_NEAR(dispersion(plain), 1.0, 0.2);
  EXPECT_GT(dispersion(noisy), 4.0);
  o.survey_noise_sd = 3.5;
  EXPECT_THROW(make_country(o), ConfigError);
}

// Two countries that differ only in their latent field: the same covariates (NaN in the lake in
// both), people and units, and log lambda = log 0.05 + g + beta' x moved by the field alone.
void expect_only_the_field_moved(const Country& base, const Country& other) {
  ASSERT_EQ(base.covariates.size(), other.covariates.size());
  for (size_t k = 0; k < base.covariates.size(); ++k) {
    EXPECT_TRUE((base.covariates[k].array().isNaN() == other.covariates[k].array().isNaN()).all());
    EXPECT_TRUE(
        (base.covariates[k].array().isNaN() || base.covariates[k].array() == other.covariates[k].array()).all());
  }
  EXPECT_EQ(base.population, other.population);
  EXPECT_EQ(base.unit_of_pixel, other.unit_of_pixel);
  const Vector moved = other.intensity.array().log() - base.intensity.array().log();
  EXPECT_LT((moved - (other.field - base.field)).cwiseAbs().maxCoeff(), 1e-12);
}

// The latent field's frequencies: more of them leave every other part of the country as it was
// (the first 40 come from the country's stream, the rest from one of their own), and the field is
// their standardised sum, so a field of 41 is close to the field of 40 and one of 1,000 is not.
TEST(Country, FieldFrequenciesChangeOnlyTheField) {
  CountryOptions o;
  o.width = 60;
  o.height = 48;
  o.units = 20;
  const Country base = make_country(o);
  o.field_frequencies = 1000;
  const Country more = make_country(o);
  expect_only_the_field_moved(base, more);
  o.field_frequencies = 41;
  const Country one_more = make_country(o);
  const double n = static_cast<double>(base.field.size());
  for (const Country* c : {&base, &more, &one_more}) {
    EXPECT_NEAR(c->field.mean(), 0.0, 1e-12);
    EXPECT_NEAR(c->field.squaredNorm() / n, 0.25, 1e-12);
  }
  // Correlations of standardised fields: about sqrt(40 / R) for R features sharing the first 40.
  EXPECT_GT(base.field.dot(one_more.field) / (0.25 * n), 0.9);
  EXPECT_LT(base.field.dot(more.field) / (0.25 * n), 0.6);
  o.field_frequencies = 40;
  EXPECT_EQ(make_country(o).intensity, base.intensity);
  o.field_frequencies = 0;
  EXPECT_THROW(make_country(o), ConfigError);
}

// A Matérn 5/2 field (its spectrum is checked in random_features_test): the field moves and
// nothing else does.
TEST(Country, MaternFieldChangesOnlyTheField) {
  CountryOptions o;
  o.width = 60;
  o.height = 48;
  o.units = 20;
  o.field_frequencies = 1000;
  const Country rbf = make_country(o);
  o.field_kernel = CountryOptions::FieldKernel::matern52;
  const Country matern = make_country(o);
  expect_only_the_field_moved(rbf, matern);
  EXPECT_GT((matern.field - rbf.field).cwiseAbs().maxCoeff(), 0.1);
  EXPECT_NEAR(matern.field.squaredNorm() / static_cast<double>(matern.field.size()), 0.25, 1e-12);
}

// The covariates' part of log lambda: with linear effects a regression of log lambda - g on the
// covariates is exact; with nonlinear effects it leaves much of that part unexplained, and every
// other part of the country is as it was.
TEST(Country, NonlinearCovariateEffects) {
  CountryOptions o;
  o.width = 60;
  o.height = 48;
  o.units = 20;
  const Country linear = make_country(o);
  o.covariate_effects = CountryOptions::CovariateEffects::nonlinear;
  const Country bent = make_country(o);
  EXPECT_EQ(linear.population, bent.population);
  EXPECT_EQ(linear.unit_of_pixel, bent.unit_of_pixel);
  EXPECT_EQ(linear.field, bent.field);
  EXPECT_EQ(linear.beta, bent.beta);
  // The share of the covariates' part a least-squares fit on [1, x] explains (pixels off the lake).
  auto explained = [](const Country& c) {
    std::vector<Index> land;
    for (Index i = 0; i < c.population.size(); ++i)
      if (!std::isnan(c.covariates[0][i])) land.push_back(i);
    const Index n = static_cast<Index>(land.size()), K = static_cast<Index>(c.covariates.size());
    Matrix X(n, K + 1);
    Vector h(n);
    for (Index r = 0; r < n; ++r) {
      const Index i = land[static_cast<size_t>(r)];
      X(r, 0) = 1;
      for (Index k = 0; k < K; ++k) X(r, k + 1) = c.covariates[static_cast<size_t>(k)][i];
      h[r] = std::log(c.intensity[i]) - c.field[i];
    }
    const Vector residual = h - X * X.colPivHouseholderQr().solve(h);
    return 1 - residual.squaredNorm() / (h.array() - h.mean()).square().sum();
  };
  EXPECT_NEAR(explained(linear), 1.0, 1e-10);
  EXPECT_LT(explained(bent), 0.6);
  // The nonlinear part has mean 0 over the grid and about the linear part's spread.
  EXPECT_NEAR(bent.covariate_effect.mean(), 0.0, 1e-12);
  const auto sd = [](const Vector& v) { return std::sqrt((v.array() - v.mean()).square().mean()); };
  EXPECT_GT(sd(bent.covariate_effect), 0.5 * sd(linear.covariate_effect));
  EXPECT_LT(sd(bent.covariate_effect), 2.0 * sd(linear.covariate_effect));
}

TEST(SwissRoll, BagSizesAndRates) {
  SwissRollOptions o;
  o.bags = 400;
  o.size_mean = 150;
  o.size_sd = 50;
  const SwissRoll r = make_swiss_roll(o);
  r.data.validate();
  Vector sizes(o.bags);
  for (Index a = 0; a < o.bags; ++a) sizes[a] = static_cast<double>(r.data.bag_size(a));
  const double mean = sizes.mean(), sd = std::sqrt((sizes.array() - mean).square().mean());
  EXPECT_NEAR(mean, 150, 8);
  EXPECT_NEAR(sd, 50, 8);
  EXPECT_EQ(r.data.num_inputs(), 18);
  EXPECT_NEAR(r.data.inputs.row(5).mean(), 0, 1e-10);
  EXPECT_GE(r.rate.minCoeff(), 0.75 * M_PI - 1e-12);
  EXPECT_LE(r.rate.maxCoeff(), 2.25 * M_PI + 1e-12);
  // Bag counts are Poisson around the bag's total rate.
  double z = 0;
  for (Index a = 0; a < o.bags; ++a) {
    const double lam = r.rate.segment(r.data.bag_begin(a), r.data.bag_size(a)).sum();
    z += (r.data.response[a] - lam) / std::sqrt(lam);
  }
  EXPECT_NEAR(z / std::sqrt(static_cast<double>(o.bags)), 0, 4);
}

// Each row's smallest and largest value; a block without columns leaves the identities of the
// pooling maximum, +inf and -inf, so another process's values decide.
TEST(Collective, RowRangesOfOneProcess) {
  Matrix rows(2, 3);
  rows << 3, -1, 2, 5, 5, 5;
  const Matrix range = one_process().row_ranges(rows);
  EXPECT_EQ(range, (Matrix(2, 2) << -1, 3, 5, 5).finished());
  const Matrix none = one_process().row_ranges(Matrix(2, 0));
  EXPECT_EQ(none(1, 0), INFINITY);
  EXPECT_EQ(none(1, 1), -INFINITY);
}

TEST(Dataset, ValidateNamesTheProblem) {
  Dataset d = test::random_dataset(3, 2, 4, 2, LikelihoodKind::poisson, 1);
  d.validate();
  d.bag_ids = {"north", "east", "south"};
  Dataset bad = d;
  bad.population[1] = -1;
  EXPECT_THROW(bad.validate(), DataError);
  bad = d;
  bad.response[2] = INFINITY;
  try {
    bad.validate();
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("'south'"), std::string::npos);
  }
  // NaN is a bag without an observation: valid, predicted, and found by observed().
  Dataset unobserved = d;
  unobserved.response[2] = NAN;
  EXPECT_NO_THROW(unobserved.validate());
  EXPECT_TRUE(unobserved.observed(1));
  EXPECT_FALSE(unobserved.observed(2));
  EXPECT_EQ(unobserved.observed_among({0, 2, 1}), (std::vector<Index>{0, 1}));
  bad = d;
  bad.inputs(0, 0) = INFINITY;
  EXPECT_THROW(bad.validate(), DataError);
}

TEST(Dataset, SubsetKeepsBagsInOrder) {
  const Dataset d = test::random_dataset(5, 2, 6, 2, LikelihoodKind::poisson, 2);
  const Dataset s = subset_bags(d, {3, 1});
  EXPECT_EQ(s.num_bags(), 2);
  EXPECT_EQ(s.bag_size(0), d.bag_size(3));
  EXPECT_EQ(s.response[1], d.response[1]);
  EXPECT_TRUE(s.inputs.middleCols(0, s.bag_size(0)) == d.inputs.middleCols(d.bag_begin(3), d.bag_size(3)));
}

TEST(Baselines, ConstantRateReproducesBagTotals) {
  const Dataset d = test::random_dataset(6, 3, 9, 2, LikelihoodKind::poisson, 3);
  const Vector rate = constant_rate(d);
  const Vector w = d.weights();
  for (Index a = 0; a < d.num_bags(); ++a)
    EXPECT_NEAR(w.segment(d.bag_begin(a), d.bag_size(a)).dot(rate.segment(d.bag_begin(a), d.bag_size(a))),
                d.response[a], 1e-9);
}

TEST(Baselines, CollapsedBagsKeepTotalsAndWeightedMeans) {
  const Dataset d = test::random_dataset(5, 2, 8, 3, LikelihoodKind::poisson, 4);
  const Dataset c = collapse_bags(d);
  c.validate();
  ASSERT_EQ(c.num_bags(), 5);
  EXPECT_EQ(c.num_pixels(), 5);
  EXPECT_TRUE(c.bag_weights().isApprox(d.bag_weights(), 1e-12));
  const Vector w = d.weights();
  Vector mean = Vector::Zero(3);
  for (Index i = d.bag_begin(2); i < d.bag_begin(2) + d.bag_size(2); ++i) mean += w[i] * d.inputs.col(i);
  EXPECT_TRUE(c.inputs.col(2).isApprox(mean / w.segment(d.bag_begin(2), d.bag_size(2)).sum(), 1e-12));
}

TEST(Metrics, SmallCases) {
  const Vector y = (Vector(2) << 3, 0).finished(), yhat = (Vector(2) << 2, 1).finished();
  const BagNll nll = bag_poisson_nll(y, yhat);
  EXPECT_NEAR(nll.sum, (2 - 3 * std::log(2.0) + std::log(6.0)) + 1.0, 1e-12);
  EXPECT_NEAR(nll.mean, nll.sum / 2, 1e-12);
  EXPECT_NEAR(bag_log_mse(y, yhat), std::pow(std::log(1.5), 2), 1e-12);
  // Binomial: 3 of 5 at p = 0.4 is C(5, 3) 0.4^3 0.6^2 = 0.2304; 0 of 4 at p = 0 is certain.
  const Vector n = (Vector(2) << 5, 4).finished(), p = (Vector(2) << 0.4, 0.0).finished();
  EXPECT_NEAR(bag_binomial_nll(y, n, p).sum, -std::log(0.2304), 1e-12);
  EXPECT_TRUE(std::isinf(bag_binomial_nll(y, n, (Vector(2) << 0.0, 0.0).finished()).sum));
  EXPECT_NEAR(correlation(y, 2 * y), 1.0, 1e-12);
  const Vector truth = (Vector(4) << 1, 2, 3, 4).finished();
  Matrix lo(4, 1), hi(4, 1);
  lo << 0, 2.5, 2, 5;
  hi << 2, 3, 4, 6;
  EXPECT_NEAR(interval_coverage(truth, lo, hi)[0], 0.5, 1e-12);
  const auto q = central_interval_quantiles({0.9});
  EXPECT_NEAR(q[0], 0.05, 1e-15);
  EXPECT_NEAR(q[1], 0.95, 1e-15);
}

struct FitFixture : ::testing::Test {
  SwissRoll roll = [] {
    SwissRollOptions o;
    o.bags = 30;
    o.size_mean = 20;
    o.size_sd = 10;
    return make_swiss_roll(o);
  }();
  Model model() {
    ModelSpec spec;
    InitOptions init;
    init.inducing = 10;
    return init_model(spec, make_kernel("rbf", "none", 18, 0), roll.data, init);
  }
  std::vector<Index> train{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23};
  std::vector<Index> holdout{24, 25, 26, 27, 28, 29};
};

TEST_F(FitFixture, EarlyStoppingRestoresBestEpoch) {
  Model m = model();
  FitOptions fo;
  fo.epochs = 500;
  fo.learning_rate = 0.2;  // large steps overfit the few bags quickly
  fo.patience = 5;
  std::vector<double> nll;
  fo.on_epoch = [&](const EpochInfo& e) {
    nll.push_back(e.holdout_nll);
    return true;
  };
  const FitResult r = fit(m, roll.data, train, holdout, fo);
  EXPECT_EQ(r.stop_reason, "early_stopping");
  EXPECT_EQ(r.epochs, r.best_epoch + 5);
  EXPECT_DOUBLE_EQ(r.best_holdout_nll, *std::min_element(nll.begin(), nll.end()));
  EXPECT_NEAR(bag_predictive_nll(m, roll.data, holdout, 1), r.best_holdout_nll, 1e-12);
}

TEST_F(FitFixture, ToleranceAndCallbackStop) {
  Model m = model();
  FitOptions fo;
  fo.optimizer = Optimizer::lbfgs;
  fo.epochs = 1000;
  fo.tolerance = 1e-3;
  const FitResult r = fit(m, roll.data, train, {}, fo);
  EXPECT_EQ(r.stop_reason, "converged");
  EXPECT_LT(r.epochs, 1000);
  Model m2 = model();
  fo.on_epoch = [](const EpochInfo& e) { return e.epoch < 3; };
  EXPECT_EQ(fit(m2, roll.data, train, {}, fo).epochs, 3);
}

TEST_F(FitFixture, RejectsBadSettings) {
  Model m = model();
  FitOptions fo;
  fo.epochs = 0;
  EXPECT_THROW(fit(m, roll.data, train, {}, fo), ConfigError);
  fo.epochs = 1;
  EXPECT_THROW(fit(m, roll.data, {}, {}, fo), DataError);
  ModelSpec bad;
  bad.likelihood = LikelihoodKind::exponential;
  bad.link = Link::square;
  EXPECT_THROW(bad.validate(), ConfigError);
}

// A bag without an observation can be predicted, but neither fitted nor scored: the fit names it
// whether it is among the training bags or the holdout, and a fit without it runs.
TEST_F(FitFixture, RefusesBagsWithoutObservation) {
  Dataset data = roll.data;
  data.bag_ids.clear();
  for (Index a = 0; a < data.num_bags(); ++a) data.bag_ids.push_back("unit" + std::to_string(a));
  const Index silent = train.back();
  data.response[silent] = NAN;
  FitOptions fo;
  fo.epochs = 2;
  for (const bool in_holdout : {false, true}) {
    Model m = model();
    std::vector<Index> fitted(train.begin(), train.end() - 1), held;
    (in_holdout ? held : fitted).push_back(silent);
    try {
      fit(m, data, fitted, held, fo);
      FAIL() << "an unobserved bag was accepted";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("'unit" + std::to_string(silent) + "' has no observation"),
                std::string::npos)
          << e.what();
    }
  }
  Model m = model();
  const FitResult r = fit(m, data, data.observed_among(train), {}, fo);
  EXPECT_TRUE(std::isfinite(r.elbo));
}

}  // namespace
}  // namespace vbagg

#include "core/standardize.hpp"

namespace vbagg {
namespace {

TEST(Standardization, TrainingPixelsOnlyAndCoordinatesUntouched) {
  Dataset d = test::random_dataset(4, 3, 6, 3, LikelihoodKind::poisson, 9);
  d.inputs.row(0).array() = d.inputs.row(0).array() * 5 + 10;
  const Standardization s = fit_standardization(d, {0, 2}, 2);
  Matrix X = d.inputs;
  s.apply(X);
  const Dataset train = subset_bags(d, {0, 2});
  Matrix Xt = train.inputs;
  s.apply(Xt);
  EXPECT_NEAR(Xt.row(0).mean(), 0, 1e-12);
  EXPECT_NEAR(std::sqrt(Xt.row(1).array().square().mean()), 1, 1e-12);
  EXPECT_TRUE(X.row(2) == d.inputs.row(2));
  d.inputs.row(1).setConstant(3);
  d.input_names = {"lst", "rain", "x"};
  try {
    fit_standardization(d, {0, 1}, 2);
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("'rain'"), std::string::npos);
  }
}

}  // namespace
}  // namespace vbagg

#include "core/folds.hpp"

namespace vbagg {
namespace {

// Three well-separated groups of centroids make three folds, one per group; every fold is
// non-empty, the folds are deterministic for a seed, and impossible requests are refused.
TEST(SpatialFolds, KMeansBlocksFollowTheGroups) {
  std::mt19937_64 rng(4);
  std::normal_distribution<double> normal;
  const double centres[3][2] = {{0, 0}, {100, 0}, {0, 100}};
  Matrix c(2, 60);
  for (Index a = 0; a < 60; ++a) {
    c(0, a) = centres[a % 3][0] + normal(rng);
    c(1, a) = centres[a % 3][1] + normal(rng);
  }
  const std::vector<Index> fold = spatial_folds(c, 3, 7);
  for (Index a = 3; a < 60; ++a) EXPECT_EQ(fold[a], fold[a % 3]) << a;
  EXPECT_NE(fold[0], fold[1]);
  EXPECT_NE(fold[0], fold[2]);
  EXPECT_NE(fold[1], fold[2]);
  EXPECT_EQ(spatial_folds(c, 3, 7), fold);
  // More folds than groups: every fold still holds units.
  const std::vector<Index> five = spatial_folds(c, 5, 7);
  for (Index f = 0; f < 5; ++f) EXPECT_NE(std::count(five.begin(), five.end(), f), 0) << f;
  EXPECT_THROW(spatial_folds(c, 1, 7), ConfigError);
  EXPECT_THROW(spatial_folds(c, 61, 7), ConfigError);
  EXPECT_THROW(spatial_folds(Matrix::Zero(2, 10), 2, 7), ConfigError);
}

// Blocks placed by some units alone: those units keep the folds they have without the rest,
// however many others there are or where, and every other unit joins its nearest block.
TEST(SpatialFolds, ChosenUnitsPlaceTheBlocks) {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> normal;
  Matrix chosen(2, 40);
  for (Index a = 0; a < 40; ++a) chosen.col(a) << 100 * (a % 4) + normal(rng), 10 * normal(rng);
  // The others crowd one end (k-means on everything would move the blocks towards them), and the
  // chosen units are every third of the 140, not the first.
  Matrix all(2, 140);
  std::vector<Index> placing;
  for (Index a = 0, c = 0; a < 140; ++a) {
    if (a % 3 == 1 && c < 40) {
      placing.push_back(a);
      all.col(a) = chosen.col(c++);
    } else {
      all.col(a) << 300 + 5 * normal(rng), 10 * normal(rng);
    }
  }
  all.col(139) << 2, -1;  // one near the group at x = 0
  const std::vector<Index> own = spatial_folds(chosen, 4, 9);
  const std::vector<Index> fold = spatial_folds(all, 4, 9, placing);
  ASSERT_EQ(fold.size(), 140u);
  for (size_t c = 0; c < placing.size(); ++c) EXPECT_EQ(fold[placing[c]], own[c]) << c;
  for (Index a = 0; a < 139; ++a) {
    if (std::find(placing.begin(), placing.end(), a) == placing.end()) {
      EXPECT_EQ(fold[a], own[3]) << a;
    }
  }
  EXPECT_EQ(fold[139], own[0]);
  EXPECT_NE(spatial_folds(all, 4, 9), fold);
  std::vector<Index> every(140);
  for (Index a = 0; a < 140; ++a) every[a] = a;
  EXPECT_EQ(spatial_folds(all, 4, 9, every), spatial_folds(all, 4, 9));
  EXPECT_THROW(spatial_folds(all, 4, 9, {0, 140}), std::invalid_argument);
  EXPECT_THROW(spatial_folds(all, 4, 9, {0, 1, 2}), ConfigError);  // fewer units than folds
}

}  // namespace
}  // namespace vbagg
