#include "swissroll.hpp"

#include <Eigen/QR>
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace vbagg {

SwissRoll make_swiss_roll(const SwissRollOptions& o) {
  if (o.bags < 1 || o.dim < 3 || !(o.size_mean > 1) || !(o.size_sd * o.size_sd > o.size_mean - 1))
    throw ConfigError("swiss roll: need bags >= 1, dim >= 3, mean > 1 and sd^2 > mean - 1");
  std::mt19937_64 rng(o.seed);
  std::normal_distribution<double> normal;

  // Bag sizes NB(r, 1-q) + 1, drawn as a gamma-Poisson mixture so r need not be an integer.
  const double q = 1 - (o.size_mean - 1) / (o.size_sd * o.size_sd);
  const double r = (o.size_mean - 1) * (1 - q) / q;
  std::gamma_distribution<double> gamma(r, q / (1 - q));
  std::vector<Index> sizes(o.bags);
  for (auto& s : sizes) s = 1 + std::poisson_distribution<Index>(gamma(rng))(rng);
  const Index N = std::accumulate(sizes.begin(), sizes.end(), Index(0));

  std::uniform_real_distribution<double> t_dist(1.5 * M_PI, 4.5 * M_PI), h_dist(0.0, 21.0);
  Vector t(N), h(N);
  for (Index i = 0; i < N; ++i) {
    t[i] = t_dist(rng);
    h[i] = h_dist(rng);
  }
  // Points sorted by their z coordinate (t sin t, as in the paper and scikit-learn's swiss roll;
  // not the height) fill the bags in turn, so bag membership depends on the covariates.
  Vector z(N);
  for (Index i = 0; i < N; ++i) z[i] = t[i] * std::sin(t[i]);
  std::vector<Index> order(N);
  std::iota(order.begin(), order.end(), Index(0));
  std::stable_sort(order.begin(), order.end(), [&](Index a, Index b) { return z[a] < z[b]; });

  Matrix rot(o.dim, o.dim);
  for (Index i = 0; i < rot.size(); ++i) rot.data()[i] = normal(rng);
  const Matrix Qm = Eigen::HouseholderQR<Matrix>(rot).householderQ();

  Matrix X = Matrix::Zero(o.dim, N);
  Vector rate(N);
  for (Index k = 0; k < N; ++k) {
    const Index i = order[k];
    Vector x = Vector::Zero(o.dim);
    x[0] = t[i] * std::cos(t[i]);
    x[1] = h[i];
    x[2] = t[i] * std::sin(t[i]);
    X.col(k) = Qm * x;
    rate[k] = 0.5 * t[i];
  }
  const Vector mu = X.rowwise().mean();
  X.colwise() -= mu;
  const Vector sd = (X.array().square().rowwise().sum() / static_cast<double>(N)).sqrt();
  X = sd.cwiseInverse().asDiagonal() * X;

  SwissRoll out;
  out.rate = rate;
  out.pixel_counts.resize(N);
  for (Index k = 0; k < N; ++k)
    out.pixel_counts[k] = static_cast<double>(std::poisson_distribution<long>(rate[k])(rng));
  Dataset& d = out.data;
  d.inputs = X;
  d.population = Vector::Ones(N);
  d.coverage = Vector::Ones(N);
  d.offsets.assign(1, 0);
  d.response.resize(o.bags);
  Index pos = 0;
  for (Index a = 0; a < o.bags; ++a) {
    const double lam = rate.segment(pos, sizes[a]).sum();
    d.response[a] = static_cast<double>(std::poisson_distribution<long>(lam)(rng));
    pos += sizes[a];
    d.offsets.push_back(pos);
  }
  for (Index j = 0; j < o.dim; ++j) d.input_names.push_back("x" + std::to_string(j));
  return out;
}

}  // namespace vbagg
