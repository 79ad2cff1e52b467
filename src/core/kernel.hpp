// Stationary kernels, their sums and products, with hyperparameters in log space.
#pragma once

#include <string>
#include <vector>

#include "buffer.hpp"
#include "types.hpp"

namespace vbagg {

// cycle is the seasonal kernel without its mean over the year (make_kernel's season "cycle"):
// on the two circle inputs it reads only their phase theta, and is
// sigma^2 (e^{x cos(theta - theta')} - I0(x)) / (e^x - I0(x)) with x = 1 / l^2, the periodic rbf
// less its constant Fourier term, rescaled to variance sigma^2. A function of the phase alone, it is
// positive definite wherever an inducing input lies, on the circle or inside it; at long
// lengthscales it tends to sigma^2 cos(theta - theta'), the first harmonic.
enum class KernelType { rbf, ard, matern12, matern32, matern52, cycle };

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
  // A factor of a product whose scale another factor carries: its variance stays 1 and is not a
  // parameter (a product's variances would otherwise trade off against each other).
  bool fixed_variance = false;

  Index num_params() const { return (fixed_variance ? 0 : 1) + log_lengthscale.size(); }
};

// How parts combine: k = sum over terms of the product over the term's factors of the sum of the
// factor's parts (indices into the part list). Space x (seasonal + trend) is one term of two
// factors, {space} and {seasonal, trend}.
using KernelFactor = std::vector<Index>;
using KernelTerm = std::vector<KernelFactor>;

// Scratch of a cross-covariance evaluation, kept for its backward pass: per part, the inputs
// divided by the lengthscales and the scaled squared distances. Reusing one cache across
// evaluations of varying size allocates only when a larger one comes.
struct KernelCache {
  struct Part {
    Buffer z1, z2;  // dim x n1, dim x n2 (dim x 1 when constant)
    // n1 x n2 (n1 x 1 when constant): the squared distances, or the values of a squared
    // exponential (rbf, ard); cross_backward overwrites it with dL/d(r^2)
    Buffer r2;
    // The part's inputs were the same in every column of X2 (the time inputs of one period's
    // pixels), so its values were one column, evaluated once and repeated.
    bool constant = false;
    // cycle: 1 / |u| of each column of X1's circle inputs (0 at the origin), for dL/dX1.
    Eigen::ArrayXd inverse_norms1;
  };
  std::vector<Part> parts;
  std::vector<Buffer> factors;  // n1 x n2 values of each factor of a product term
  Buffer constant_column;       // a constant part's values (n1 x 1)
  Eigen::ArrayXd column, norms1, norms2;
};

// k(x, x') = sum of terms. The malaria benchmark's kernel is ard on covariates + matern32 on
// coordinates; a space-time model's default is ard on covariates + matern52 on coordinates x
// (seasonal + trend) on time.
class Kernel {
 public:
  Kernel() = default;
  // The sum of the parts (each part a term of one factor).
  explicit Kernel(std::vector<KernelPart> parts);
  // Parts combined by `terms`, which must use every part exactly once.
  Kernel(std::vector<KernelPart> parts, std::vector<KernelTerm> terms);

  const std::vector<KernelPart>& parts() const { return parts_; }
  std::vector<KernelPart>& parts() { return parts_; }
  const std::vector<KernelTerm>& terms() const { return terms_; }
  // Whether every term is one part (a plain sum).
  bool is_sum() const;
  Index num_params() const;
  Vector params() const;  // [log sigma^2, log lengthscales...] per part
  void set_params(const Vector& theta);
  std::vector<std::string> param_names() const;

  // k(x, x) of a stationary kernel: the sum over terms of the product of its factors' variances.
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
  // Evaluates part c into `out`, replacing its values or adding to them.
  void add_part(size_t c, const Eigen::Ref<const Matrix>& X1, const Eigen::Ref<const Matrix>& X2,
                Eigen::Ref<Matrix> out, bool assign, KernelCache& cache) const;
  // The same, column by column.
  void add_columns(size_t c, const Eigen::Ref<const Matrix>& X1, const Eigen::Ref<const Matrix>& X2,
                   Eigen::Ref<Matrix> out, bool assign, KernelCache& cache) const;
  // Given dL/d(part c's values), adds its parameter gradients at `offset` and its input gradient.
  void part_backward(size_t c, const Eigen::Ref<const Matrix>& G, KernelCache& cache, Index offset, Vector& grad_theta,
                     Matrix* grad_X1) const;
  double factor_variance(const KernelFactor& f) const;

  std::vector<KernelPart> parts_;
  std::vector<KernelTerm> terms_;
};

// The time axis as model inputs: the time t in years since the start of a calendar year (the
// first period's: small numbers, so squared distances do not cancel), then cos and sin of 2 pi t
// (the season as a point on the unit circle). An rbf on the circle rows is the periodic kernel with a one-year
// period, exp(-2 sin^2(pi (t - t')) / l^2), as |u - u'|^2 = 4 sin^2(pi (t - t')).
inline constexpr Index kTimeInputs = 3;
// The three time inputs of time t (in years), into out.
void time_inputs(double t, Eigen::Ref<Vector> out);

// Builds the kernel of the CLI: `covariates` (ard|rbf|matern*|none) on rows [0, num_covariates), or
// `ard+additive` (the ard and, beside it, an rbf on each covariate alone, each a term with its own
// variance and lengthscale), and
// `space` (matern12|matern32|matern52|rbf|none) on the following num_coords rows. With a `time`
// kernel (seasonal|trend|seasonal+trend) on the kTimeInputs rows after those, the space part is
// multiplied by the sum of the time parts (the space part's variance fixed at 1, the time parts
// carrying the scale); without a space kernel the time parts are added on their own. The seasonal
// part is `season`: periodic (an rbf on the circle inputs, whose constant Fourier term acts as a
// static field) or cycle (KernelType::cycle, the same less that term, so that the static field
// is the trend's alone and the season's amplitude is learned apart from it). `space_time` shared
// multiplies one space part by the sum of the time parts; separate (with both time parts) gives
// each its own space part, space_a x season + space_b x trend, so that the season's spatial
// pattern and the static field have lengthscales of their own.
Kernel make_kernel(const std::string& covariates, const std::string& space, Index num_covariates, Index num_coords,
                   const std::string& time = "none", const std::string& season = "periodic",
                   const std::string& space_time = "shared");

// The median heuristic, in two steps so that the inputs may be spread over processes
// (PixelColumns::gather in between): the seeded subsample's columns among n inputs, then every
// variance set to 1 and every lengthscale to the median pairwise distance of the part's inputs
// in the sampled columns (fixed variances stay 1).
std::vector<Index> median_heuristic_sample(Index n, unsigned long long seed);
void init_kernel_median_heuristic(Kernel& kernel, const Matrix& sample);

}  // namespace vbagg
