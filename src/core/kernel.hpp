// Stationary kernels and their sums, with hyperparameters in log space.
#pragma once

#include <string>
#include <vector>

#include "buffer.hpp"
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

// Scratch of a cross-covariance evaluation, kept for its backward pass: per part, the inputs
// divided by the lengthscales and the scaled squared distances. Reusing one cache across
// evaluations of varying size allocates only when a larger one comes.
struct KernelCache {
  struct Part {
    Buffer z1, z2;  // dim x n1, dim x n2
    Buffer r2;      // n1 x n2; cross_backward overwrites it with dL/d(r^2)
  };
  std::vector<Part> parts;
  Eigen::ArrayXd column, norms1, norms2;
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

  // K = k(X1, X2) for inputs stored one per column (D x n1, D x n2); K is resized.
  void cross(const Matrix& X1, const Matrix& X2, Matrix& K, KernelCache* cache = nullptr) const;
  // The same into a preallocated n1 x n2 K, in one pass over K per part (no temporaries).
  void cross_into(const Eigen::Ref<const Matrix>& X1, const Eigen::Ref<const Matrix>& X2, Eigen::Ref<Matrix> K,
                  KernelCache& cache) const;
  // Given G = dL/dK for the last evaluation that filled `cache`, adds dL/dtheta to grad_theta and,
  // when grad_X1 is non-null, dL/dX1 (D x n1) to *grad_X1. Consumes the cache.
  void cross_backward(const Eigen::Ref<const Matrix>& G, KernelCache& cache, Vector& grad_theta, Matrix* grad_X1) const;

 private:
  std::vector<KernelPart> parts_;
};

// Builds the sum kernel of the CLI: `covariates` (ard|rbf|none) on rows [0, num_covariates) and
// `space` (matern12|matern32|matern52|rbf|none) on the following num_coords rows.
Kernel make_kernel(const std::string& covariates, const std::string& space, Index num_covariates, Index num_coords);

// The median heuristic, in two steps so that the inputs may be spread over processes
// (PixelColumns::gather in between): the seeded subsample's columns among n inputs, then every
// variance set to 1 and every lengthscale to the median pairwise distance of the part's inputs
// in the sampled columns.
std::vector<Index> median_heuristic_sample(Index n, unsigned long long seed);
void init_kernel_median_heuristic(Kernel& kernel, const Matrix& sample);

}  // namespace vbagg
