// Gauss-Hermite quadrature for expectations under a standard normal: E[h(Z)] ~ sum_k w_k h(z_k).
#pragma once

#include "types.hpp"

namespace vbagg {

struct NormalQuadrature {
  Vector nodes;    // z_k
  Vector weights;  // w_k, summing to 1
};

// The n-point rule (Golub-Welsch), computed once per n; exact for polynomials of degree < 2n.
const NormalQuadrature& normal_quadrature(int n);

}  // namespace vbagg
