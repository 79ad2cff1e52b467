// In-memory bag dataset: pixels grouped by bag, one observation per bag.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "types.hpp"

namespace vbagg {

// Pixels are stored bag by bag: bag a owns the columns [offsets[a], offsets[a+1]) of `inputs`.
// A pixel that straddles a unit border appears once in each unit it overlaps, with its share of
// area in `coverage`.
struct Dataset {
  Matrix inputs;                         // D x N, one column per pixel (standardised covariates, coordinates)
  Vector population;                     // N, weight p_i >= 0 (population, or 1 for unweighted problems)
  Vector coverage;                       // N, fraction c_i in (0, 1] of the pixel inside its bag
  std::vector<Index> offsets;            // n + 1, offsets[0] = 0, offsets[n] = N
  Vector response;                       // n, bag observation y_a; NaN: none (a unit predicted, never fitted)
  Vector trials;                         // n, number tested n_a of a binomial bag (0 for other bags; empty: none)
  std::vector<int> source;               // n, the data source of each bag in a joint fit (empty: all source 0)
  std::vector<std::string> input_names;  // D (optional; empty means unnamed)
  std::vector<std::string> bag_ids;      // n (optional)
  // n: in a data-parallel run, where each process holds some bags, each bag's index in the whole
  // data (empty: its own index). Keys the bag's draws, so they do not depend on the split.
  std::vector<Index> global_bag;

  Index num_pixels() const { return inputs.cols(); }
  Index num_inputs() const { return inputs.rows(); }
  Index num_bags() const { return static_cast<Index>(offsets.size()) - 1; }
  Index bag_begin(Index a) const { return offsets[a]; }
  Index bag_size(Index a) const { return offsets[a + 1] - offsets[a]; }
  // Effective weight c_i p_i of every pixel.
  Vector weights() const { return coverage.cwiseProduct(population); }
  // P_a = sum of effective weights in each bag.
  Vector bag_weights() const;
  // What a bag's observation scales with: its trials n_a for a binomial bag, else P_a.
  Vector exposures() const;
  std::string bag_name(Index a) const;
  // The bag's id, or "#a" when the dataset has none (keys the unit effect of a training unit).
  std::string bag_id(Index a) const;

  // Whether bag a has an observation. A bag without one (a unit that reported nothing) is
  // predicted like a held-out unit, and no fit or score may use it.
  bool observed(Index a) const { return !std::isnan(response[a]); }
  // The observed bags among `bags`, in order.
  std::vector<Index> observed_among(const std::vector<Index>& bags) const;
  // The bag's observation for the likelihood: y_a, and n_a when the data have trials.
  double trials_of(Index a) const { return trials.size() ? trials[a] : 0.0; }
  int source_of(Index a) const { return source.empty() ? 0 : source[static_cast<size_t>(a)]; }
  Index global_bag_of(Index a) const { return global_bag.empty() ? a : global_bag[static_cast<size_t>(a)]; }
  // The bags of source s, in order (every bag for source 0 of a dataset without sources).
  std::vector<Index> bags_of_source(int s) const;

  // Throws DataError naming the first inconsistency (sizes, NaN, negative weights, empty bags,
  // trials that are not positive or fewer than the positives).
  void validate() const;
};

// The unit a bag observes: a bag of one period of a unit is named <unit>@<period>
// (io::build_dataset), so the unit is the id before the last '@'; any other id is its own unit.
std::string unit_of_bag(const std::string& bag_id);

// Builds a dataset whose bags are given by a bag index per pixel (pixels need not be sorted).
Dataset make_dataset(const Matrix& inputs, const Vector& population, const std::vector<Index>& bag_of_pixel,
                     const Vector& response);

// The sub-dataset of the listed bags, in the given order.
Dataset subset_bags(const Dataset& data, const std::vector<Index>& bags);

// One dataset of several sources' bags, source after source (bag a of parts[s] has source s).
// The parts must have the same inputs; trials are kept where any part has them.
Dataset join_sources(const std::vector<Dataset>& parts);

// The listed bags grouped by source: for each source in order of first appearance, its source
// index and its bags (positions into `bags` are kept in `at`, so results can be put back).
struct SourceGroup {
  int source = 0;
  std::vector<Index> bags;
  std::vector<size_t> at;
};
std::vector<SourceGroup> group_by_source(const Dataset& data, const std::vector<Index>& bags);

}  // namespace vbagg
