// Moments, quantiles and exceedance probabilities of lambda = Psi(f) against Monte Carlo.
#include "core/predict.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "core/link.hpp"
#include "test_util.hpp"

namespace vbagg {
namespace {

struct Sample {
  std::vector<double> lam;
  double mean = 0, sd = 0;
};

Sample draw(Link link, double m, double s2, int n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(m, std::sqrt(s2));
  Sample s;
  s.lam.resize(n);
  double sum = 0, sum2 = 0;
  for (auto& l : s.lam) {
    const double f = normal(rng);
    l = link == Link::exp ? std::exp(f) : link == Link::square ? f * f : f;
    sum += l;
    sum2 += l * l;
  }
  s.mean = sum / n;
  s.sd = std::sqrt(sum2 / n - s.mean * s.mean);
  std::sort(s.lam.begin(), s.lam.end());
  return s;
}

class PredictMonteCarlo : public ::testing::TestWithParam<std::tuple<Link, double, double>> {};

TEST_P(PredictMonteCarlo, MatchesSamples) {
  const auto [link, m, s2] = GetParam();
  const int n = 2000000;
  const Sample s = draw(link, m, s2, n, 99);
  const double mean = intensity_mean(link, m, s2), sd = std::sqrt(intensity_variance(link, m, s2));
  // Monte Carlo standard errors of the mean and (roughly) of the sd.
  EXPECT_NEAR(mean, s.mean, 5 * sd / std::sqrt(n));
  EXPECT_NEAR(sd, s.sd, 0.01 * sd);
  for (double q : {0.025, 0.1, 0.5, 0.9, 0.975}) {
    const double analytic = intensity_quantile(link, m, s2, q);
    // The analytic quantile must sit at level q of the sample: count how many samples fall below.
    const double frac = static_cast<double>(std::lower_bound(s.lam.begin(), s.lam.end(), analytic) - s.lam.begin()) / n;
    EXPECT_NEAR(frac, q, 5 * std::sqrt(q * (1 - q) / n)) << "q=" << q;
    // P(lambda > quantile_q) = 1 - q.
    EXPECT_NEAR(intensity_exceedance(link, m, s2, analytic), 1 - q, 1e-9) << "q=" << q;
  }
  for (double t : {0.5 * mean, mean, 2 * mean}) {
    const double frac = static_cast<double>(s.lam.end() - std::upper_bound(s.lam.begin(), s.lam.end(), t)) / n;
    const double p = intensity_exceedance(link, m, s2, t);
    EXPECT_NEAR(p, frac, 5 * std::sqrt(std::max(p * (1 - p), 1e-6) / n)) << "t=" << t;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Links, PredictMonteCarlo,
    ::testing::Values(std::make_tuple(Link::exp, 0.3, 0.5), std::make_tuple(Link::exp, -2.0, 0.05),
                      std::make_tuple(Link::square, 1.5, 0.4), std::make_tuple(Link::square, 0.1, 1.0),
                      std::make_tuple(Link::square, -0.7, 0.2), std::make_tuple(Link::identity, 2.0, 0.3)),
    [](const auto& info) { return to_string(std::get<0>(info.param)) + "_" + std::to_string(info.index); });

// E[Psi'(f)] is d E[Psi(f)] / d m (Stein's lemma): every link's against central differences of its
// mean, the quadrature default (logit) and the closed forms alike.
TEST(Predict, MeanSlopeIsTheMeansDerivative) {
  const double h = 1e-5;
  for (const LinkFunction* link : link_registry())
    for (double m : {-2.0, 0.3, 1.5})
      for (double s2 : {0.0, 0.2, 1.5}) {
        const double fd = (link->mean(m + h, s2) - link->mean(m - h, s2)) / (2 * h);
        EXPECT_NEAR(link->mean_slope(m, s2), fd, 1e-7 * (1 + std::abs(fd))) << link->name() << " " << m << " " << s2;
      }
}

TEST(Predict, SquareQuantileRootIsAccurateInTheTails) {
  // F(quantile(q)) = q to near machine precision, including extreme levels.
  for (double q : {1e-6, 0.01, 0.5, 0.99, 1 - 1e-6}) {
    const double t = intensity_quantile(Link::square, 0.4, 0.3, q);
    EXPECT_NEAR(1 - intensity_exceedance(Link::square, 0.4, 0.3, t), q, 1e-10 * std::max(1.0, 1 / q) * q + 1e-12);
  }
}

TEST(Predict, RejectsLevelsOutsideUnitInterval) {
  EXPECT_THROW(intensity_quantile(Link::exp, 0, 1, 1.0), ConfigError);
  EXPECT_THROW(intensity_quantile(Link::exp, 0, 1, 0.0), ConfigError);
}

TEST(Predict, BlocksAndThreadsDoNotChangeResults) {
  const Index D = 3;
  const Dataset data = test::random_dataset(10, 50, 80, D, LikelihoodKind::poisson, 4);
  ModelSpec spec;
  const Model model = test::random_model(spec, make_kernel("ard", "none", D, 0), 8, D, 5);
  PredictOptions a, b;
  a.threads = 1;
  a.block = 100000;
  b.threads = 2;
  b.block = 37;
  a.quantiles = b.quantiles = {0.025, 0.975};
  a.exceedance = b.exceedance = {1.0};
  const Prediction pa = predict(model, data.inputs, a), pb = predict(model, data.inputs, b);
  EXPECT_LT((pa.latent_mean - pb.latent_mean).cwiseAbs().maxCoeff(), 1e-12);
  EXPECT_LT((pa.latent_var - pb.latent_var).cwiseAbs().maxCoeff(), 1e-12);
  EXPECT_TRUE(pa.quantiles.isApprox(pb.quantiles, 1e-12));
  EXPECT_TRUE((pa.quantiles.col(0).array() < pa.mean.array()).all());
  EXPECT_TRUE((pa.quantiles.col(1).array() > pa.mean.array()).all());
}

}  // namespace
}  // namespace vbagg

namespace vbagg {
namespace {

// sum_i w_i E[lambda_i] under the exp link, from the latent marginals.
double expected_total(const Model& model, const Matrix& X, const Vector& w) {
  Vector m, v;
  predict_latent(model, X, m, v, 1);
  double total = 0;
  for (Index i = 0; i < m.size(); ++i) total += w[i] * intensity_mean(Link::exp, m[i], v[i]);
  return total;
}

// Expects the draws' mean within 5 standard errors of `expect`; returns their sd.
double expect_mean_near(const Vector& draws, double expect) {
  const double mean = draws.mean(), sd = std::sqrt((draws.array() - mean).square().mean());
  EXPECT_NEAR(mean, expect, 5 * sd / std::sqrt(static_cast<double>(draws.size())));
  return sd;
}

TEST(Predict, BagPredictiveDrawsMatchMoments) {
  // Mean of the draws = sum_i w_i E[lambda_i] (Poisson noise and the joint covariance of f do not
  // move the mean); the spread exceeds Poisson's alone because the latent field is uncertain.
  const Index D = 2;
  const Dataset data = test::random_dataset(1, 30, 30, D, LikelihoodKind::poisson, 3);
  ModelSpec spec;
  Model model = test::random_model(spec, make_kernel("rbf", "none", D, 0), 6, D, 4);
  model.mean = 1.0;
  const Vector w = data.weights();
  const Vector draws = bag_predictive_draws(model, data.inputs, w, 40000, 9);
  const double expect = expected_total(model, data.inputs, w);
  const double sd = expect_mean_near(draws, expect);
  EXPECT_GT(sd, 1.2 * std::sqrt(expect));
  // Same seed, same draws.
  EXPECT_TRUE(draws == bag_predictive_draws(model, data.inputs, w, 40000, 9));
}

// A bag of several pixel blocks: the same draws on one thread or two, and their mean is the
// expected total.
TEST(Predict, BagPredictiveDrawsDoNotDependOnThreads) {
  const Index D = 2;
  const Dataset data = test::random_dataset(1, 2500, 2500, D, LikelihoodKind::poisson, 4);
  ModelSpec spec;
  Model model = test::random_model(spec, make_kernel("rbf", "none", D, 0), 6, D, 5);
  const Vector w = data.weights() / 50.0;  // totals in the hundreds
  const Vector one = bag_predictive_draws(model, data.inputs, w, 4000, 3, {}, 0, 1);
  EXPECT_TRUE(one == bag_predictive_draws(model, data.inputs, w, 4000, 3, {}, 0, 2));
  expect_mean_near(one, expected_total(model, data.inputs, w));
  EXPECT_FALSE(one == bag_predictive_draws(model, data.inputs, w, 4000, 4, {}, 0, 2));
}

// The intervals predict gives, as draw_coverage takes them: a row per pixel, a column per level.
struct Intervals {
  Matrix lo, hi;
};
Intervals central_intervals(const Model& model, const Matrix& X, const std::vector<double>& levels) {
  PredictOptions o;
  for (double l : levels) {
    o.quantiles.push_back((1 - l) / 2);
    o.quantiles.push_back((1 + l) / 2);
  }
  const Prediction p = predict(model, X, o);
  Intervals r{Matrix(X.cols(), static_cast<Index>(levels.size())), Matrix(X.cols(), static_cast<Index>(levels.size()))};
  for (Index l = 0; l < static_cast<Index>(levels.size()); ++l) {
    r.lo.col(l) = p.quantiles.col(2 * l);
    r.hi.col(l) = p.quantiles.col(2 * l + 1);
  }
  return r;
}

// One pixel: each joint draw is inside or not, so over many draws the fraction inside is the
// level itself when the draws' marginal is the one predict's quantiles come from.
TEST(Predict, DrawCoverageOfOnePixelIsTheLevel) {
  const Index D = 2;
  const Dataset data = test::random_dataset(1, 5, 5, D, LikelihoodKind::poisson, 6);
  const std::vector<double> levels = {0.5, 0.8, 0.95};
  for (Link link : {Link::exp, Link::square}) {
    ModelSpec spec;
    spec.link = link;
    const Model model = test::random_model(spec, make_kernel("rbf", "none", D, 0), 6, D, 7);
    const Matrix X = data.inputs.leftCols(1);
    const Intervals iv = central_intervals(model, X, levels);
    const int S = 20000;
    const Matrix c = draw_coverage(model, X, iv.lo, iv.hi, S, 11);
    for (size_t l = 0; l < levels.size(); ++l) {
      const double p = levels[l];
      EXPECT_NEAR(c.col(static_cast<Index>(l)).mean(), p, 4 * std::sqrt(p * (1 - p) / S)) << "level " << p;
    }
  }
}

// Many pixels: the fraction inside is the level on average over draws, but one draw's fraction
// strays further than independent pixels' would (they share the field's errors through z), and
// the result does not depend on the threads.
TEST(Predict, DrawCoverageOfAMapIsNominalOnAverageAndSpreadByTheSharedField) {
  const Index D = 2;
  const Dataset data = test::random_dataset(1, 2500, 2500, D, LikelihoodKind::poisson, 8);
  ModelSpec spec;
  const Model model = test::random_model(spec, make_kernel("rbf", "none", D, 0), 6, D, 9);
  const std::vector<double> levels = {0.5, 0.9};
  const Intervals iv = central_intervals(model, data.inputs, levels);
  const int S = 2000;
  const Matrix c = draw_coverage(model, data.inputs, iv.lo, iv.hi, S, 12, 1);
  EXPECT_TRUE(c == draw_coverage(model, data.inputs, iv.lo, iv.hi, S, 12, 2));
  const double n = static_cast<double>(data.inputs.cols());
  for (Index l = 0; l < 2; ++l) {
    const double p = levels[static_cast<size_t>(l)], mean = c.col(l).mean();
    const double sd = std::sqrt((c.col(l).array() - mean).square().mean());
    EXPECT_NEAR(mean, p, 4 * sd / std::sqrt(static_cast<double>(S))) << "level " << p;
    EXPECT_GT(sd, 3 * std::sqrt(p * (1 - p) / n)) << "level " << p;
  }
}

// Bags of several sizes whose pixels cross the draw blocks' edges: each bag's joint draws have
// its own expected total as their mean (so every pixel's draw reaches its own bag), and the same
// draws come on one thread or two.
TEST(Predict, JointBagDrawsKeepEachBagsMean) {
  const Index D = 2;
  const Dataset data = test::random_dataset(3, 600, 900, D, LikelihoodKind::poisson, 13);
  ModelSpec spec;
  const Model model = test::random_model(spec, make_kernel("rbf", "none", D, 0), 6, D, 14);
  const std::vector<Index> bags = {2, 0, 1};
  const std::vector<UnitEffectMoments> none(3);
  const Matrix y = joint_bag_draws(model, data, bags, none, 4000, 21, 1);
  EXPECT_TRUE(y == joint_bag_draws(model, data, bags, none, 4000, 21, 2));
  for (Index k = 0; k < 3; ++k) {
    const Index a = bags[static_cast<size_t>(k)], b = data.bag_begin(a), n = data.bag_size(a);
    expect_mean_near(y.col(k), expected_total(model, data.inputs.middleCols(b, n), data.weights().segment(b, n)));
  }
}

// One bag of 30 pixels under a model with a random q, whose draws the tests below repeat.
struct OneBag {
  Dataset data = test::random_dataset(1, 30, 30, 2, LikelihoodKind::poisson, 3);
  Model model = [] {
    Model m = test::random_model(ModelSpec(), make_kernel("rbf", "none", 2, 0), 6, 2, 4);
    m.mean = 1.0;
    return m;
  }();
};

double sample_correlation(const Vector& a, const Vector& b) {
  const Vector x = a.array() - a.mean(), z = b.array() - b.mean();
  return x.dot(z) / std::sqrt(x.squaredNorm() * z.squaredNorm());
}

// The same bag listed twice: its two columns share the field's draw z (independent draws of it,
// as bag_predictive_draws with two seeds gives, are uncorrelated), and a unit effect of sd 0.5
// spreads each column as a lognormal factor does.
TEST(Predict, JointBagDrawsShareTheFieldAndDrawEachUnitEffect) {
  const OneBag one;
  const Dataset& data = one.data;
  const Model& model = one.model;
  const int S = 4000;
  const Matrix y = joint_bag_draws(model, data, {0, 0}, std::vector<UnitEffectMoments>(2), S, 5);
  EXPECT_GT(sample_correlation(y.col(0), y.col(1)), 5 / std::sqrt(static_cast<double>(S)));
  const Vector w = data.weights();
  EXPECT_LT(std::abs(sample_correlation(bag_predictive_draws(model, data.inputs, w, S, 5),
                                        bag_predictive_draws(model, data.inputs, w, S, 6))),
            5 / std::sqrt(static_cast<double>(S)));
  // With u ~ N(-0.125, 0.25) on each bag: the mean stays (E[e^u] = 1), the spread grows, and the
  // two columns' effects are their own (the correlation falls).
  const std::vector<UnitEffectMoments> effect(2, UnitEffectMoments{-0.125, 0.25});
  const Matrix yu = joint_bag_draws(model, data, {0, 0}, effect, S, 5);
  const double sd = expect_mean_near(yu.col(0), expected_total(model, data.inputs, w));
  EXPECT_GT(sd, 1.2 * std::sqrt((y.col(0).array() - y.col(0).mean()).square().mean()));
  EXPECT_LT(sample_correlation(yu.col(0), yu.col(1)), sample_correlation(y.col(0), y.col(1)));
}

// Bags that share a unit's effect (effect_of, as a unit's periods do) take one draw of it: their
// columns move together far more than those of bags with effects of their own (whose correlation
// is the field's alone), and each column's spread is the same either way.
TEST(Predict, JointBagDrawsShareOneDrawOfAUnitsEffect) {
  const OneBag one;
  const Dataset& data = one.data;
  const Model& model = one.model;
  const int S = 4000;
  const std::vector<UnitEffectMoments> effect(3, UnitEffectMoments{-0.25, 0.5});
  const std::vector<Index> bags = {0, 0, 0}, effect_of = {0, 0, 1};
  const Matrix shared = joint_bag_draws(model, data, bags, effect, S, 5, 1, effect_of);
  const Matrix own = joint_bag_draws(model, data, bags, effect, S, 5, 1);
  auto log_corr = [](const Vector& a, const Vector& b) {
    return sample_correlation(a.array().log1p().matrix(), b.array().log1p().matrix());
  };
  const double noise = 5 / std::sqrt(static_cast<double>(S));
  EXPECT_GT(log_corr(shared.col(0), shared.col(1)), 0.9);
  EXPECT_LT(log_corr(own.col(0), own.col(1)), 0.5);
  EXPECT_NEAR(log_corr(shared.col(0), shared.col(2)), log_corr(own.col(0), own.col(1)), noise);
  EXPECT_NEAR(test::log1p_sd(shared.col(0)) / test::log1p_sd(own.col(0)), 1.0, 0.05);
  EXPECT_THROW(joint_bag_draws(model, data, bags, effect, S, 5, 1, {0, 1}), std::invalid_argument);
  EXPECT_THROW(joint_bag_draws(model, data, bags, effect, S, 5, 1, {0, -1, 1}), std::invalid_argument);
  EXPECT_THROW(joint_bag_draws(model, data, bags, effect, S, 5, 1, {0, 3, 1}), std::invalid_argument);
}

// For the identity link the covariances' share is all of a bag's variance beyond its pixels' own,
// so sum_i w_i^2 v_i + cross is the variance of the joint draws of a Normal bag model with next to
// no observation noise (sum aggregation: eta = sum_i w_i f_i). Bags of 400-900 pixels span several
// blocks of the pass, whose sums do not depend on the threads; a bag of one pixel has none.
TEST(Predict, BagCrossCovariancesGiveTheDrawsVariance) {
  const Index D = 2;
  const Dataset data = test::random_dataset(3, 400, 900, D, LikelihoodKind::normal, 7);
  const ModelSpec spec = test::spec_of(LikelihoodKind::normal, Link::identity, CovarianceMode::nystrom);
  Model model = test::random_model(spec, make_kernel("rbf", "none", D, 0), 8, D, 8);
  model.likelihood_params = Vector::Constant(1, -40.0);
  const LatentField field(model);
  const Vector w = data.weights();
  std::vector<Index> start{0};
  for (Index a = 0; a < data.num_bags(); ++a) start.push_back(start.back() + data.bag_size(a));
  const Vector cross = bag_cross_covariances(field, data.inputs, w, start, 1);
  EXPECT_TRUE(cross == bag_cross_covariances(field, data.inputs, w, start, 2));
  EXPECT_THROW(bag_factor_sums(field, data.inputs, w, {0, 5}, 1), std::invalid_argument);
  EXPECT_THROW(bag_factor_sums(field, data.inputs, w.head(10), start, 1), std::invalid_argument);
  Vector m, v;
  predict_latent(field, data.inputs, m, v, 1);
  const int S = 20000;
  for (Index a = 0; a < data.num_bags(); ++a) {
    const Index b = data.bag_begin(a), n = data.bag_size(a);
    const Vector draws = bag_predictive_draws(field, data.inputs.middleCols(b, n), w.segment(b, n), S, 11 + a);
    const double own = w.segment(b, n).array().square().matrix().dot(v.segment(b, n));
    const double var = (draws.array() - draws.mean()).square().sum() / (S - 1);
    // The sample variance's relative sd is sqrt(2 / S) = 1 %; the pixels' own variances are a
    // small part of it, so leaving out the covariances would miss by far more than 5 %.
    EXPECT_NEAR(var, own + cross[a], 0.05 * var) << "bag " << a;
    EXPECT_LT(own, 0.5 * var) << "bag " << a;
  }
  const double one = bag_cross_covariances(field, data.inputs.leftCols(1), w.head(1), {0, 1})[0];
  EXPECT_NEAR(one, 0.0, 1e-12 * w[0] * w[0] * v[0]);
}

}  // namespace
}  // namespace vbagg
