// Covariate standardisation: means and sds from training pixels, kept for prediction.
#pragma once

#include <vector>

#include "collective.hpp"
#include "dataset.hpp"

namespace vbagg {

struct Standardization {
  Vector mean, sd;  // one per standardised input row (the first mean.size() rows)

  // x <- (x - mean) / sd on the first mean.size() rows; later rows (coordinates) are untouched.
  void apply(Matrix& inputs) const;
};

// Means and sds of the first `rows` inputs over the pixels of `bags`. A row whose sd is zero on
// those pixels throws DataError naming it (the pipeline removes constant covariates earlier).
// In a data-parallel run each process passes its own training bags and all get the sums' result.
Standardization fit_standardization(const Dataset& data, const std::vector<Index>& bags, Index rows,
                                    const Collective& processes = one_process());

}  // namespace vbagg
