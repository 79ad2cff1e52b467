// Data-parallel scaling at malaria scale (bench/malaria_problem.hpp), under mpirun:
//   mpirun -np K scaling_bench [--threads 1] [--inducing 576] [--pixels N] [--bags n] [--repeat 2]
//                              [--batch-bags 64] [--weak 0|1]
// Every process makes the same synthetic problem and keeps the bags assign_bags gives it (as
// vbagg-train's processes build only theirs), then the job times a full-data objective +
// gradient pass (one L-BFGS iteration) and an Adam epoch of minibatches, each step ending in the
// one reduction of the gradient. --weak 1 multiplies --pixels and --bags by K (the same work per
// process). The leading process prints one row: processes, threads, pixels, the largest share,
// pass and epoch seconds, the reduction's bytes and its measured time per step.
#include <chrono>
#include <cstdio>
#include <numeric>
#include <string>

#include "cli/processes.hpp"
#include "core/fit.hpp"
#include "core/objective.hpp"
#include "core/param_layout.hpp"
#include "core/shard.hpp"
#include "malaria_problem.hpp"

using namespace vbagg;
using Clock = std::chrono::steady_clock;

namespace {

double seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

int main(int argc, char** argv) {
  cli::start_processes(argc, argv);
  const Collective& world = cli::processes();
  bench::ProblemOptions po;
  int threads = 1, repeat = 2;
  Index batch = 64;
  bool weak = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (bench::read_problem_flag(k, v, po)) continue;
    if (k == "--threads")
      threads = std::stoi(v);
    else if (k == "--repeat")
      repeat = std::stoi(v);
    else if (k == "--batch-bags")
      batch = std::stol(v);
    else if (k == "--weak")
      weak = v == "1";
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (weak) {
    po.pixels *= world.size();
    po.bags *= world.size();
  }
  // The same model everywhere: it is initialised from the whole problem, then each process keeps
  // its share of the bags.
  Shard shard;
  Dataset local;
  Model model;
  {
    const Dataset data = bench::make_problem(po);
    model = bench::make_problem_model(data, po.covariates, po.inducing, "exp", "nystrom");
    std::vector<Index> pixels;
    std::vector<std::string> ids;
    for (Index a = 0; a < data.num_bags(); ++a) {
      pixels.push_back(data.bag_size(a));
      ids.push_back(data.bag_id(a));
    }
    local = local_part(data, assign_bags(pixels, world.size()), world.rank());
    shard = make_shard(local, ids, world);
  }
  Vector share = Vector::Zero(world.size());
  share[world.rank()] = static_cast<double>(local.num_pixels());
  world.sum(share);
  const Index n = shard.num_bags();
  std::vector<Index> all(static_cast<size_t>(n));
  std::iota(all.begin(), all.end(), Index{0});

  ObjectiveOptions o;
  o.threads = threads;
  o.processes = &world;
  Vector g;
  double pass = 1e300, epoch = 1e300;
  for (int r = 0; r < repeat; ++r) {
    auto t0 = Clock::now();
    elbo(model, local, shard.local_bags(all), 1.0, &g, o);
    pass = std::min(pass, world.sum(seconds(t0)) / world.size());
    // An Adam epoch's objective work: minibatches of `batch` bags in the order of the data.
    t0 = Clock::now();
    for (Index start = 0; start < n; start += batch) {
      const std::vector<Index> bags(all.begin() + start, all.begin() + std::min(n, start + batch));
      elbo(model, local, shard.local_bags(bags), static_cast<double>(n) / static_cast<double>(bags.size()), &g, o);
    }
    epoch = std::min(epoch, world.sum(seconds(t0)) / world.size());
  }
  // The reduction alone: one parameter-sized sum per step.
  Vector part = Vector::Ones(g.size() + 2);
  const int reductions = 50;
  auto t0 = Clock::now();
  for (int r = 0; r < reductions; ++r) world.sum(part);
  const double reduce = world.sum(seconds(t0)) / world.size() / reductions;
  if (world.rank() == 0)
    std::printf("| %d | %d | %ld | %.0f | %.2f | %.2f | %.2f | %.2f |\n", world.size(), threads,
                static_cast<long>(
                    shard.pixels.size() ? std::accumulate(shard.pixels.begin(), shard.pixels.end(), Index{0}) : 0),
                share.maxCoeff(), pass, epoch, static_cast<double>(part.size()) * 8 / 1e6, reduce * 1e3);
  cli::stop_processes();
  return 0;
}
