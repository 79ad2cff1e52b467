#include "dataset.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace vbagg {

Vector Dataset::bag_weights() const {
  const Vector w = weights();
  Vector total(num_bags());
  for (Index a = 0; a < num_bags(); ++a) total[a] = w.segment(bag_begin(a), bag_size(a)).sum();
  return total;
}

Vector Dataset::exposures() const {
  Vector P = bag_weights();
  for (Index a = 0; a < trials.size(); ++a)
    if (trials[a] > 0) P[a] = trials[a];
  return P;
}

std::vector<Index> Dataset::bags_of_source(int s) const {
  std::vector<Index> out;
  for (Index a = 0; a < num_bags(); ++a)
    if (source_of(a) == s) out.push_back(a);
  return out;
}

std::vector<Index> Dataset::observed_among(const std::vector<Index>& bags) const {
  std::vector<Index> out;
  for (Index a : bags)
    if (observed(a)) out.push_back(a);
  return out;
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
  if (!source.empty() && static_cast<Index>(source.size()) != num_bags())
    throw DataError("dataset: source must have one entry per bag");
  for (int s : source)
    if (s < 0) throw DataError("dataset: a bag has a negative source index");
  for (Index a = 0; a < num_bags(); ++a) {
    if (offsets[a + 1] <= offsets[a]) throw DataError("dataset: bag " + bag_name(a) + " has no pixels");
    if (std::isinf(response[a])) throw DataError("dataset: bag " + bag_name(a) + " has an infinite response");
    // A bag without trials (0) in a dataset with trials belongs to a source that has none; an
    // unobserved binomial bag keeps its trials, which its predicted positives scale with.
    if (trials.size() && trials[a] != 0 &&
        !(trials[a] > 0 && (!observed(a) || (trials[a] >= response[a] && response[a] >= 0))))
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

std::string unit_of_bag(const std::string& bag_id) {
  const size_t at = bag_id.rfind('@');
  return at == std::string::npos ? bag_id : bag_id.substr(0, at);
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
    if (!data.source.empty()) s.source.push_back(data.source[static_cast<size_t>(a)]);
    if (!data.bag_ids.empty()) s.bag_ids.push_back(data.bag_ids[a]);
    if (!data.global_bag.empty()) s.global_bag.push_back(data.global_bag[static_cast<size_t>(a)]);
    pos += len;
    s.offsets.push_back(pos);
  }
  return s;
}

Dataset join_sources(const std::vector<Dataset>& parts) {
  if (parts.empty()) throw DataError("join_sources: no sources");
  if (parts.size() == 1) return parts[0];
  Dataset d;
  d.input_names = parts[0].input_names;
  Index pixels = 0, bags = 0;
  bool trials = false;
  for (const Dataset& p : parts) {
    if (p.num_inputs() != parts[0].num_inputs())
      throw DataError("join_sources: the sources have " + std::to_string(p.num_inputs()) + " and " +
                      std::to_string(parts[0].num_inputs()) + " inputs");
    pixels += p.num_pixels();
    bags += p.num_bags();
    trials |= p.trials.size() > 0;
  }
  d.inputs.resize(parts[0].num_inputs(), pixels);
  d.population.resize(pixels);
  d.coverage.resize(pixels);
  d.response.resize(bags);
  if (trials) d.trials = Vector::Zero(bags);
  d.offsets.assign(1, 0);
  Index pos = 0, bag = 0;
  for (size_t s = 0; s < parts.size(); ++s) {
    const Dataset& p = parts[s];
    d.inputs.middleCols(pos, p.num_pixels()) = p.inputs;
    d.population.segment(pos, p.num_pixels()) = p.population;
    d.coverage.segment(pos, p.num_pixels()) = p.coverage;
    d.response.segment(bag, p.num_bags()) = p.response;
    if (p.trials.size()) d.trials.segment(bag, p.num_bags()) = p.trials;
    for (Index a = 0; a < p.num_bags(); ++a) {
      d.offsets.push_back(pos + p.offsets[static_cast<size_t>(a + 1)]);
      d.bag_ids.push_back(p.bag_id(a));
      d.source.push_back(static_cast<int>(s));
      if (!p.global_bag.empty()) d.global_bag.push_back(p.global_bag[static_cast<size_t>(a)]);
    }
    pos += p.num_pixels();
    bag += p.num_bags();
  }
  return d;
}

std::vector<SourceGroup> group_by_source(const Dataset& data, const std::vector<Index>& bags) {
  std::vector<SourceGroup> groups;
  for (size_t k = 0; k < bags.size(); ++k) {
    const int s = data.source_of(bags[k]);
    auto it = std::find_if(groups.begin(), groups.end(), [s](const SourceGroup& g) { return g.source == s; });
    if (it == groups.end()) it = groups.insert(groups.end(), SourceGroup{s, {}, {}});
    it->bags.push_back(bags[k]);
    it->at.push_back(k);
  }
  return groups;
}

}  // namespace vbagg
