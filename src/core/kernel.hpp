// Stationary kernels and their sums, with hyperparameters in log space.
#pragma once

#include <string>
#include <vector>

#include "types.hpp"

namespace vbagg {

enum class KernelType { rbf, ard, matern12, matern32, matern52 };

KernelType parse_kernel_type(const std::string& name);  // throws ConfigError listing allowed names
std::string to_string(KernelType type);

// One stationary component sigma^2 * kappa(r^2) acting on the input rows [begin, begin + dim),
// where r^2 is the squared distance after dividing each input by its lengthscale.
struct KernelPart {
  KernelType type = KernelType::rbf;
  Index begin = 0;
  Index dim = 1;
  double log_variance = 0.0;
  Vector log_lengthscale = Vector::Zero(1);  // size dim for ard, 1 otherwise

  Index num_params() const { return 1 + log_lengthscale.size(); }
};

// Scratch of a cross-covariance evaluation: the scaled squared distances of each part, kept so
// that the backward pass does not recompute them.
struct KernelCache {
  std::vector<Matrix> sqdist;
};

// k(x, x') = sum of parts. The malaria kernel is ard on covariates + matern32 on coordinates.
class Kernel {
 public:
  Kernel() = default;
  explicit Kernel(std::vector<KernelPart> parts);

  const std::vector<KernelPart>& parts() const { return parts_; }
  std::vector<KernelPart>& parts() { return parts_; }
  Index num_params() const;
  Vector params() const;  // [log sigma^2, log lengthscales...] per part
  void set_params(const Vector& theta);
  std::vector<std::string> param_names() const;

  // k(x, x) of a stationary kernel: the sum of the part variances.
  double diag_value() const;
  // Adds g * d k(x,x) / d theta to grad (the gradient of a term g * k(x, x)).
  void diag_backward(double g, Vector& grad) const;

  // K = k(X1, X2) for inputs stored one per column (D x n1, D x n2).
  void cross(const Matrix& X1, const Matrix& X2, Matrix& K, KernelCache* cache = nullptr) const;
  // Given G = dL/dK for K = k(X1, X2) computed with `cache`, adds dL/dtheta to grad_theta and,
  // when grad_X1 is non-null, dL/dX1 (D x n1) to *grad_X1.
  void cross_backward(const Matrix& X1, const Matrix& X2, const Matrix& G, const KernelCache& cache, Vector& grad_theta,
                      Matrix* grad_X1) const;

 private:
  std::vector<KernelPart> parts_;
};

// Builds the sum kernel of the CLI: `covariates` (ard|rbf|none) on rows [0, num_covariates) and
// `space` (matern12|matern32|matern52|rbf|none) on the following num_coords rows.
Kernel make_kernel(const std::string& covariates, const std::string& space, Index num_covariates, Index num_coords);

// Sets every variance to 1 and every lengthscale to the median pairwise distance of a seeded
// subsample of the part's inputs (the median heuristic).
void init_kernel_median_heuristic(Kernel& kernel, const Matrix& inputs, unsigned long long seed);

}  // namespace vbagg
