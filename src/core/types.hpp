// Shared numeric types and error classes of the vbagg core.
#pragma once

#include <Eigen/Core>
#include <stdexcept>
#include <string>

namespace vbagg {

using Index = Eigen::Index;
using Vector = Eigen::VectorXd;
using Matrix = Eigen::MatrixXd;

// Input that cannot be modelled (bad shapes, negative weights, ...). Apps map it to exit code 1.
class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A setting that is out of range or inconsistent. Apps map it to exit code 2.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The numerics could not proceed (Cholesky failed at maximal jitter, non-finite objective).
class NumericalError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace vbagg
