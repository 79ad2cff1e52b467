#include "shard.hpp"

#include <algorithm>
#include <numeric>
#include <unordered_map>

#include "baselines.hpp"

namespace vbagg {

std::vector<Index> Shard::local_bags(const std::vector<Index>& bags) const {
  std::vector<Index> out;
  for (Index a : bags)
    if (local[static_cast<size_t>(a)] >= 0) out.push_back(local[static_cast<size_t>(a)]);
  return out;
}

std::vector<int> assign_bags(const std::vector<Index>& pixels, int processes, std::vector<Index>* own_load) {
  if (processes < 1) throw ConfigError("a run needs at least one process");
  std::vector<size_t> order(pixels.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return pixels[x] > pixels[y]; });
  std::vector<Index> fresh(static_cast<size_t>(processes), 0);
  std::vector<Index>& load = own_load ? *own_load : fresh;
  load.resize(static_cast<size_t>(processes), 0);
  std::vector<int> owner(pixels.size(), 0);
  for (size_t a : order) {
    const auto least = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    owner[a] = static_cast<int>(least);
    load[least] += std::max<Index>(pixels[a], 1);
  }
  return owner;
}

std::vector<Index> bags_held(const Dataset& local, const std::vector<Index>& bags) {
  std::unordered_map<Index, Index> held;
  for (Index a = 0; a < local.num_bags(); ++a) held[local.global_bag_of(a)] = a;
  std::vector<Index> out;
  for (Index g : bags) {
    const auto it = held.find(g);
    if (it != held.end()) out.push_back(it->second);
  }
  return out;
}

Dataset local_part(const Dataset& data, const std::vector<int>& owner, int rank) {
  if (static_cast<Index>(owner.size()) != data.num_bags())
    throw DataError("the bag owners list " + std::to_string(owner.size()) + " bags; the data have " +
                    std::to_string(data.num_bags()));
  std::vector<Index> mine;
  for (Index a = 0; a < data.num_bags(); ++a)
    if (owner[static_cast<size_t>(a)] == rank) mine.push_back(a);
  Dataset part = subset_bags(data, mine);
  part.global_bag = mine;
  return part;
}

Shard make_shard(const Dataset& local, const std::vector<std::string>& ids, const Collective& processes) {
  const Index n = static_cast<Index>(ids.size()), D = local.num_inputs();
  Shard shard;
  shard.processes = &processes;
  shard.local.assign(static_cast<size_t>(n), -1);
  const Dataset mine = collapse_bags(local);
  // Each process writes its bags into zeroed arrays of every bag; the sums over the processes are
  // then exact copies, as each bag is held by exactly one of them (which `held` checks).
  Matrix inputs = Matrix::Zero(D, n);
  Matrix per_bag = Matrix::Zero(6, n);  // population, response, trials, source, pixels, held
  for (Index a = 0; a < local.num_bags(); ++a) {
    const Index g = local.global_bag_of(a);
    if (g < 0 || g >= n)
      throw DataError("bag " + local.bag_name(a) + " has index " + std::to_string(g) + " in a whole of " +
                      std::to_string(n) + " bags");
    shard.local[static_cast<size_t>(g)] = a;
    inputs.col(g) = mine.inputs.col(a);
    per_bag.col(g) << mine.population[a], local.response[a], local.trials_of(a), local.source_of(a),
        static_cast<double>(local.bag_size(a)), 1.0;
  }
  processes.sum(inputs);
  processes.sum(per_bag);
  for (Index g = 0; g < n; ++g)
    if (per_bag(5, g) != 1.0)
      throw DataError("unit '" + ids[static_cast<size_t>(g)] + "' is held by " + std::to_string(per_bag(5, g)) +
                      " processes instead of one");
  Dataset& s = shard.summary;
  s.inputs = std::move(inputs);
  s.population = per_bag.row(0).transpose();
  s.coverage = Vector::Ones(n);
  s.response = per_bag.row(1).transpose();
  if (processes.any(local.trials.size() > 0)) s.trials = per_bag.row(2).transpose();
  s.input_names = local.input_names;
  s.bag_ids = ids;
  s.offsets.resize(static_cast<size_t>(n) + 1);
  std::iota(s.offsets.begin(), s.offsets.end(), Index{0});
  const bool sources = processes.any(!local.source.empty());
  for (Index g = 0; g < n && sources; ++g) s.source.push_back(static_cast<int>(per_bag(3, g)));
  for (Index g = 0; g < n; ++g) shard.pixels.push_back(static_cast<Index>(per_bag(4, g)));
  return shard;
}

Shard subset_shard(const Shard& whole, const Dataset& local, const std::vector<Index>& bags, Dataset& local_subset) {
  Shard s;
  s.processes = whole.processes;
  s.local.assign(bags.size(), -1);
  std::vector<Index> mine, position;
  for (size_t k = 0; k < bags.size(); ++k) {
    const Index a = whole.local[static_cast<size_t>(bags[k])];
    s.pixels.push_back(whole.pixels[static_cast<size_t>(bags[k])]);
    if (a < 0) continue;
    s.local[k] = static_cast<Index>(mine.size());
    mine.push_back(a);
    position.push_back(static_cast<Index>(k));
  }
  local_subset = subset_bags(local, mine);
  local_subset.global_bag = std::move(position);
  s.summary = subset_bags(whole.summary, bags);
  return s;
}

}  // namespace vbagg
