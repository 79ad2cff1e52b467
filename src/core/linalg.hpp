// Dense linear algebra the variational posterior needs beyond Eigen: jittered Cholesky and its
// reverse-mode derivative.
#pragma once

#include <algorithm>

#include "denormals.hpp"
#include "types.hpp"

namespace vbagg {

// The M x M products of a step run by blocks of this many columns of their result. The blocks are
// fixed, whatever the thread count, and each is one single-threaded product, so the results are
// the same bits on any number of threads.
inline constexpr Index kColumnBlock = 64;

// Calls f(first, count) for every block of kColumnBlock columns of [0, cols), on `threads` threads.
template <typename F>
void for_column_blocks(Index cols, int threads, const F& f) {
  const Index blocks = (cols + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (threads > 1 && blocks > 1)
  for (Index b = 0; b < blocks; ++b) {
    const FlushDenormals flush;
    f(b * kColumnBlock, std::min(kColumnBlock, cols - b * kColumnBlock));
  }
}

// Lower Cholesky factor of K + jitter*I. When the factorisation fails the jitter is multiplied by
// 10 until it succeeds or exceeds max_jitter (then NumericalError). `jitter` returns the value used.
Matrix jittered_cholesky(const Matrix& K, double& jitter, double max_jitter);

// Reverse mode of K = L L^T (Murray 2016, "Differentiation of the Cholesky decomposition"):
// from dL/dL (lower triangular part used) to the symmetric gradient dL/dK. Linv = L^{-1}.
Matrix cholesky_backward(const Matrix& L, const Matrix& Linv, const Matrix& grad_L, int threads = 1);

// Inverse of a lower-triangular matrix.
Matrix lower_inverse(const Matrix& L, int threads = 1);

}  // namespace vbagg
