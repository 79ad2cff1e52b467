// Bag terms l_a of the ELBO (MODEL.md section 4) and their derivatives with respect to the bag's
// posterior quantities. Everything here is per bag and independent of how q was parameterised.
#pragma once

#include "model.hpp"
#include "types.hpp"

namespace vbagg {

// What the bag term reads. m and s2 are always set. T (M x N_a, T = L_v^T L_W^{-1} K_Wa) is set
// for terms in nystrom mode, C (N_a x N_a, the exact within-bag covariance of f) in exact mode.
struct BagPosterior {
  Eigen::Ref<const Vector> m;
  Eigen::Ref<const Vector> s2;
  Eigen::Ref<const Vector> weight;  // effective pixel weights c_i p_i
  double y;
  const Matrix* T = nullptr;
  const Matrix* C = nullptr;
};

// Derivatives of l_a. gT and gC are only written when T and C were given.
struct BagGradient {
  Vector gm, gs2;
  Matrix gT, gC;
  double g_log_noise = 0;
};

enum class BagNeeds { marginals, nystrom, exact };

// Which of T and C the model's bag term reads.
BagNeeds bag_needs(const ModelSpec& spec);

// l_a, with constants; gradients into *grad when non-null.
double bag_term(const ModelSpec& spec, double log_noise, const BagPosterior& bag, BagGradient* grad);

}  // namespace vbagg
