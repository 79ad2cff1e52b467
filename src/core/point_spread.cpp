#include "point_spread.hpp"

#include <Eigen/Eigenvalues>
#include <algorithm>
#include <cmath>
#include <sstream>

#include "feature_store.hpp"
#include "natgrad.hpp"
#include "param_layout.hpp"
#include "q_hessian.hpp"

namespace vbagg {

namespace {

// The layout's entries after q that the spread covers: from the mean block to the unit effect
// (learned inducing inputs are left as they are). The first `field` of them move the latent field.
struct PointEntries {
  Index begin = 0, count = 0, field = 0;
};

// Natural-gradient steps on q that do not settle (the spread then reads q's Hessian, or is refused).
struct QUnsettled : NumericalError {
  using NumericalError::NumericalError;
};

PointEntries point_entries(const Model& model) {
  PointEntries e;
  e.begin = param_slice(model, ParamBlockId::mean).offset;
  e.count = param_slice(model, ParamBlockId::inducing).offset - e.begin;
  e.field = param_slice(model, ParamBlockId::likelihood).offset - e.begin;
  return e;
}

}  // namespace

Index spread_field_size(const Model& model) { return point_entries(model).field; }

bool spread_defined(const ModelSpec& spec) { return !spec.map_estimate && !spec.any_sampled(); }

double floor_of_steps(const std::vector<double>& distances, double rounding) {
  const std::ptrdiff_t recent = std::min<std::ptrdiff_t>(10, static_cast<std::ptrdiff_t>(distances.size()) / 2);
  if (recent == 0) return -1;
  const double last = *std::max_element(distances.end() - recent, distances.end());
  return last <= 1e-3 * distances.front() || last <= 2 * rounding ? last : -1;
}

PointSpread laplace_spread(Model& model, const Dataset& data, const std::vector<Index>& bags, const SpreadOptions& o) {
  if (!spread_defined(model.spec))
    throw ConfigError("the point estimates' spread needs a variational model with the bound or delta expectation");
  const PointEntries pe = point_entries(model);
  // A unit effect's log sigma_u held at its floor has no gradient below it: it stays as it is.
  std::vector<Index> free;
  {
    Vector probe = Vector::Constant(model.num_params(), -1.0);
    drop_gradient_past_floor(model, probe);
    for (Index j = 0; j < pe.count; ++j)
      if (probe[pe.begin + j] != 0) free.push_back(j);
  }
  const Index n = static_cast<Index>(free.size());
  ObjectiveOptions full = o.objective;
  full.q_moments_gradient = true;
  ObjectiveOptions q_alone = full;
  q_alone.q_moments_only = true;
  // A reading's steps on q share its kernel. The readings displaced along the mean and the fixed
  // effects, which come next in the layout, share the fit's own too: they read what its first step
  // filled. Those along the noise come after the kernel's, and fill the store again.
  FeatureStore features(full.feature_store_mb);
  q_alone.features = &features;
  const Vector start = model.pack();
  const double start_jitter = model.jitter;
  // How far a step moved q: its mean's and its Cholesky factor's changes, in norm.
  auto moved = [&](const Vector& mean, const Matrix& chol) {
    return (model.q_mean - mean).norm() + (model.q_chol - chol).norm();
  };
  // A step that loses less than `noise` of the ELBO is taken: with K_zz ill-conditioned (14 close
  // inducing inputs) the ELBO itself carries that much rounding, and a conjugate model's exact step
  // read as a loss of 1.7e-6 of 13 nats. No decision rests on a gain at the ELBO's last digits,
  // which another process count's summation order moves.
  auto noise = [](double elbo) { return 1e-6 * (1 + std::abs(elbo)); };
  // The objective where q stands, with `options`, refused when not finite.
  auto objective = [&](const ObjectiveOptions& options, Vector& grad) {
    ObjectiveValue v = elbo(model, data, bags, 1.0, &grad, options);
    if (!std::isfinite(v.elbo)) throw NumericalError("the objective is not finite next to the fit");
    return v;
  };
  // One natural-gradient step on q from v, read at q: of `pace.size` (1 to start with: Newton's
  // step for a conjugate term), halved until the ELBO does not fall; `next` is read where it lands.
  // With the delta method or a unit effect a step of 1 can lose: on 16 provinces' counts, 0.06 nats
  // from a fit 1e-4 nats from q's optimum, and the next step moved q's mean by 5; readings that took
  // two such steps moved a held-out province's latent mean by thousands per sd, past what exp can
  // hold. Steps of 1 can also overshoot by a little more each time, each losing next to nothing (on
  // a 20-unit country each moved q 1.45 times as far as the one before, losing 1e-11 of the ELBO,
  // and 50 never settled): a step that moves q farther than the one before it at the same size, or
  // loses beyond the rounding of a well-conditioned sum, halves the size of the steps after it, and
  // two steps in a row that do neither double it again, up to 1 (two steps of 1/2 and two of 1
  // still contract there, and a cut forced far from the optimum does not slow the steps next to
  // it). Returns how far q moved over the step's size, the distance to q's optimum that a step of
  // 1 would cover, or -1 when no step climbs (q is at its optimum to the ELBO's rounding).
  struct Pace {
    double size = 1.0;
    int kept = 0;        // steps in a row at this size that neither lost nor moved farther
    double last = -1.0;  // the distance of the last step at this size (-1: none yet)
  };
  auto climb = [&](const ObjectiveValue& v, ObjectiveValue& next, Pace& pace) {
    const Vector mean = model.q_mean;
    const Matrix chol = model.q_chol;
    for (; pace.size >= o.smallest_step; pace = Pace{0.5 * pace.size}) {
      if (natural_gradient_step(model, v.grad_q_mean, v.grad_q_cov, pace.size)) {
        Vector grad;
        next = elbo(model, data, bags, 1.0, &grad, q_alone);
        if (std::isfinite(next.elbo) && next.elbo >= v.elbo - noise(v.elbo)) {
          const double distance = moved(mean, chol) / pace.size;
          const bool lost = next.elbo < v.elbo - 1e-3 * noise(v.elbo);
          if (lost || (pace.last >= 0 && distance > pace.last))
            pace = Pace{std::max(0.5 * pace.size, o.smallest_step)};
          else if (++pace.kept == 2 && pace.size < 1)
            pace = Pace{2 * pace.size};
          else
            pace.last = distance;
          return distance;
        }
      }
      model.q_mean = mean;
      model.q_chol = chol;
    }
    return -1.0;
  };
  // Steps on q from where it stands until none climbs or done(k, distance) says so after step k.
  // After o.max_q_steps, q is taken as settled where the steps have come down to the floor of their
  // own rounding (floor_of_steps), and refused (QUnsettled) where they have not. `rounding` is the
  // floor measured where q was settled at the fit, which the displaced readings share. Returns the
  // floor where q was taken as settled at it, else 0.
  double rounding = 0;
  auto step_until = [&](const std::string& where, auto done) {
    Vector grad;
    ObjectiveValue v = objective(q_alone, grad);
    Pace pace;
    std::vector<double> distances;
    for (int k = 0;; ++k) {
      if (k == o.max_q_steps) {
        const double floor = floor_of_steps(distances, rounding);
        if (floor >= 0) return floor;
        std::ostringstream what;
        what << "q does not settle next to the fit" << where << ": " << k
             << " natural-gradient steps still move it (the first by " << (distances.empty() ? 0 : distances.front())
             << ", the last by " << (distances.empty() ? 0 : distances.back()) << ")";
        throw QUnsettled(what.str());
      }
      ObjectiveValue next;
      const double distance = climb(v, next, pace);
      if (distance < 0) return 0.0;
      distances.push_back(distance);
      v = std::move(next);
      if (done(k, distance)) return 0.0;
    }
  };
  // First q is settled at the fit's own theta. A fit stops within its tolerance of q's optimum,
  // not at it, and readings that started from there would differ by how their steps carried on.
  Vector settled_mean;
  Matrix settled_chol;
  auto settle_at_fit = [&]() {
    model.unpack(start);
    model.jitter = start_jitter;
    rounding = std::max(o.settled, step_until("", [&](int, double distance) { return distance <= o.settled; }));
    settled_mean = model.q_mean;
    settled_chol = model.q_chol;
  };
  // The gradient of the entries after q, and q's mean, with q where it stands.
  auto read = [&](Vector& g, Vector& qm) {
    Vector grad;
    objective(full, grad);
    g = grad.segment(pe.begin, pe.count);
    qm = model.q_mean;
  };
  // A displaced reading: from the settled q, steps until one moves q by at most o.contraction of
  // the first (at least q_steps of them): q is then within about that share of its move to the
  // displaced optimum, whether the steps contract fast (two steps, as the readings always took) or
  // slowly (with a unit effect a step of 1 contracted by 0.55 a step, where two steps left the sds
  // 7 % off; 240 survey clusters needed steps of 1/16 from their fit).
  auto reading = [&](const Vector& theta, Vector& g, Vector& qm) {
    model.unpack(theta);
    model.jitter = start_jitter;
    model.q_mean = settled_mean;
    model.q_chol = settled_chol;
    double first = 0;
    step_until(" (a displaced reading)", [&](int k, double distance) {
      if (k == 0) first = distance;
      return k + 1 >= o.q_steps && (distance <= o.contraction * first || distance <= o.settled);
    });
    read(g, qm);
  };
  Matrix H(n, n), response(model.num_q(), n);
  // Forward differences from a reading at the fit itself: one reading per parameter.
  auto by_steps = [&]() {
    Vector g0, q0, g, q;
    settle_at_fit();
    read(g0, q0);
    for (Index c = 0; c < n; ++c) {
      Vector theta = start;
      theta[pe.begin + free[static_cast<size_t>(c)]] += o.step;
      reading(theta, g, q);
      for (Index r = 0; r < n; ++r)
        H(r, c) = (g[free[static_cast<size_t>(r)]] - g0[free[static_cast<size_t>(r)]]) / o.step;
      response.col(c) = (q - q0) / o.step;
    }
  };
  // The same from the ELBO's Hessian in q and theta at q's optimum.
  auto by_hessian = [&]() {
    model.unpack(start);
    model.jitter = start_jitter;
    std::vector<Index> theta;
    for (Index j : free) theta.push_back(pe.begin + j);
    QHessianProfile p = q_hessian_profile(model, data, bags, full, theta, o.step);
    H = std::move(p.hessian);
    response = std::move(p.response);
  };
  const Index q_entries = param_slice(model, ParamBlockId::mean).offset;  // q's blocks come first
  try {
    if (o.hessian) {
      by_hessian();
    } else {
      try {
        by_steps();
      } catch (const QUnsettled&) {
        if (q_entries > o.max_hessian_q) throw;
        by_hessian();
      }
    }
  } catch (...) {
    model.unpack(start);
    model.jitter = start_jitter;
    throw;
  }
  model.unpack(start);
  model.jitter = start_jitter;
  // Sigma = (-H)^-1 = U diag(1/e) U^T, e raised to 1/max_sd^2; D = U diag(e^-1/2).
  const Matrix precision = -0.5 * (H + H.transpose());
  Eigen::SelfAdjointEigenSolver<Matrix> eig(precision);
  const Vector e = eig.eigenvalues().cwiseMax(1.0 / (o.max_sd * o.max_sd));
  // An eigenvector's sign is arbitrary, and rounding (another process count, another summation
  // order) may flip it: each is turned so that its largest entry is positive, so the same fit
  // stores the same directions.
  Matrix U = eig.eigenvectors();
  for (Index k = 0; k < U.cols(); ++k) {
    Index largest = 0;
    U.col(k).cwiseAbs().maxCoeff(&largest);
    if (U(largest, k) < 0) U.col(k) = -U.col(k);
  }
  const Matrix D = U * e.cwiseSqrt().cwiseInverse().asDiagonal();
  PointSpread s;
  s.field = Matrix::Zero(pe.field, n);
  for (Index r = 0; r < n; ++r)
    if (free[static_cast<size_t>(r)] < pe.field) s.field.row(free[static_cast<size_t>(r)]) = D.row(r);
  s.q_mean = response * D;
  const std::vector<std::string> names = model.param_names();
  s.sd = Vector::Zero(pe.count);
  for (Index r = 0; r < n; ++r) s.sd[free[static_cast<size_t>(r)]] = D.row(r).norm();
  for (Index j = 0; j < pe.count; ++j) s.names.push_back(names[static_cast<size_t>(pe.begin + j)]);
  return s;
}

SpreadShifts::SpreadShifts(const Model& model) {
  const PointSpread& s = model.spread;
  if (s.directions() == 0) return;
  const PointEntries pe = point_entries(model);
  if (s.field.rows() != pe.field || s.q_mean.rows() != model.num_q())
    throw DataError("the model's point spread does not fit its parameters");
  // Directions are sd-sized, and the latent mean is smooth in them: forward differences from the
  // model itself are accurate to about h of a_k, which as a variance is far below anything a map
  // shows, for one mean evaluation per direction rather than central differences' two.
  h_ = 1e-4;
  const Vector theta = model.pack();
  for (Index k = 0; k < s.directions(); ++k) {
    Model moved = model;
    moved.spread = PointSpread();
    moved.unit_effect.posterior.clear();  // latent means only: not the units' kept effects and loadings
    Vector t = theta;
    t.segment(pe.begin, pe.field) += h_ * s.field.col(k);
    moved.unpack(t);
    moved.q_mean += h_ * s.q_mean.col(k);
    post_moved_.push_back(compute_posterior(moved));
    moved_.push_back(std::move(moved));
  }
}

void SpreadShifts::into(const Eigen::Ref<const Matrix>& X, const Eigen::Ref<const Vector>& base, Matrix& A,
                        LatentScratch& scratch) const {
  const Index len = X.cols();
  A.resize(directions(), len);
  Vector moved(len);
  for (Index k = 0; k < directions(); ++k) {
    latent_means_into(moved_[static_cast<size_t>(k)], post_moved_[static_cast<size_t>(k)], X, moved, scratch);
    A.row(k) = ((moved - base) / h_).transpose();
  }
}

}  // namespace vbagg
