// A data-parallel run's view of its bags. Each process holds the pixels of the bags it owns: its
// local Dataset, whose bags keep the order of the whole data and carry Dataset::global_bag. Every
// process knows every bag's summary, so bag lists, minibatches and unit effects are the same
// everywhere and only the pixel work is shared out.
#pragma once

#include <string>
#include <vector>

#include "collective.hpp"
#include "dataset.hpp"

namespace vbagg {

struct Shard {
  const Collective* processes = nullptr;
  std::vector<Index> local;   // for each bag of the whole data: its index in this process's Dataset, or -1
  std::vector<Index> pixels;  // for each bag of the whole data: its number of pixels
  // Every bag collapsed to one pseudo-pixel (as collapse_bags: its weighted mean input, its
  // population P_a), in the order of the whole data, with ids, sources, responses and trials.
  Dataset summary;

  Index num_bags() const { return static_cast<Index>(local.size()); }
  // The listed bags (indices into the whole data) that this process holds, as indices into its
  // Dataset, in the listed order.
  std::vector<Index> local_bags(const std::vector<Index>& bags) const;
};

// The owner of each bag among `processes`: largest bags first, each to the process with the least
// work so far (lowest rank on ties), so every process gets about the same number of pixels.
// Deterministic: every process computes the same owners. `load`, when given, holds each process's
// work from earlier calls (several sources' units, shared in turn) and is updated.
std::vector<int> assign_bags(const std::vector<Index>& pixels, int processes, std::vector<Index>* load = nullptr);

// The bags of `local` (a process's share, with Dataset::global_bag) among the listed bags of the
// whole data, as indices into `local`, in the listed order.
std::vector<Index> bags_held(const Dataset& local, const std::vector<Index>& bags);

// The bags of `data` that `owner` gives to `rank`, in order, with Dataset::global_bag set.
Dataset local_part(const Dataset& data, const std::vector<int>& owner, int rank);

// The shard of a process holding `local` (from local_part, or built from its own units), when the
// whole data has the bags named by `ids`. Every process calls it; the summary is gathered by
// reductions.
Shard make_shard(const Dataset& local, const std::vector<std::string>& ids, const Collective& processes);

// The listed bags of the whole alone, as a whole of their own (bag k is bags[k]), and in
// `local_subset` this process's share of them, taken from its share `local` of the whole.
Shard subset_shard(const Shard& whole, const Dataset& local, const std::vector<Index>& bags, Dataset& local_subset);

}  // namespace vbagg
