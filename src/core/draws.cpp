// Joint draws from q: of bags' observations, of their totals, and of maps for their coverage
// (predict.hpp).
#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>

#include "counter_rng.hpp"
#include "dataset.hpp"
#include "denormals.hpp"
#include "likelihood.hpp"
#include "link.hpp"
#include "point_spread.hpp"
#include "predict.hpp"

namespace vbagg {

namespace {

constexpr Index kDrawBlock = 1024;

// The low-rank factors of q's covariance at the pixels X in the nystrom form that draws and bag
// terms take: Cov(f_i, f_j) = t_i . t_j + a_i . a_j off the diagonal, with T = B K (K: the kernel
// rows, which the caller's latent pass over X left in scratch) and A the point estimates' spread
// (none: 0 rows). `m` is the model's latent mean at X, which the spread's directions start from.
void covariance_factors(const Posterior& post, const SpreadShifts& shifts, const Eigen::Ref<const Matrix>& X,
                        const Vector& m, Matrix& T, Matrix& A, LatentScratch& scratch) {
  T.noalias() = post.B * scratch.K.view();
  if (shifts.directions() > 0)
    shifts.into(X, m, A, scratch);
  else
    A.resize(0, X.cols());
}

// Joint draws of the latent f from q: f = m + T^T z + r e with z ~ N(0, I) over q's entries,
// shared by every pixel, and e independent per pixel; with the point estimates' spread
// (Model::spread) also + a^T eta, eta ~ N(0, I) over its directions, shared by every pixel. All are
// counter-based normals keyed by the seed and their place (z by entry, e by pixel, eta by
// direction), so blocks of pixels go to any thread and the draws do not depend on the threads.
class LatentDraws {
 public:
  struct Scratch {
    LatentScratch latent;
    Vector m, s2, e;
    Matrix T, A;
  };

  LatentDraws(const LatentField& field, int samples, unsigned long long seed)
      : model_(field.model()),
        post_(field.posterior()),
        shifts_(field.shifts()),
        samples_(samples),
        seed_(seed),
        Zeta_(shared_draw_normals(field, samples, seed)) {}

  static Index blocks(Index n) { return (n + kDrawBlock - 1) / kDrawBlock; }

  // The draws' shared normals (shared_draw_normals), a draw per row.
  const Matrix& zeta() const { return Zeta_; }

  // Calls use(b, begin, Ft) for each block b of kDrawBlock pixels of X (the last may be shorter),
  // which starts at pixel `begin`, with Ft its draws (block below), the blocks shared over `threads`.
  template <class Use>
  void over_blocks(const Matrix& X, int threads, Use&& use) const {
    const Index n = X.cols(), count = blocks(n);
#pragma omp parallel num_threads(std::max(1, threads)) if (threads > 1 && count > 1)
    {
      const FlushDenormals flush;
      Scratch scratch;
      Matrix Ft;
#pragma omp for schedule(dynamic, 1)
      for (Index b = 0; b < count; ++b) {
        const Index begin = b * kDrawBlock, len = std::min(kDrawBlock, n - begin);
        block(X.middleCols(begin, len), begin, Ft, scratch);
        use(b, begin, Ft);
      }
    }
  }

  // Ft (samples x len): the draws at the pixels X (len columns) that start at place `begin` of
  // the whole set, pixel i's draws in column i.
  void block(const Eigen::Ref<const Matrix>& X, Index begin, Matrix& Ft, Scratch& s) const {
    const Index len = X.cols();
    s.m.resize(len);
    s.s2.resize(len);
    latent_marginals_into(model_, post_, X, s.m, s.s2, s.latent);
    Ft.resize(samples_, len);
    // A MAP estimate has no latent uncertainty.
    if (model_.spec.map_estimate) {
      Ft.rowwise() = s.m.transpose();
      return;
    }
    covariance_factors(post_, shifts_, X, s.m, s.T, s.A, s.latent);
    const Vector resid_sd = (s.s2 - s.T.colwise().squaredNorm().transpose()).cwiseMax(0.0).cwiseSqrt();
    Ft.noalias() = Zeta_.leftCols(s.T.rows()) * s.T;  // (T^T z)^T
    if (shifts_.directions() > 0) Ft.noalias() += Zeta_.rightCols(s.A.rows()) * s.A;
    s.e.resize(samples_);
    for (Index i = 0; i < len; ++i) {
      Ft.col(i).array() += s.m[i];
      if (resid_sd[i] > 0) {
        stream_normals(counter_stream(seed_, 1, static_cast<std::uint64_t>(begin + i)), samples_, s.e.data());
        Ft.col(i) += resid_sd[i] * s.e;
      }
    }
  }

