#include "gauss_hermite.hpp"

#include <Eigen/Eigenvalues>
#include <cmath>
#include <map>
#include <mutex>

namespace vbagg {

const NormalQuadrature& normal_quadrature(int n) {
  static std::mutex lock;
  static std::map<int, NormalQuadrature> rules;
  const std::lock_guard<std::mutex> guard(lock);
  auto it = rules.find(n);
  if (it != rules.end()) return it->second;
  // Jacobi matrix of the probabilists' Hermite polynomials: zero diagonal, off-diagonal sqrt(k).
  // Its eigenvalues are the nodes; the squared first components of its eigenvectors the weights.
  Matrix J = Matrix::Zero(n, n);
  for (int k = 1; k < n; ++k) J(k, k - 1) = J(k - 1, k) = std::sqrt(static_cast<double>(k));
  const Eigen::SelfAdjointEigenSolver<Matrix> eig(J);
  NormalQuadrature q;
  q.nodes = eig.eigenvalues();
  q.weights = eig.eigenvectors().row(0).transpose().array().square();
  q.weights /= q.weights.sum();
  return rules.emplace(n, std::move(q)).first->second;
}

}  // namespace vbagg
