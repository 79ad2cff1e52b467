#include "linalg.hpp"

#include <Eigen/Cholesky>
#include <cmath>
#include <sstream>

namespace vbagg {

Matrix jittered_cholesky(const Matrix& K, double& jitter, double max_jitter) {
  const Index m = K.rows();
  if (!K.allFinite() || !(jitter > 0) || !std::isfinite(max_jitter))
    throw NumericalError("the inducing-point covariance is not finite (kernel hyperparameters overflowed)");
  for (;;) {
    Matrix A = K;
    A.diagonal().array() += jitter;
    Eigen::LLT<Matrix> llt(A);
    if (llt.info() == Eigen::Success && llt.matrixL().toDenseMatrix().diagonal().minCoeff() > 0) {
      return llt.matrixL().toDenseMatrix();
    }
    if (jitter * 10 > max_jitter) {
      std::ostringstream msg;
      msg << "the " << m << " x " << m << " inducing-point covariance is not positive definite even with jitter "
          << jitter << "; inducing points may coincide or the kernel lengthscales may have collapsed";
      throw NumericalError(msg.str());
    }
    jitter *= 10;
  }
}

Matrix lower_inverse(const Matrix& L, int threads) {
  const Index n = L.rows();
  Matrix inv = Matrix::Zero(n, n);
  // Columns j.. of L^{-1} are zero above row j: each block solves the trailing system only (a
  // third of the flops of solving against the whole identity).
  for_column_blocks(n, threads, [&](Index j, Index w) {
    auto X = inv.block(j, j, n - j, w);
    X.topRows(w).setIdentity();
    L.block(j, j, n - j, n - j).triangularView<Eigen::Lower>().solveInPlace(X);
  });
  return inv;
}

Matrix cholesky_backward(const Matrix& L, const Matrix& Linv, const Matrix& grad_L, int threads) {
  const Index n = L.rows();
  // P = Phi(L^T dL/dL): the lower triangle with the diagonal halved. Its columns j.. read rows j..
  // of both triangular factors only.
  Matrix P = Matrix::Zero(n, n);
  for_column_blocks(n, threads, [&](Index j, Index w) {
    const Matrix G = grad_L.block(j, j, n - j, w).triangularView<Eigen::Lower>();
    P.block(j, j, n - j, w).noalias() = L.block(j, j, n - j, n - j).transpose().triangularView<Eigen::Upper>() * G;
    P.block(j, j, w, w).triangularView<Eigen::StrictlyUpper>().setZero();
    P.block(j, j, w, w).diagonal() *= 0.5;
  });
  // <L^T dL/dL, Phi(L^{-1} dK L^{-T})> = <L^{-T} P L^{-1}, dK>; dK is symmetric. P L^{-1} is zero
  // above row j in columns j.. (both are lower triangular), then L^{-T} (upper) from the left.
  Matrix S(n, n);
  for_column_blocks(n, threads, [&](Index j, Index w) {
    const Matrix PL = P.bottomRightCorner(n - j, n - j).triangularView<Eigen::Lower>() * Linv.block(j, j, n - j, w);
    S.middleCols(j, w).noalias() = Linv.bottomRows(n - j).transpose() * PL;
  });
  return 0.5 * (S + S.transpose());
}

}  // namespace vbagg