 private:
  const Model& model_;
  const Posterior& post_;
  const SpreadShifts& shifts_;
  const int samples_;
  const unsigned long long seed_;
  Matrix Zeta_;  // (z, eta)^T: a draw per row
};

}  // namespace

Matrix shared_draw_normals(const LatentField& field, int samples, unsigned long long seed) {
  const Index Q = field.model().num_q(), K = field.shifts().directions();
  Matrix zeta(samples, Q + K);
  for (Index k = 0; k < Q; ++k)
    stream_normals(counter_stream(seed, 0, static_cast<std::uint64_t>(k)), samples, &zeta(0, k));
  for (Index k = 0; k < K; ++k)
    stream_normals(counter_stream(seed, 3, static_cast<std::uint64_t>(k)), samples, &zeta(0, Q + k));
  return zeta;
}

Vector bag_predictive_draws(const Model& model, const Matrix& X, const Vector& w, int samples, unsigned long long seed,
                            const UnitEffectMoments& unit, double trials, int threads) {
  return bag_predictive_draws(LatentField(model), X, w, samples, seed, unit, trials, threads);
}

namespace {

// loading . zeta_s of each draw s of `latent`, for a unit effect whose mean moves with the field.
Vector effect_shifts(const LatentDraws& latent, const UnitEffectMoments& unit) {
  if (unit.loading.size() != latent.zeta().cols())
    throw std::invalid_argument("a unit effect's loading has " + std::to_string(unit.loading.size()) +
                                " entries where the field's draws have " + std::to_string(latent.zeta().cols()));
  return latent.zeta() * unit.loading;
}

// The bag's eta = sum_i w_i Psi(f_i) (w aggregated) under each of `latent`'s draws. The blocks'
// partial sums are added in block order, so the total is the same for any threads.
Vector draw_totals(const LatentDraws& latent, const LinkFunction& link, const Matrix& X, const Vector& w, int samples,
                   int threads) {
  const Index blocks = LatentDraws::blocks(X.cols());
  Matrix partial = Matrix::Zero(samples, blocks);
  latent.over_blocks(X, threads, [&](Index b, Index begin, const Matrix& Ft) {
    auto eta = partial.col(b);
    for (Index i = 0; i < Ft.cols(); ++i)
      for (int s = 0; s < samples; ++s) eta[s] += w[begin + i] * link.psi(Ft(s, i));
  });
  Vector eta = Vector::Zero(samples);
  for (Index b = 0; b < blocks; ++b) eta += partial.col(b);
  return eta;
}

}  // namespace

Vector bag_total_draws(const LatentField& field, const Matrix& X, const Vector& w_in, int samples,
                       unsigned long long seed, int threads) {
  const Model& model = field.model();
  const Vector w = likelihood_of(model.spec.likelihood).aggregate_weights(model.spec, w_in);
  return draw_totals(LatentDraws(field, samples, seed), link_of(model.spec.link), X, w, samples, threads);
}

Vector bag_predictive_draws(const LatentField& field, const Matrix& X, const Vector& w_in, int samples,
                            unsigned long long seed, const UnitEffectMoments& unit, double trials, int threads) {
  const Model& model = field.model();
  const BagLikelihood& lik = likelihood_of(model.spec.likelihood);
  const Vector w = lik.aggregate_weights(model.spec, w_in);
  const LatentDraws latent(field, samples, seed);
  Vector eta = draw_totals(latent, link_of(model.spec.link), X, w, samples, threads);
  // The unit effect moves the bag's linear predictor (a count's log rate: e^u times the rate), one u
  // per draw, its mean with the draw's field where it was conditioned on one; then the observation
  // noise.
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  const bool moves = unit.loading.size() > 0 && !model.spec.map_estimate;
  const Vector along = moves ? effect_shifts(latent, unit) : Vector();
  if (unit.var > 0 || unit.mean != 0)
    for (int s = 0; s < samples; ++s) {
      const double mean = moves ? unit.mean + unit.shift + along[s] : unit.mean;
      eta[s] = lik.aggregate_with_unit_effect(eta[s], mean + std::sqrt(unit.var) * normal(rng));
    }
  Vector draws(samples);
  for (int s = 0; s < samples; ++s) draws[s] = lik.draw(model, eta[s], trials, w, rng);
  return draws;
}

Matrix bag_factor_sums(const LatentField& field, const Matrix& X, const Vector& g, const std::vector<Index>& start,
                       int threads) {
  const Model& model = field.model();
  const Index bags = static_cast<Index>(start.size()) - 1, N = X.cols();
  if (start.empty() || start.front() != 0 || start.back() != N || g.size() != N ||
      !std::is_sorted(start.begin(), start.end()))
    throw std::invalid_argument("bag_factor_sums: start must rise from 0 to the pixels of X, with a weight per pixel");
  const Index rank = (model.spec.map_estimate ? 0 : field.posterior().B.rows()) + field.shifts().directions();
  if (bags <= 0 || rank == 0) return Matrix::Zero(rank + 1, std::max<Index>(bags, 0));
  std::vector<Index> bag_of(static_cast<size_t>(N));
  for (Index k = 0; k < bags; ++k)
    std::fill(bag_of.begin() + start[static_cast<size_t>(k)], bag_of.begin() + start[static_cast<size_t>(k) + 1], k);
  // Each block's sums for the run of bags it touches (from first[b]), added in block order, so the
  // result is the same for any number of threads.
  const Index blocks = (N + kDrawBlock - 1) / kDrawBlock;
  std::vector<Matrix> part(static_cast<size_t>(blocks));
  std::vector<Index> first(static_cast<size_t>(blocks), 0);
#pragma omp parallel num_threads(std::max(1, threads)) if (threads > 1 && blocks > 1)
  {
    const FlushDenormals flush;
    LatentScratch scratch;
    Vector m;
    Matrix T, A, F;
#pragma omp for schedule(dynamic, 1)
    for (Index b = 0; b < blocks; ++b) {
      const Index begin = b * kDrawBlock, len = std::min(kDrawBlock, N - begin);
      const auto Xb = X.middleCols(begin, len);
      m.resize(len);
      latent_means_into(model, field.posterior(), Xb, m, scratch);
      covariance_factors(field.posterior(), field.shifts(), Xb, m, T, A, scratch);
      F.resize(rank, len);
      if (!model.spec.map_estimate) F.topRows(T.rows()) = T;
      F.bottomRows(A.rows()) = A;
      const Index k0 = bag_of[static_cast<size_t>(begin)], k1 = bag_of[static_cast<size_t>(begin + len - 1)];
      first[static_cast<size_t>(b)] = k0;
      Matrix& sums = part[static_cast<size_t>(b)];
      sums.setZero(rank + 1, k1 - k0 + 1);
      for (Index i = 0; i < len; ++i) {
        const double gi = g[begin + i];
        auto col = sums.col(bag_of[static_cast<size_t>(begin + i)] - k0);
        col.head(rank) += gi * F.col(i);
        col[rank] += gi * gi * F.col(i).squaredNorm();
      }
    }
  }
  Matrix sums = Matrix::Zero(rank + 1, bags);
  for (Index b = 0; b < blocks; ++b)
    sums.middleCols(first[static_cast<size_t>(b)], part[static_cast<size_t>(b)].cols()) += part[static_cast<size_t>(b)];
  return sums;
}

Vector bag_cross_covariances(const LatentField& field, const Matrix& X, const Vector& g,
                             const std::vector<Index>& start, int threads) {
  return cross_covariances_of(bag_factor_sums(field, X, g, start, threads));
}

Vector cross_covariances_of(const Matrix& sums) {
  const Index rank = sums.rows() - 1;
  return sums.topRows(rank).colwise().squaredNorm().transpose() - sums.row(rank).transpose();
}

Matrix joint_bag_draws(const Model& model, const Dataset& data, const std::vector<Index>& bags,
                       const std::vector<UnitEffectMoments>& units, int samples, unsigned long long seed, int threads,
                       const std::vector<Index>& effect_of) {
  if (!effect_of.empty() && (effect_of.size() != bags.size() ||
                             std::any_of(effect_of.begin(), effect_of.end(),
                                         [&](Index e) { return e < 0 || e >= static_cast<Index>(bags.size()); })))
    throw std::invalid_argument("joint_bag_draws: effect_of must give every bag an effect in 0 .. bags - 1");
  const BagLikelihood& lik = likelihood_of(model.spec.likelihood);
  const LinkFunction& link = link_of(model.spec.link);
  const Index n = static_cast<Index>(bags.size());
  // The bags' pixels one after another, with each bag's weights and where it starts.
  std::vector<Index> start(static_cast<size_t>(n) + 1, 0);
  for (Index k = 0; k < n; ++k)
    start[static_cast<size_t>(k) + 1] = start[static_cast<size_t>(k)] + data.bag_size(bags[static_cast<size_t>(k)]);
  const Index N = start.back();
  Matrix X(data.num_inputs(), N);
  Vector w(N);
  std::vector<Index> bag_of(static_cast<size_t>(N));
  for (Index k = 0; k < n; ++k) {
    const Index a = bags[static_cast<size_t>(k)], b = data.bag_begin(a), len = data.bag_size(a),
                at = start[static_cast<size_t>(k)];
    X.middleCols(at, len) = data.inputs.middleCols(b, len);
    w.segment(at, len) =
        lik.aggregate_weights(model.spec, data.coverage.segment(b, len).cwiseProduct(data.population.segment(b, len)));
    std::fill(bag_of.begin() + at, bag_of.begin() + at + len, k);
  }
  // Each block's sums per bag it touches (a run of bags, from first[b]), added in block order.
  const Index blocks = LatentDraws::blocks(N);
  std::vector<Matrix> part(static_cast<size_t>(blocks));
  std::vector<Index> first(static_cast<size_t>(blocks), 0);
  const LatentField field(model);
  const LatentDraws latent(field, samples, seed);
  latent.over_blocks(X, threads, [&](Index b, Index begin, const Matrix& Ft) {
    const Index k0 = bag_of[static_cast<size_t>(begin)], k1 = bag_of[static_cast<size_t>(begin + Ft.cols() - 1)];
    first[static_cast<size_t>(b)] = k0;
    Matrix& eta = part[static_cast<size_t>(b)];
    eta.setZero(samples, k1 - k0 + 1);
    for (Index i = 0; i < Ft.cols(); ++i) {
      auto col = eta.col(bag_of[static_cast<size_t>(begin + i)] - k0);
      for (int s = 0; s < samples; ++s) col[s] += w[begin + i] * link.psi(Ft(s, i));
    }
  });
  Matrix eta = Matrix::Zero(samples, n);
  for (Index b = 0; b < blocks; ++b)
    eta.middleCols(first[static_cast<size_t>(b)], part[static_cast<size_t>(b)].cols()) += part[static_cast<size_t>(b)];
  // Each bag's unit effect (its mean moving with the draw's field where it has a loading, as in
  // bag_predictive_draws) and observation noise from a stream of its own; bags that share an effect
  // (effect_of) take its normals from the effect's stream instead.
  const bool moving =
      std::any_of(units.begin(), units.end(), [](const UnitEffectMoments& u) { return u.loading.size() > 0; }) &&
      !model.spec.map_estimate;
  Matrix shared_normals;
  if (!effect_of.empty()) {
    shared_normals.resize(samples, *std::max_element(effect_of.begin(), effect_of.end()) + 1);
    for (Index g = 0; g < shared_normals.cols(); ++g)
      stream_normals(counter_stream(seed, 4, static_cast<std::uint64_t>(g)), samples, &shared_normals(0, g));
  }
  Matrix y(samples, n);
  for (Index k = 0; k < n; ++k) {
    const Index a = bags[static_cast<size_t>(k)], at = start[static_cast<size_t>(k)];
    const Vector wk = w.segment(at, start[static_cast<size_t>(k) + 1] - at);
    std::mt19937_64 rng(counter_stream(seed, 2, static_cast<std::uint64_t>(k)));
    std::normal_distribution<double> normal;
    const UnitEffectMoments& u = units[static_cast<size_t>(k)];
    const Vector along = moving && u.loading.size() ? effect_shifts(latent, u) : Vector::Zero(samples);
    const double shift = moving ? u.shift : 0.0;
    for (int s = 0; s < samples; ++s) {
      double e = eta(s, k);
      if (u.var > 0 || u.mean != 0) {
        const double z = effect_of.empty() ? normal(rng) : shared_normals(s, effect_of[static_cast<size_t>(k)]);
        e = lik.aggregate_with_unit_effect(e, u.mean + shift + along[s] + std::sqrt(u.var) * z);
      }
      y(s, k) = lik.draw(model, e, data.trials_of(a), wk, rng);
    }
  }
  return y;
}

Matrix draw_coverage(const Model& model, const Matrix& X, const Matrix& lo, const Matrix& hi, int samples,
                     unsigned long long seed, int threads) {
  const Index n = X.cols(), L = lo.cols();
  if (lo.rows() != n || hi.rows() != n || hi.cols() != L)
    throw std::invalid_argument("draw_coverage: the intervals must have a row per pixel");
  const LinkFunction& link = link_of(model.spec.link);
  // Counts of pixels inside, per block: whole numbers, so their sum is exact in any order.
  std::vector<Matrix> inside(static_cast<size_t>(LatentDraws::blocks(n)));
  const LatentField field(model);
  LatentDraws(field, samples, seed).over_blocks(X, threads, [&](Index b, Index begin, const Matrix& Ft) {
    Matrix& c = inside[static_cast<size_t>(b)];
    c.setZero(samples, L);
    for (Index i = 0; i < Ft.cols(); ++i)
      for (int s = 0; s < samples; ++s) {
        const double v = link.psi(Ft(s, i));
        for (Index l = 0; l < L; ++l)
          if (v >= lo(begin + i, l) && v <= hi(begin + i, l)) c(s, l) += 1;
      }
  });
  Matrix total = Matrix::Zero(samples, L);
  for (const Matrix& c : inside) total += c;
  return n > 0 ? Matrix(total / static_cast<double>(n)) : total;
}

}  // namespace vbagg
