#include "malaria_problem.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>

#include "core/init.hpp"
#include "core/kernel.hpp"

namespace vbagg::bench {

namespace {

// Log-uniform sizes in [lo, hi] with the smallest and largest present, adjusted to sum to total.
std::vector<Index> bag_sizes(const ProblemOptions& o, std::mt19937_64& rng) {
  // One bag of each extreme size (raw[0], raw[1] below), the others between.
  if (o.bags < 2 || o.pixels < (o.bags - 1) * o.min_bag + o.max_bag || o.pixels > (o.bags - 1) * o.max_bag + o.min_bag)
    throw std::invalid_argument("pixels cannot be split into bags of the given sizes (one of each extreme size)");
  std::uniform_real_distribution<double> u(std::log(static_cast<double>(o.min_bag)),
                                           std::log(static_cast<double>(o.max_bag)));
  std::vector<double> raw(o.bags);
  for (auto& r : raw) r = std::exp(u(rng));
  raw[0] = static_cast<double>(o.min_bag);
  raw[1] = static_cast<double>(o.max_bag);
  auto sizes_for = [&](double c) {
    std::vector<Index> s(o.bags);
    s[0] = o.min_bag;
    s[1] = o.max_bag;
    for (Index a = 2; a < o.bags; ++a) s[a] = std::clamp<Index>(std::llround(raw[a] * c), o.min_bag, o.max_bag);
    return s;
  };
  auto total = [](const std::vector<Index>& s) { return std::accumulate(s.begin(), s.end(), Index{0}); };
  double lo = 0, hi = 1e6;
  for (int it = 0; it < 200; ++it) {
    const double mid = 0.5 * (lo + hi);
    (total(sizes_for(mid)) < o.pixels ? lo : hi) = mid;
  }
  std::vector<Index> s = sizes_for(lo);
  Index diff = o.pixels - total(s);
  std::uniform_int_distribution<Index> pick(2, o.bags - 1);
  while (diff != 0) {
    const Index a = pick(rng);
    const Index step = diff > 0 ? 1 : -1;
    if (s[a] + step < o.min_bag || s[a] + step > o.max_bag) continue;
    s[a] += step;
    diff -= step;
  }
  return s;
}

}  // namespace

bool read_problem_flag(const std::string& key, const std::string& value, ProblemOptions& o) {
  if (key == "--pixels")
    o.pixels = std::stol(value);
  else if (key == "--bags")
    o.bags = std::stol(value);
  else if (key == "--inducing")
    o.inducing = std::stol(value);
  else
    return false;
  return true;
}

Dataset make_problem(const ProblemOptions& o) {
  std::mt19937_64 rng(o.seed);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> unif(0, 1);
  const std::vector<Index> sizes = bag_sizes(o, rng);
  const Index D = o.covariates + 2;
  // Smooth covariate fields sin(w . s + phi) with wavelengths of 200-1000 km, plus pixel noise.
  Matrix freq(o.covariates, 2);
  Vector phase(o.covariates);
  for (Index d = 0; d < o.covariates; ++d) {
    const double wavelength = 200 + 800 * unif(rng), angle = 2 * M_PI * unif(rng);
    freq(d, 0) = 2 * M_PI / wavelength * std::cos(angle);
    freq(d, 1) = 2 * M_PI / wavelength * std::sin(angle);
    phase[d] = 2 * M_PI * unif(rng);
  }
  Vector beta = Vector::Zero(o.covariates);
  for (Index d = 0; d < std::min<Index>(6, o.covariates); ++d) beta[d] = 0.4 * normal(rng);

  const Index side = static_cast<Index>(std::ceil(std::sqrt(static_cast<double>(o.bags))));
  Matrix X(D, o.pixels);
  Vector population(o.pixels);
  std::vector<Index> bag_of(o.pixels);
  Vector y(o.bags);
  Index i = 0;
  for (Index a = 0; a < o.bags; ++a) {
    const double cx = 60.0 * static_cast<double>(a % side), cy = 60.0 * static_cast<double>(a / side);
    const Index width = static_cast<Index>(std::ceil(std::sqrt(static_cast<double>(sizes[a]))));
    double expected = 0;
    for (Index k = 0; k < sizes[a]; ++k, ++i) {
      const double sx = cx + static_cast<double>(k % width) - 0.5 * width;
      const double sy = cy + static_cast<double>(k / width) - 0.5 * width;
      for (Index d = 0; d < o.covariates; ++d)
        X(d, i) = std::sqrt(2.0) * 0.8 * std::sin(freq(d, 0) * sx + freq(d, 1) * sy + phase[d]) + 0.6 * normal(rng);
      X(o.covariates, i) = sx;
      X(o.covariates + 1, i) = sy;
      population[i] = std::exp(std::log(50.0) + normal(rng));
      bag_of[i] = a;
      const double log_rate =
          -4.0 + beta.dot(X.col(i).head(o.covariates)) + 0.5 * std::sin(sx / 200.0) * std::cos(sy / 250.0);
      expected += population[i] * std::exp(log_rate);
    }
    y[a] = static_cast<double>(std::poisson_distribution<long>(expected)(rng));
  }
  return make_dataset(X, population, bag_of, y);
}

Model make_problem_model(const Dataset& data, Index covariates, Index inducing, const std::string& link,
                         const std::string& covariance, unsigned long long seed, const std::string& covariate_kernel) {
  ModelSpec spec;
  spec.link = parse_link(link);
  spec.covariance = parse_covariance_mode(covariance);
  const Kernel kernel = make_kernel(covariate_kernel, "matern32", covariates, data.num_inputs() - covariates);
  InitOptions init;
  init.inducing = inducing;
  init.seed = seed;
  Model model = init_model(spec, kernel, data, init);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  const Index M = model.num_inducing();
  for (Index k = 0; k < M; ++k) model.q_mean[k] = 0.1 * normal(rng);
  for (Index c = 0; c < M; ++c)
    for (Index r = c; r < M; ++r) model.q_chol(r, c) = (r == c ? 0.8 : 0.0) + 0.01 * normal(rng);
  return model;
}

}  // namespace vbagg::bench
