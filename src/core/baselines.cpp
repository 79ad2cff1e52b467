#include "baselines.hpp"

#include <cmath>

namespace vbagg {

double ConstantRates::of(const std::string& unit_id) const {
  const auto it = unit.find(unit_id);
  return it != unit.end() ? it->second : overall;
}

ConstantRates fit_constant_rates(const Dataset& data, const std::vector<Index>& train_bags) {
  const Vector P = data.exposures();
  ConstantRates r;
  double y = 0, p = 0;
  for (Index a : train_bags) {
    r.unit[data.bag_ids[static_cast<size_t>(a)]] = data.response[a] / P[a];
    y += data.response[a];
    p += P[a];
  }
  r.overall = p > 0 ? y / p : NAN;
  return r;
}

Vector constant_rate(const Dataset& data) {
  const Vector P = data.bag_weights();
  Vector rate(data.num_pixels());
  for (Index a = 0; a < data.num_bags(); ++a)
    rate.segment(data.bag_begin(a), data.bag_size(a)).setConstant(P[a] > 0 ? data.response[a] / P[a] : 0.0);
  return rate;
}

double overall_rate(const Dataset& data) { return data.response.sum() / data.bag_weights().sum(); }

Dataset collapse_bags(const Dataset& data) {
  const Vector w = data.weights();
  const Vector P = data.bag_weights();
  Dataset c;
  c.inputs.resize(data.num_inputs(), data.num_bags());
  c.population = P;
  c.coverage = Vector::Ones(data.num_bags());
  c.response = data.response;
  c.trials = data.trials;
  c.source = data.source;
  c.input_names = data.input_names;
  c.bag_ids = data.bag_ids;
  c.global_bag = data.global_bag;
  c.offsets.resize(static_cast<size_t>(data.num_bags()) + 1);
  for (Index a = 0; a < data.num_bags(); ++a) {
    const Index b = data.bag_begin(a), n = data.bag_size(a);
    c.inputs.col(a) = P[a] > 0 ? Vector(data.inputs.middleCols(b, n) * w.segment(b, n) / P[a])
                               : Vector(data.inputs.middleCols(b, n).rowwise().mean());
    c.offsets[static_cast<size_t>(a)] = a;
  }
  c.offsets.back() = data.num_bags();
  return c;
}

}  // namespace vbagg
