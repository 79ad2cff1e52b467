// Dense linear algebra the variational posterior needs beyond Eigen: jittered Cholesky and its
// reverse-mode derivative.
#pragma once

#include "types.hpp"

namespace vbagg {

// Lower Cholesky factor of K + jitter*I. When the factorisation fails the jitter is multiplied by
// 10 until it succeeds or exceeds max_jitter (then NumericalError). `jitter` returns the value used.
Matrix jittered_cholesky(const Matrix& K, double& jitter, double max_jitter);

// Reverse mode of K = L L^T (Murray 2016, "Differentiation of the Cholesky decomposition"):
// from dL/dL (lower triangular part used) to the symmetric gradient dL/dK. Linv = L^{-1}.
Matrix cholesky_backward(const Matrix& L, const Matrix& Linv, const Matrix& grad_L);

// Inverse of a lower-triangular matrix.
Matrix lower_inverse(const Matrix& L);

}  // namespace vbagg
