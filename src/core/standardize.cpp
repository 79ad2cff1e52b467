#include "standardize.hpp"

#include <cmath>

namespace vbagg {

void Standardization::apply(Matrix& inputs) const {
  const Index k = mean.size();
  inputs.topRows(k).colwise() -= mean;
  inputs.topRows(k) = sd.cwiseInverse().asDiagonal() * inputs.topRows(k);
}

Standardization fit_standardization(const Dataset& data, const std::vector<Index>& bags, Index rows,
                                    const Collective& processes) {
  Standardization s;
  Vector sums = Vector::Zero(rows + 1);  // the rows' sums, then the number of pixels
  for (Index a : bags) {
    const auto X = data.inputs.block(0, data.bag_begin(a), rows, data.bag_size(a));
    sums.head(rows) += X.rowwise().sum();
    sums[rows] += static_cast<double>(X.cols());
  }
  processes.sum(sums);
  s.mean = sums.head(rows);
  const double n = sums[rows];
  Vector sq = Vector::Zero(rows);
  if (n == 0) throw DataError("cannot standardise covariates: the training bags have no pixels");
  s.mean /= n;
  for (Index a : bags) {
    const auto X = data.inputs.block(0, data.bag_begin(a), rows, data.bag_size(a));
    sq += (X.colwise() - s.mean).array().square().matrix().rowwise().sum();
  }
  processes.sum(sq);
  s.sd = (sq / n).cwiseSqrt();
  for (Index k = 0; k < rows; ++k)
    if (!(s.sd[k] > 0)) {
      const std::string name =
          static_cast<size_t>(k) < data.input_names.size() ? data.input_names[k] : "#" + std::to_string(k);
      throw DataError("covariate '" + name + "' is constant over the training pixels and cannot be standardised");
    }
  return s;
}

}  // namespace vbagg
