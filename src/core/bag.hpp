// What a bag term reads of q for one bag, and the derivatives it returns (MODEL.md sections 4, 5).
#pragma once

#include "types.hpp"

namespace vbagg {

// Which draws of f the sampled expectation (MODEL.md 4e ii) uses: standard normals that are a pure
// function of (seed, step, bag, index) (counter_rng.hpp), so results depend on neither threads nor
// batch order, and every optimiser step sees fresh draws.
struct DrawKey {
  unsigned long long seed = 0, step = 0, bag = 0;
  int samples = 0;
};

// m and s2 are always set. T (M x N_a, T = L_v^T L_W^{-1} K_Wa) is set for terms in nystrom mode,
// C (N_a x N_a, the exact within-bag covariance of f) in exact mode.
struct BagPosterior {
  Eigen::Ref<const Vector> m;
  Eigen::Ref<const Vector> s2;
  Eigen::Ref<const Vector> weight;  // effective pixel weights c_i p_i
  double y;
  const Matrix* T = nullptr;
  const Matrix* C = nullptr;
  // A unit effect u_a ~ N(0, e^{2 unit_log_sd}) on the log rate (MODEL.md 4g), integrated out of
  // the count's likelihood exactly (count likelihoods only).
  bool has_unit_effect = false;
  double unit_log_sd = 0;
  DrawKey draws;  // with the sampled expectation
};

// Derivatives of l_a. gT and gC are only written when T and C were given; g_params has one entry
// per likelihood parameter.
struct BagGradient {
  Vector gm, gs2;
  Matrix gT, gC;
  Vector g_params;
  double g_unit_log_sd = 0;  // d/d unit_log_sd, with a unit effect
};

// Which of T and C a bag term reads.
enum class BagNeeds { marginals, nystrom, exact };

}  // namespace vbagg
