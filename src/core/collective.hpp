// The processes of a data-parallel run as the numerics see them. The core holds no MPI: the apps
// hand it a Collective that talks to the other processes, or none for a run in one process.
#pragma once

#include <vector>

#include "types.hpp"

namespace vbagg {

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Replaces `values` on every process by their element-wise sum over the processes. The sum is
  // taken in an order fixed by the number of processes, so a run is deterministic for a given
  // size. Every process must call it with the same n.
  virtual void reduce_sum(double* values, Index n) const = 0;
  // Replaces `values` on every process by their element-wise maximum over the processes.
  virtual void reduce_max(double* values, Index n) const = 0;

  void sum(Vector& v) const { reduce_sum(v.data(), v.size()); }
  void sum(Matrix& m) const { reduce_sum(m.data(), m.size()); }
  double sum(double x) const {
    reduce_sum(&x, 1);
    return x;
  }
  void max(Vector& v) const { reduce_max(v.data(), v.size()); }
  // The smallest and largest value of each row of `rows` over every process's columns (k x 2:
  // min, max; +inf and -inf for a row no process holds a column of).
  Matrix row_ranges(const Eigen::Ref<const Matrix>& rows) const;
  // Whether `failed` holds on any process: lets every process leave a step together when one of
  // them could not compute its part, instead of waiting for it in the next reduction.
  bool any(bool failed) const { return sum(failed ? 1.0 : 0.0) > 0; }
};

// The one process of an ordinary run: every reduction is the identity.
const Collective& one_process();

}  // namespace vbagg
