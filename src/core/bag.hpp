// What a bag term reads of q for one bag, and the derivatives it returns (MODEL.md sections 4, 5).
#pragma once

#include <utility>
#include <vector>

#include "types.hpp"

namespace vbagg {

struct CountMoments;
struct CountMomentsGradient;

// A bag whose unit effect it shares with its unit's other bags (one per period, MODEL.md 4g): the
// unit's term couples them (shared_unit_effect_score), so the objective takes such bags in two
// passes. In the first the count term writes the bag's mean, rho and h into *record; in the second
// it passes *given back as its derivatives with respect to them. Both return 0: the objective
// counts the unit's value once.
struct SharedUnitPass {
  CountMoments* record = nullptr;
  const CountMomentsGradient* given = nullptr;
};

// Which draws of f the sampled expectation (MODEL.md 4e ii) uses: standard normals that are a pure
// function of (seed, step, bag, index) (counter_rng.hpp), so results depend on neither threads nor
// batch order, and every optimiser step sees fresh draws.
struct DrawKey {
  unsigned long long seed = 0, step = 0, bag = 0;
  int samples = 0;
};

// The bag's nystrom factor T (M x N_a, T = L_v^T L_W^{-1} K_Wa: the covariance of f is T^T T plus
// the residual diag(d)) for terms that read it only through products with a few vectors: T V and
// T^T E without forming T, O(M N_a k) instead of O(M^2 N_a).
class NystromProducts {
 public:
  virtual ~NystromProducts() = default;
  virtual Index rows() const = 0;                             // M
  virtual Matrix times(const Matrix& V) const = 0;            // T V, V: N_a x k
  virtual Matrix transpose_times(const Matrix& E) const = 0;  // T^T E, E: M x k
};

// A T held in full.
class DenseNystrom : public NystromProducts {
 public:
  explicit DenseNystrom(const Matrix& T) : T_(T) {}
  Index rows() const override { return T_.rows(); }
  Matrix times(const Matrix& V) const override { return T_ * V; }
  Matrix transpose_times(const Matrix& E) const override { return T_.transpose() * E; }

 private:
  const Matrix& T_;
};

// m and s2 are always set. T (M x N_a) is set for terms in nystrom mode; the residual d and the
// products with T in residual mode; C (N_a x N_a, the exact within-bag covariance of f) in exact
// mode.
struct BagPosterior {
  BagPosterior(Eigen::Ref<const Vector> m_, Eigen::Ref<const Vector> s2_, Eigen::Ref<const Vector> weight_, double y_,
               double trials_ = 0)
      : m(m_), s2(s2_), weight(weight_), y(y_), trials(trials_) {}
  Eigen::Ref<const Vector> m;
  Eigen::Ref<const Vector> s2;
  Eigen::Ref<const Vector> weight;  // effective pixel weights c_i p_i
  double y;
  double trials = 0;  // the binomial model's n_a
  const Matrix* T = nullptr;
  const Matrix* C = nullptr;
  const Vector* d = nullptr;  // residual variance d_i = s2_i - |t_i|^2 >= 0
  const NystromProducts* t = nullptr;
  // A unit effect u_a of sd e^{unit_log_sd} on the linear predictor (MODEL.md 4g: a count's log
  // rate, the binomial's logit), integrated out of the bag's likelihood.
  bool has_unit_effect = false;
  double unit_log_sd = 0;
  SharedUnitPass shared_unit;
  DrawKey draws;  // with the sampled expectation
};

// Derivatives of l_a. gT and gC are only written when T and C were given; in residual mode, gd
// and the factors of dl_a/dT = sum_j U_j V_j^T (U_j: M x k, V_j: N_a x k). g_params has one entry
// per likelihood parameter.
struct BagGradient {
  Vector gm, gs2;
  Matrix gT, gC;
  Vector gd;
  std::vector<std::pair<Matrix, Matrix>> gT_factors;
  Vector g_params;
  double g_unit_log_sd = 0;  // d/d unit_log_sd, with a unit effect
};

// What a bag term reads beyond m and s2: nothing, the residual d and products with T, all of T,
// or the exact covariance C.
enum class BagNeeds { marginals, residual, nystrom, exact };

}  // namespace vbagg
