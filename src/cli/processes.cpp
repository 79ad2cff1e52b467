#include "processes.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <thread>

#include "core/types.hpp"

#ifdef VBAGG_WITH_MPI
#include <mpi.h>
#endif

namespace vbagg::cli {

namespace {

// MPI counts are ints: long messages travel in chunks.
[[maybe_unused]] constexpr size_t kFloatChunk = size_t{1} << 28;

#ifdef VBAGG_WITH_MPI

// Launchers announce the job in the environment: Open MPI's mpirun, PMI/PMIx (srun, MPICH's
// Hydra). Without one, MPI is left alone, so a plain run starts as fast as a build without MPI.
bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}

// Sums in a binomial tree, always pairing the same processes in the same order, then broadcasts
// the total: deterministic for a given number of processes, unlike MPI_Allreduce, whose order
// may depend on the message size and the network.
class MpiProcesses final : public Collective {
 public:
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void reduce_sum(double* values, Index n) const override {
    if (n == 0) return;
    std::vector<double> other(static_cast<size_t>(n));
    for (int step = 1; step < size_; step *= 2) {
      if (rank_ % (2 * step) == step) {
        send(values, n, rank_ - step);
        break;
      }
      if (rank_ % (2 * step) == 0 && rank_ + step < size_) {
        receive(other.data(), n, rank_ + step);
        for (Index i = 0; i < n; ++i) values[i] += other[static_cast<size_t>(i)];
      }
    }
    for (Index done = 0; done < n; done += kChunk)
      MPI_Bcast(values + done, static_cast<int>(std::min(kChunk, n - done)), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  }
  void reduce_max(double* values, Index n) const override {
    // A maximum does not depend on the order of the operands.
    for (Index done = 0; done < n; done += kChunk)
      MPI_Allreduce(MPI_IN_PLACE, values + done, static_cast<int>(std::min(kChunk, n - done)), MPI_DOUBLE, MPI_MAX,
                    MPI_COMM_WORLD);
  }
  void join() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }

 private:
  // MPI counts are ints: long vectors travel in chunks.
  static constexpr Index kChunk = Index{1} << 28;
  static void send(const double* v, Index n, int to) {
    for (Index done = 0; done < n; done += kChunk)
      MPI_Send(v + done, static_cast<int>(std::min(kChunk, n - done)), MPI_DOUBLE, to, 0, MPI_COMM_WORLD);
  }
  static void receive(double* v, Index n, int from) {
    for (Index done = 0; done < n; done += kChunk)
      MPI_Recv(v + done, static_cast<int>(std::min(kChunk, n - done)), MPI_DOUBLE, from, 0, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  }
  int rank_ = 0, size_ = 1;
};

MpiProcesses world;
bool joined = false;

#endif

}  // namespace

void start_processes(int& argc, char**& argv) {
#ifdef VBAGG_WITH_MPI
  if (joined || !launched_by_mpi()) return;
  int provided = 0;
  // Only the main thread calls MPI; OpenMP's threads work between the calls.
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  // An error inside MPI (a lost process, a broken link) ends the job instead of returning codes
  // that a reduction could not act on.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  world.join();
  joined = true;
#else
  (void)argc;
  (void)argv;
#endif
}

void stop_processes() {
#ifdef VBAGG_WITH_MPI
  if (!joined) return;
  MPI_Finalize();
  joined = false;
#endif
}

const Collective& processes() {
#ifdef VBAGG_WITH_MPI
  if (joined) return world;
#endif
  return one_process();
}

int default_threads() {
  const int available = omp_get_num_procs();  // the processors of this process's affinity mask
#ifdef VBAGG_WITH_MPI
  if (joined && available == static_cast<int>(std::thread::hardware_concurrency())) {
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int here = 1;
    MPI_Comm_size(node, &here);
    MPI_Comm_free(&node);
    return std::max(1, available / here);
  }
#endif
  return available;
}

int process_rank() { return processes().rank(); }
int process_count() { return processes().size(); }

void abort_processes(int code) {
#ifdef VBAGG_WITH_MPI
  if (joined) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::exit(code);
}

void send_floats(const float* values, size_t n, int to) {
#ifdef VBAGG_WITH_MPI
  for (size_t done = 0; done < n; done += kFloatChunk)
    MPI_Send(values + done, static_cast<int>(std::min(kFloatChunk, n - done)), MPI_FLOAT, to, 3, MPI_COMM_WORLD);
#else
  (void)values;
  (void)n;
  (void)to;
  throw std::logic_error("send_floats without MPI");
#endif
}

void receive_floats(float* values, size_t n, int from) {
#ifdef VBAGG_WITH_MPI
  for (size_t done = 0; done < n; done += kFloatChunk)
    MPI_Recv(values + done, static_cast<int>(std::min(kFloatChunk, n - done)), MPI_FLOAT, from, 3, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
#else
  (void)values;
  (void)n;
  (void)from;
  throw std::logic_error("receive_floats without MPI");
#endif
}

void require_one_process(const std::string& app) {
  if (process_count() > 1)
    throw ConfigError(app +
                      " runs in one process; start it without mpirun (vbagg-train and vbagg-predict share "
                      "their work over MPI processes)");
}

void share_jobs(long long jobs, size_t strips, const std::function<size_t(long long)>& strip_length,
                const std::function<void(long long, std::vector<std::vector<float>>&)>& compute,
                const std::function<void(long long, const std::vector<std::vector<float>>&)>& write) {
  const int count = process_count(), rank = process_rank();
  const bool leader = leading_process();
  std::vector<std::vector<float>> values(strips);
  std::vector<float> message;
  for (long long k = 0; k < jobs; ++k) {
    const int owner = static_cast<int>(k % count);
    if (owner == rank) compute(k, values);
    if (!leader) {
      // A job of this process goes to the leading process, every strip in one message.
      if (owner != rank) continue;
      message.clear();
      for (const auto& v : values) message.insert(message.end(), v.begin(), v.end());
      send_floats(message.data(), message.size(), 0);
      continue;
    }
    if (owner != rank) {
      const size_t n = strip_length(k);
      message.resize(n * strips);
      receive_floats(message.data(), message.size(), owner);
      for (size_t j = 0; j < strips; ++j)
        values[j].assign(message.begin() + static_cast<std::ptrdiff_t>(j * n),
                         message.begin() + static_cast<std::ptrdiff_t>((j + 1) * n));
    }
    write(k, values);
  }
}

}  // namespace vbagg::cli
