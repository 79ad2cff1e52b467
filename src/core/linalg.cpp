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

Matrix lower_inverse(const Matrix& L) {
  Matrix inv = Matrix::Identity(L.rows(), L.cols());
  L.triangularView<Eigen::Lower>().solveInPlace(inv);
  return inv.triangularView<Eigen::Lower>();
}

Matrix cholesky_backward(const Matrix& L, const Matrix& Linv, const Matrix& grad_L) {
  // Phi(A): lower triangle with the diagonal halved.
  auto phi = [](const Matrix& A) {
    Matrix P = A.triangularView<Eigen::Lower>();
    P.diagonal() *= 0.5;
    return P;
  };
  const Matrix P = phi(L.transpose() * grad_L.triangularView<Eigen::Lower>().toDenseMatrix());
  // <L^T dL/dL, Phi(L^{-1} dK L^{-T})> = <L^{-T} P L^{-1}, dK>; dK is symmetric.
  const Matrix S = Linv.transpose() * P * Linv;
  return 0.5 * (S + S.transpose());
}

}  // namespace vbagg
