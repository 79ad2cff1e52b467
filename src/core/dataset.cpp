#include "dataset.hpp"

#include <cmath>
#include <numeric>

namespace vbagg {

Vector Dataset::bag_weights() const {
  const Vector w = weights();
  Vector total(num_bags());
  for (Index a = 0; a < num_bags(); ++a) total[a] = w.segment(bag_begin(a), bag_size(a)).sum();
  return total;
}

std::string Dataset::bag_name(Index a) const {
  if (static_cast<size_t>(a) < bag_ids.size()) return "'" + bag_ids[a] + "'";
  return "#" + std::to_string(a);
}

std::string Dataset::bag_id(Index a) const {
  return static_cast<size_t>(a) < bag_ids.size() ? bag_ids[a] : "#" + std::to_string(a);
}

void Dataset::validate() const {
  const Index n = num_pixels();
  if (num_bags() < 1 || offsets.front() != 0 || offsets.back() != n)
    throw DataError("dataset: bag offsets must start at 0 and end at the number of pixels");
  if (population.size() != n || coverage.size() != n)
    throw DataError("dataset: population and coverage must have one entry per pixel");
  if (response.size() != num_bags()) throw DataError("dataset: response must have one entry per bag");
  if (!input_names.empty() && static_cast<Index>(input_names.size()) != num_inputs())
    throw DataError("dataset: input_names must name every input");
  if (!inputs.allFinite()) throw DataError("dataset: pixel inputs contain NaN or infinite values");
  for (Index i = 0; i < n; ++i) {
    if (!(population[i] >= 0) || !std::isfinite(population[i]))
      throw DataError("dataset: pixel " + std::to_string(i) + " has a negative or non-finite population");
    if (!(coverage[i] > 0 && coverage[i] <= 1))
      throw DataError("dataset: pixel " + std::to_string(i) + " has a coverage fraction outside (0, 1]");
  }
  if (trials.size() && trials.size() != num_bags()) throw DataError("dataset: trials must have one entry per bag");
  for (Index a = 0; a < num_bags(); ++a) {
    if (offsets[a + 1] <= offsets[a]) throw DataError("dataset: bag " + bag_name(a) + " has no pixels");
    if (!std::isfinite(response[a])) throw DataError("dataset: bag " + bag_name(a) + " has a non-finite response");
    if (trials.size() && !(trials[a] > 0 && trials[a] >= response[a] && response[a] >= 0))
      throw DataError("dataset: bag " + bag_name(a) + " has " + std::to_string(response[a]) + " positives of " +
                      std::to_string(trials[a]) + " trials");
  }
}

Dataset make_dataset(const Matrix& inputs, const Vector& population, const std::vector<Index>& bag_of_pixel,
                     const Vector& response) {
  const Index n = inputs.cols();
  if (population.size() != n || static_cast<Index>(bag_of_pixel.size()) != n)
    throw DataError("make_dataset: inputs, population and bag index must have one entry per pixel");
  const Index bags = response.size();
  std::vector<Index> count(bags + 1, 0);
  for (Index b : bag_of_pixel) {
    if (b < 0 || b >= bags) throw DataError("make_dataset: bag index " + std::to_string(b) + " out of range");
    ++count[b + 1];
  }
  Dataset d;
  d.offsets.assign(bags + 1, 0);
  std::partial_sum(count.begin(), count.end(), d.offsets.begin());
  std::vector<Index> next(d.offsets.begin(), d.offsets.end() - 1);
  d.inputs.resize(inputs.rows(), n);
  d.population.resize(n);
  d.coverage = Vector::Ones(n);
  for (Index i = 0; i < n; ++i) {
    const Index dst = next[bag_of_pixel[i]]++;
    d.inputs.col(dst) = inputs.col(i);
    d.population[dst] = population[i];
  }
  d.response = response;
  return d;
}

Dataset subset_bags(const Dataset& data, const std::vector<Index>& bags) {
  Dataset s;
  s.input_names = data.input_names;
  Index total = 0;
  for (Index a : bags) total += data.bag_size(a);
  s.inputs.resize(data.num_inputs(), total);
  s.population.resize(total);
  s.coverage.resize(total);
  s.response.resize(static_cast<Index>(bags.size()));
  if (data.trials.size()) s.trials.resize(static_cast<Index>(bags.size()));
  s.offsets.assign(1, 0);
  Index pos = 0;
  for (size_t k = 0; k < bags.size(); ++k) {
    const Index a = bags[k], b = data.bag_begin(a), len = data.bag_size(a);
    s.inputs.middleCols(pos, len) = data.inputs.middleCols(b, len);
    s.population.segment(pos, len) = data.population.segment(b, len);
    s.coverage.segment(pos, len) = data.coverage.segment(b, len);
    s.response[static_cast<Index>(k)] = data.response[a];
    if (data.trials.size()) s.trials[static_cast<Index>(k)] = data.trials[a];
    if (!data.bag_ids.empty()) s.bag_ids.push_back(data.bag_ids[a]);
    pos += len;
    s.offsets.push_back(pos);
  }
  return s;
}

}  // namespace vbagg
