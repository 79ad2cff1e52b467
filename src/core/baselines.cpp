#include "baselines.hpp"

namespace vbagg {

Vector constant_rate(const Dataset& data) {
  const Vector P = data.bag_weights();
  Vector rate(data.num_pixels());
  for (Index a = 0; a < data.num_bags(); ++a)
    rate.segment(data.bag_begin(a), data.bag_size(a)).setConstant(P[a] > 0 ? data.response[a] / P[a] : 0.0);
  return rate;
}

double overall_rate(const Dataset& data) { return data.response.sum() / data.bag_weights().sum(); }

}  // namespace vbagg
