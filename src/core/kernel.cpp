#include "kernel.hpp"

#include <algorithm>
#include <boost/math/special_functions/bessel.hpp>
#include <cmath>
#include <limits>
#include <random>

#include "pixel_columns.hpp"

namespace vbagg {

namespace {

const double kSqrt3 = std::sqrt(3.0);
const double kSqrt5 = std::sqrt(5.0);
// Squared distances below this fraction of the two points' squared norms are 0 (Kernel::add_part).
constexpr double kCoincident = 16 * std::numeric_limits<double>::epsilon();

// The squared exponentials (rbf, ard) keep their values, not their distances, for the backward
// pass: dk/d(r^2) = -k/2 needs nothing else, and recomputing the exponentials there cost a
// fifth of a small problem's kernel work.
bool keeps_values(KernelType type) {
  return type == KernelType::rbf || type == KernelType::ard || type == KernelType::cycle;
}

// e^{-x} I_nu(x): Boost's Bessel function while e^x is finite, then its asymptotic series (at
// x > 700 its fourth term is below 1e-11 of the first).
double scaled_bessel_i(int nu, double x) {
  if (x <= 700) return std::exp(-x) * boost::math::cyl_bessel_i(nu, x);
  const double mu = 4.0 * nu * nu, t = 8 * x;
  return (1 - (mu - 1) / t + (mu - 1) * (mu - 9) / (2 * t * t) - (mu - 1) * (mu - 9) * (mu - 25) / (6 * t * t * t)) /
         std::sqrt(2 * std::acos(-1.0) * x);
}

// The cycle kernel's constants at x = 1 / l^2. On unit vectors r^2 = |u - u'|^2 / l^2 =
// 2 x (1 - cos(theta - theta')), so its value is var (e^{-r^2/2} - c) / d with c = e^{-x} I0(x),
// the periodic rbf's constant Fourier term over var, and d = 1 - c; that is
// var (1 + expm1(-r^2/2) / d), which keeps its digits as x -> 0 where both terms tend to 1.
struct CycleShape {
  double c = 0, d = 1;
  double dd_dlog_l = 0;  // d d / d log l = -2 x (c - e^{-x} I1(x))
};

CycleShape cycle_shape(double log_lengthscale) {
  const double x = std::exp(-2 * log_lengthscale);
  CycleShape s;
  if (x < 0.5) {
    // 1 - e^{-x} I0(x) = -expm1(-x) - e^{-x} (I0(x) - 1), the series of I0 - 1 summed on its own.
    double term = 1, series = 0;
    for (int k = 1; k < 30 && term > 1e-18 * series; ++k) {
      term *= 0.25 * x * x / (static_cast<double>(k) * k);
      series += term;
    }
    s.d = -std::expm1(-x) - std::exp(-x) * series;
    s.c = 1 - s.d;
  } else {
    s.c = scaled_bessel_i(0, x);
    s.d = 1 - s.c;
  }
  s.dd_dlog_l = -2 * x * (s.c - scaled_bessel_i(1, x));
  return s;
}

// var * kappa(r^2) of squared distances into k (vectorised by Eigen).
template <class In, class Out>
void profile(KernelType type, double var, const In& r2, Out&& k) {
  switch (type) {
    case KernelType::rbf:
    case KernelType::ard:
      k = var * (-0.5 * r2).exp();
      return;
    case KernelType::matern12:
      k = var * (-r2.sqrt()).exp();
      return;
    case KernelType::matern32:
      k = var * (1 + kSqrt3 * r2.sqrt()) * (-kSqrt3 * r2.sqrt()).exp();
      return;
    case KernelType::matern52:
      k = var * (1 + kSqrt5 * r2.sqrt() + 5.0 / 3.0 * r2) * (-kSqrt5 * r2.sqrt()).exp();
      return;
    case KernelType::cycle:
      break;  // its profile needs its lengthscale's constants: cycle_profile
  }
}

// The cycle kernel's values var (1 + expm1(-r^2/2) / d) of squared distances into k.
template <class In, class Out>
void cycle_profile(double var, const CycleShape& s, const In& r2, Out&& k) {
  k = var * (1 + (-0.5 * r2).expm1() / s.d);
}

// The column's share of the backward pass: with g = dL/dk, returns sum_i g_i k_i (the gradient of
// log var) and overwrites r2 with dL/d(r^2) = g var dkappa/d(r^2). For the squared exponentials
// and cycle r2 holds the values k instead (keeps_values); cycle's dk/d(r^2) = -(k + var c / d) / 2
// takes `cycle_shift` = var c / d. At r = 0 the derivative of matern12 is unbounded but it only
// ever multiplies a factor that vanishes with r, so 0 is used.
template <class Col, class Grad>
double profile_backward(KernelType type, double var, Col&& r2, const Grad& g, Eigen::ArrayXd& tmp, double cycle_shift) {
  double gk = 0;
  switch (type) {
    case KernelType::rbf:
    case KernelType::ard:
      gk = (g * r2).sum();
      r2 = -0.5 * g * r2;
      break;
    case KernelType::cycle:
      gk = (g * r2).sum();
      r2 = -0.5 * g * (r2 + cycle_shift);
      break;
    case KernelType::matern12:
      tmp = r2.sqrt();
      r2 = var * (-tmp).exp();  // k
      gk = (g * r2).sum();
      r2 = (tmp > 0).select(-g * r2 / (2 * tmp), 0.0);
      break;
    case KernelType::matern32:
      tmp = var * (-kSqrt3 * r2.sqrt()).exp();
      gk = (g * (1 + kSqrt3 * r2.sqrt()) * tmp).sum();
      r2 = -1.5 * g * tmp;
      break;
    case KernelType::matern52:
      tmp = var * (-kSqrt5 * r2.sqrt()).exp();
      gk = (g * (1 + kSqrt5 * r2.sqrt() + 5.0 / 3.0 * r2) * tmp).sum();
      r2 = -5.0 / 6.0 * g * (1 + kSqrt5 * r2.sqrt()) * tmp;
      break;
  }
  return gk;
}

// A part on one input (an rbf on one covariate, the trend on time): its squared distances are
// the differences squared, and its backward sums are taken a column at a time. cycle reads two.
bool one_input(const KernelPart& p) { return p.dim == 1 && p.type != KernelType::cycle; }

// Rows of the part, divided by the lengthscale(s), into z. cycle's rows are first scaled to unit
// length (its phase), the origin taken as phase 0; `inverse_norms`, when given, receives 1 / |u|.
void scale_inputs(const KernelPart& p, const Eigen::Ref<const Matrix>& X, Buffer& z,
                  Eigen::ArrayXd* inverse_norms = nullptr) {
  auto out = z.shape(p.dim, X.cols());
  if (p.type == KernelType::cycle) {
    const double inv_l = std::exp(-p.log_lengthscale[0]);
    if (inverse_norms) inverse_norms->resize(X.cols());
    for (Index j = 0; j < X.cols(); ++j) {
      const auto u = X.col(j).segment(p.begin, p.dim);
      const double norm = u.norm();
      if (norm > 0) {
        out.col(j) = u * (inv_l / norm);
      } else {
        out.col(j).setZero();
        out(0, j) = inv_l;
      }
      if (inverse_norms) (*inverse_norms)[j] = norm > 0 ? 1 / norm : 0.0;
    }
    return;
  }
  if (p.log_lengthscale.size() == 1)
    out = X.middleRows(p.begin, p.dim) * std::exp(-p.log_lengthscale[0]);
  else
    out = (-p.log_lengthscale.array()).exp().matrix().asDiagonal() * X.middleRows(p.begin, p.dim);
}

}  // namespace

KernelType parse_kernel_type(const std::string& name) {
  if (name == "rbf") return KernelType::rbf;
  if (name == "ard") return KernelType::ard;
  if (name == "matern12") return KernelType::matern12;
  if (name == "matern32") return KernelType::matern32;
  if (name == "matern52") return KernelType::matern52;
  if (name == "cycle") return KernelType::cycle;
  throw ConfigError("unknown kernel '" + name + "' (allowed: rbf, ard, matern12, matern32, matern52, cycle)");
}

std::string to_string(KernelType type) {
  switch (type) {
    case KernelType::rbf:
      return "rbf";
    case KernelType::ard:
      return "ard";
    case KernelType::matern12:
      return "matern12";
    case KernelType::matern32:
      return "matern32";
    case KernelType::matern52:
      return "matern52";
    case KernelType::cycle:
      return "cycle";
  }
  return "?";
}

namespace {

// Every part a term of its own.
std::vector<KernelTerm> sum_terms(size_t parts) {
  std::vector<KernelTerm> terms;
  for (size_t c = 0; c < parts; ++c) terms.push_back({{static_cast<Index>(c)}});
  return terms;
}

}  // namespace

Kernel::Kernel(std::vector<KernelPart> parts) : Kernel(parts, sum_terms(parts.size())) {}

Kernel::Kernel(std::vector<KernelPart> parts, std::vector<KernelTerm> terms)
    : parts_(std::move(parts)), terms_(std::move(terms)) {
  for (const auto& p : parts_) {
    const Index want = p.type == KernelType::ard ? p.dim : 1;
    if (p.dim < 1 || p.log_lengthscale.size() != want || (p.type == KernelType::cycle && p.dim != 2))
      throw ConfigError("kernel part '" + to_string(p.type) + "' has inconsistent dimensions" +
                        (p.type == KernelType::cycle ? " (cycle reads the two circle inputs)" : ""));
  }
  std::vector<int> used(parts_.size(), 0);
  for (const auto& term : terms_) {
    if (term.empty()) throw ConfigError("a kernel term has no factor");
    for (const auto& factor : term) {
      if (factor.empty()) throw ConfigError("a kernel factor has no part");
      for (Index c : factor) {
        if (c < 0 || c >= static_cast<Index>(parts_.size()))
          throw ConfigError("a kernel term names part " + std::to_string(c) + " of " + std::to_string(parts_.size()));
        ++used[static_cast<size_t>(c)];
      }
    }
  }
  for (size_t c = 0; c < used.size(); ++c)
    if (used[c] != 1)
      throw ConfigError("kernel part " + std::to_string(c) + " is used " + std::to_string(used[c]) +
                        " times by the terms; each part belongs to exactly one");
}

bool Kernel::is_sum() const {
  for (const auto& term : terms_)
    if (term.size() != 1 || term[0].size() != 1) return false;
  return true;
}

Index Kernel::num_params() const {
  Index n = 0;
  for (const auto& p : parts_) n += p.num_params();
  return n;
}

Vector Kernel::params() const {
  Vector theta(num_params());
  Index k = 0;
  for (const auto& p : parts_) {
    if (!p.fixed_variance) theta[k++] = p.log_variance;
    theta.segment(k, p.log_lengthscale.size()) = p.log_lengthscale;
    k += p.log_lengthscale.size();
  }
  return theta;
}

void Kernel::set_params(const Vector& theta) {
  Index k = 0;
  for (auto& p : parts_) {
    if (!p.fixed_variance) p.log_variance = theta[k++];
    p.log_lengthscale = theta.segment(k, p.log_lengthscale.size());
    k += p.log_lengthscale.size();
  }
}

std::vector<std::string> Kernel::param_names() const {
  std::vector<std::string> names;
  for (size_t c = 0; c < parts_.size(); ++c) {
    const auto& p = parts_[c];
    const std::string base = "part" + std::to_string(c) + "." + to_string(p.type);
    if (!p.fixed_variance) names.push_back(base + ".log_variance");
    for (Index d = 0; d < p.log_lengthscale.size(); ++d)
      names.push_back(base + ".log_lengthscale" + (p.log_lengthscale.size() > 1 ? "[" + std::to_string(d) + "]" : ""));
  }
  return names;
}

double Kernel::factor_variance(const KernelFactor& f) const {
  double s = 0;
  for (Index c : f) s += std::exp(parts_[static_cast<size_t>(c)].log_variance);
  return s;
}

double Kernel::diag_value() const {
  double s = 0;
  for (const auto& term : terms_) {
    double prod = 1;
    for (const auto& f : term) prod *= factor_variance(f);
    s += prod;
  }
  return s;
}

void Kernel::diag_backward(double g, Vector& grad) const {
  std::vector<Index> offset(parts_.size());
  Index k = 0;
  for (size_t c = 0; c < parts_.size(); ++c) {
    offset[c] = k;
    k += parts_[c].num_params();
  }
  for (const auto& term : terms_)
    for (size_t j = 0; j < term.size(); ++j) {
      double others = 1;
      for (size_t i = 0; i < term.size(); ++i)
        if (i != j) others *= factor_variance(term[i]);
      for (Index c : term[j]) {
        const auto& p = parts_[static_cast<size_t>(c)];
        if (!p.fixed_variance) grad[offset[static_cast<size_t>(c)]] += g * others * std::exp(p.log_variance);
      }
    }
}

void Kernel::cross(const Matrix& X1, const Matrix& X2, Matrix& K, KernelCache* cache) const {
  K.resize(X1.cols(), X2.cols());
  KernelCache local;
  cross_into(X1, X2, K, cache ? *cache : local);
}

void Kernel::add_part(size_t c, const Eigen::Ref<const Matrix>& X1, const Eigen::Ref<const Matrix>& X2,
                      Eigen::Ref<Matrix> out, bool assign, KernelCache& cache) const {
  const auto& p = parts_[c];
  auto& pc = cache.parts[c];
  // A part whose inputs are the same in every column (a bag's or a strip's pixels share their
  // period, so the time parts) is one column of values: its distances and profile are taken once
  // instead of for every pixel.
  const auto rows = X2.middleRows(p.begin, p.dim);
  pc.constant = X2.cols() > 1 && (rows.colwise() - rows.col(0)).cwiseAbs().maxCoeff() == 0.0;
  if (pc.constant) {
    add_columns(c, X1, X2.leftCols(1), cache.constant_column.shape(X1.cols(), 1), true, cache);
    const auto column = cache.constant_column.view().col(0);
    if (assign)
      out.colwise() = column;
    else
      out.colwise() += column;
    return;
  }
  add_columns(c, X1, X2, out, assign, cache);
}

void Kernel::add_columns(size_t c, const Eigen::Ref<const Matrix>& X1, const Eigen::Ref<const Matrix>& X2,
                         Eigen::Ref<Matrix> out, bool assign, KernelCache& cache) const {
  const Index n1 = X1.cols(), n2 = X2.cols();
  const auto& p = parts_[c];
  auto& pc = cache.parts[c];
  scale_inputs(p, X1, pc.z1, &pc.inverse_norms1);
  scale_inputs(p, X2, pc.z2);
  const auto z1 = pc.z1.view(), z2 = pc.z2.view();
  auto r2 = pc.r2.shape(n1, n2);
  const double var = std::exp(p.log_variance);
  if (one_input(p)) {
    // The differences themselves, a column at a time: the product below would be a rank-one
    // GEMM that zeroes and fills the block before the norms' pass (with an rbf on each of 18
    // covariates those passes took more of a pass's time than the exponentials).
    const auto a = z1.row(0).transpose().array();
    for (Index j = 0; j < n2; ++j) r2.col(j).array() = (a - z2(0, j)).square();
  } else {
    r2.noalias() = -2.0 * z1.transpose() * z2;
    cache.norms1 = z1.colwise().squaredNorm().transpose().array();
    cache.norms2 = z2.colwise().squaredNorm().transpose().array();
    for (Index j = 0; j < n2; ++j) {
      auto d = r2.col(j).array();
      cache.column = cache.norms1 + cache.norms2[j];
      d += cache.column;
      // |z1|^2 + |z2|^2 - 2 z1.z2 carries a rounding error of a few ulps of the norms: below that
      // the points coincide. Left as it is, a point's distance to itself is ~1e-8 after the square
      // root, matern12's kernel moves by that much, and the rounding pattern of the vector ISA
      // decides it (finite differences saw 1e-5 where the machine had AVX-512).
      d = (d > kCoincident * cache.column).select(d, 0.0);
    }
  }
  // The profile over the whole block at once: one contiguous array, so the exponentials run in
  // full vectors but for one tail (a column of 54 inducing points left 6 to 13 of them scalar).
  if (keeps_values(p.type)) {
    Eigen::Map<Eigen::ArrayXd> flat(r2.data(), r2.size());
    if (p.type == KernelType::cycle)
      cycle_profile(var, cycle_shape(p.log_lengthscale[0]), flat, flat);
    else
      profile(p.type, var, flat, flat);
    if (assign)
      out = r2;
    else
      out += r2;
    return;
  }
  for (Index j = 0; j < n2; ++j) {
    if (assign) {
      profile(p.type, var, r2.col(j).array(), out.col(j).array());
    } else {
      cache.column = r2.col(j).array();
      profile(p.type, var, cache.column, cache.column);
      out.col(j).array() += cache.column;
    }
  }
}

void Kernel::cross_into(const Eigen::Ref<const Matrix>& X1, const Eigen::Ref<const Matrix>& X2, Eigen::Ref<Matrix> K,
                        KernelCache& cache) const {
  const Index n1 = X1.cols(), n2 = X2.cols();
  cache.parts.resize(parts_.size());
  bool first = true;
  size_t f = 0;  // product factors, numbered over the terms
  for (const auto& term : terms_) {
    if (term.size() == 1) {
      for (Index c : term[0]) {
        add_part(static_cast<size_t>(c), X1, X2, K, first, cache);
        first = false;
      }
      continue;
    }
    if (cache.factors.size() < f + term.size()) cache.factors.resize(f + term.size());
    for (size_t j = 0; j < term.size(); ++j) {
      auto F = cache.factors[f + j].shape(n1, n2);
      for (size_t i = 0; i < term[j].size(); ++i) add_part(static_cast<size_t>(term[j][i]), X1, X2, F, i == 0, cache);
    }
    for (Index col = 0; col < n2; ++col) {
      cache.column = cache.factors[f].view().col(col).array();
      for (size_t j = 1; j < term.size(); ++j) cache.column *= cache.factors[f + j].view().col(col).array();
      if (first)
        K.col(col).array() = cache.column;
      else
        K.col(col).array() += cache.column;
    }
    first = false;
    f += term.size();
  }
}

void Kernel::part_backward(size_t c, const Eigen::Ref<const Matrix>& G, KernelCache& cache, Index offset,
                           Vector& grad_theta, Matrix* grad_X1) const {
  const auto& p = parts_[c];
  auto& pc = cache.parts[c];
  const auto z1 = pc.z1.view(), z2 = pc.z2.view();
  auto H = pc.r2.view();  // becomes dL/d(r^2_ij)
  const double var = std::exp(p.log_variance);
  const bool cycle = p.type == KernelType::cycle;
  const CycleShape shape = cycle ? cycle_shape(p.log_lengthscale[0]) : CycleShape{};
  const double shift = var * shape.c / shape.d;
  // d r^2_ij / d log l_d = -2 (z1_id - z2_jd)^2, so the lengthscales take sum_ij H_ij (z1_id -
  // z2_jd)^2 and X1 takes H's row sums h1 and Z2Ht = z2 H^T. A part on one input sums them column
  // by column as H is made, while the column is in cache; the others expand the square after,
  // so that the cross term is one GEMM.
  const bool by_column = one_input(p);
  Vector h1, per_dim;
  Matrix Z2Ht;
  if (by_column) {
    h1.setZero(H.rows());
    Z2Ht.setZero(1, H.rows());
    per_dim.setZero(1);
  }
  const auto column_sums = [&](Index j) {
    const auto h = H.col(j);
    h1 += h;
    Z2Ht.row(0) += z2(0, j) * h.transpose();
    per_dim[0] += (h.array() * (z1.row(0).transpose().array() - z2(0, j)).square()).sum();
  };
  double g_log_var = 0;
  if (pc.constant) {
    // One column of values, repeated: its gradient is the sum of G's columns.
    const Eigen::ArrayXd summed = G.rowwise().sum().array();
    g_log_var += profile_backward(p.type, var, H.col(0).array(), summed, cache.column, shift);
    if (by_column) column_sums(0);
  } else {
    for (Index j = 0; j < H.cols(); ++j) {
      g_log_var += profile_backward(p.type, var, H.col(j).array(), G.col(j).array(), cache.column, shift);
      if (by_column) column_sums(j);
    }
  }
  if (!p.fixed_variance) grad_theta[offset++] += g_log_var;
  // cycle's lengthscale moves its values through d too: dk/dd = -(k - var) / d at fixed r^2, so
  // the sum over G is -(sum g k - var sum g) / d times d d / d log l.
  if (cycle) grad_theta[offset] += -(g_log_var - var * G.sum()) / shape.d * shape.dd_dlog_l;

  if (!by_column) {
    h1 = H.rowwise().sum();
    const Vector h2 = H.colwise().sum().transpose();
    Z2Ht = z2 * H.transpose();  // dim x n1
    per_dim = z1.array().square().matrix() * h1 + z2.array().square().matrix() * h2 -
              2.0 * z1.cwiseProduct(Z2Ht).rowwise().sum();
  }
  if (p.log_lengthscale.size() == 1)
    grad_theta[offset] += -2.0 * per_dim.sum();
  else
    grad_theta.segment(offset, p.dim) += -2.0 * per_dim;

  if (grad_X1) {
    // d r^2_ij / d x1_id = 2 (z1_id - z2_jd) / l_d
    const Vector inv_ls = (-p.log_lengthscale.array()).exp();
    Matrix g = 2.0 * (z1 * h1.asDiagonal() - Z2Ht);
    if (inv_ls.size() == 1)
      g *= inv_ls[0];
    else
      g = inv_ls.asDiagonal() * g;
    if (cycle) {
      // g is dL/d(u / |u|); the phase moves only along the circle: dL/du = (I - uhat uhat^T) g / |u|.
      for (Index i = 0; i < g.cols(); ++i) {
        const Eigen::Vector2d uhat = z1.col(i) * std::exp(p.log_lengthscale[0]);
        g.col(i) = (g.col(i) - uhat * uhat.dot(g.col(i))) * pc.inverse_norms1[i];
      }
    }
    grad_X1->middleRows(p.begin, p.dim) += g;
  }
}

void Kernel::cross_backward(const Eigen::Ref<const Matrix>& G, KernelCache& cache, Vector& grad_theta,
                            Matrix* grad_X1) const {
  std::vector<Index> offset(parts_.size());
  Index k = 0;
  for (size_t c = 0; c < parts_.size(); ++c) {
    offset[c] = k;
    k += parts_[c].num_params();
  }
  size_t f = 0;
  Matrix Gj;
  for (const auto& term : terms_) {
    if (term.size() == 1) {
      for (Index c : term[0])
        part_backward(static_cast<size_t>(c), G, cache, offset[static_cast<size_t>(c)], grad_theta, grad_X1);
      continue;
    }
    // d(prod_i F_i)/dF_j = prod_{i != j} F_i.
    for (size_t j = 0; j < term.size(); ++j) {
      Gj = G;
      for (size_t i = 0; i < term.size(); ++i)
        if (i != j) Gj.array() *= cache.factors[f + i].view().array();
      for (Index c : term[j])
        part_backward(static_cast<size_t>(c), Gj, cache, offset[static_cast<size_t>(c)], grad_theta, grad_X1);
    }
    f += term.size();
  }
}

void time_inputs(double t, Eigen::Ref<Vector> out) {
  const double angle = 2 * std::acos(-1.0) * t;
  out[0] = t;
  out[1] = std::cos(angle);
  out[2] = std::sin(angle);
}

Kernel make_kernel(const std::string& covariates, const std::string& space, Index num_covariates, Index num_coords,
                   const std::string& time, const std::string& season, const std::string& space_time) {
  std::vector<KernelPart> parts;
  auto add = [&](const std::string& name, Index begin, Index dim, const char* what) {
    if (name == "none") return;
    if (dim == 0) throw ConfigError(std::string("kernel for ") + what + " is '" + name + "' but there are no " + what);
    KernelPart p;
    p.type = parse_kernel_type(name);
    p.begin = begin;
    p.dim = dim;
    p.log_lengthscale = Vector::Zero(p.type == KernelType::ard ? dim : 1);
    parts.push_back(p);
  };
  if (covariates != "none" && covariates != "ard" && covariates != "ard+additive" && covariates != "rbf" &&
      covariates != "matern12" && covariates != "matern32" && covariates != "matern52")
    throw ConfigError("unknown covariate kernel '" + covariates +
                      "' (allowed: ard, ard+additive, rbf, matern12, matern32, matern52, none)");
  if (space != "none" && space != "rbf" && space != "matern12" && space != "matern32" && space != "matern52")
    throw ConfigError("unknown space kernel '" + space + "' (allowed: matern12, matern32, matern52, rbf, none)");
  if (time != "none" && time != "seasonal" && time != "trend" && time != "seasonal+trend")
    throw ConfigError("unknown time kernel '" + time + "' (allowed: seasonal+trend, seasonal, trend, none)");
  if (season != "periodic" && season != "cycle")
    throw ConfigError("unknown season kernel '" + season + "' (allowed: periodic, cycle)");
  if (space_time != "shared" && space_time != "separate")
    throw ConfigError("unknown space-time layout '" + space_time + "' (allowed: shared, separate)");
  if (covariates == "ard+additive") {
    // The ard over all covariates (their interactions), and beside it an rbf on each covariate
    // alone, a term of its own with its own variance and lengthscale.
    if (num_covariates == 0) throw ConfigError("kernel for covariates is 'ard+additive' but there are no covariates");
    add("ard", 0, num_covariates, "covariates");
    for (Index j = 0; j < num_covariates; ++j) add("rbf", j, 1, "covariates");
  } else {
    add(covariates, 0, num_covariates, "covariates");
  }
  add(space, num_covariates, num_coords, "coordinates");
  std::vector<KernelTerm> terms = sum_terms(parts.size());
  if (time != "none") {
    const Index t0 = num_covariates + num_coords;
    KernelFactor time_factor;
    if (time != "trend") {
      add(season == "cycle" ? "cycle" : "rbf", t0 + 1, 2, "time inputs");
      time_factor.push_back(static_cast<Index>(parts.size()) - 1);
    }
    if (time != "seasonal") {
      add("rbf", t0, 1, "time inputs");
      time_factor.push_back(static_cast<Index>(parts.size()) - 1);
    }
    if (space != "none") {
      KernelTerm& space_term = terms.back();
      parts[static_cast<size_t>(space_term[0][0])].fixed_variance = true;
      if (space_time == "separate" && time_factor.size() == 2) {
        // space_a x season + space_b x trend: the season's spatial pattern and the static field
        // each get their own lengthscale.
        space_term.push_back({time_factor[0]});
        add(space, num_covariates, num_coords, "coordinates");
        parts.back().fixed_variance = true;
        terms.push_back({{static_cast<Index>(parts.size()) - 1}, {time_factor[1]}});
      } else {
        space_term.push_back(time_factor);
      }
    } else {
      for (Index c : time_factor) terms.push_back({{c}});
    }
  }
  if (parts.empty()) throw ConfigError("the kernel has no part: covariates and space kernels are both 'none'");
  return Kernel(parts, terms);
}

std::vector<Index> median_heuristic_sample(Index n, unsigned long long seed) {
  std::mt19937_64 rng(seed);
  return sample_columns(n, 1000, rng);
}

void init_kernel_median_heuristic(Kernel& kernel, const Matrix& sample) {
  const Index sample_size = sample.cols();
  for (auto& p : kernel.parts()) {
    std::vector<double> dist;
    dist.reserve(sample_size * (sample_size - 1) / 2);
    for (Index a = 0; a < sample_size; ++a)
      for (Index b = a + 1; b < sample_size; ++b)
        dist.push_back((sample.col(a).segment(p.begin, p.dim) - sample.col(b).segment(p.begin, p.dim)).norm());
    double median = 1.0;
    if (!dist.empty()) {
      std::nth_element(dist.begin(), dist.begin() + dist.size() / 2, dist.end());
      median = dist[dist.size() / 2];
    }
    if (!(median > 0)) median = 1.0;
    p.log_variance = 0.0;
    p.log_lengthscale.setConstant(std::log(median));
  }
}

}  // namespace vbagg
