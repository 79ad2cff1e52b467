// The processes of a run. Started by an MPI launcher (mpirun, srun) from a build with MPI, the
// processes of the job share the work of vbagg-train and vbagg-predict; otherwise there is one
// process and everything behaves as in a build without MPI.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/collective.hpp"

namespace vbagg::cli {

// Joins the MPI job when an MPI launcher started this process (run_app calls it first). A second
// call does nothing.
void start_processes(int& argc, char**& argv);
// Leaves the MPI job (run_app calls it last).
void stop_processes();

// The job's processes as the numerics see them (one_process() outside an MPI job).
const Collective& processes();
int process_rank();
int process_count();
// Threads for this process when none are configured: the processors it may run on, shared with the
// other processes of the job on this machine unless the launcher has already bound it to its own.
int default_threads();
// Whether this process writes outputs and logs progress: rank 0.
inline bool leading_process() { return process_rank() == 0; }

// Ends every process of the job with this exit code: a process that failed must not leave the
// others waiting for it in a reduction.
[[noreturn]] void abort_processes(int code);

// Point to point: `n` floats to process `to`, which receives them with receive_floats.
void send_floats(const float* values, size_t n, int to);
void receive_floats(float* values, size_t n, int from);

// Jobs 0..jobs-1 shared round the processes: process k % count computes job k, filling `values`
// with `strips` float strips of strip_length(k) values each, and the leading process writes every
// job in order (write runs there only), receiving the others' values. One process computes and
// writes job after job.
void share_jobs(long long jobs, size_t strips, const std::function<size_t(long long)>& strip_length,
                const std::function<void(long long, std::vector<std::vector<float>>&)>& compute,
                const std::function<void(long long, const std::vector<std::vector<float>>&)>& write);

// Refuses to run with several processes: for the apps that do not share their work.
void require_one_process(const std::string& app);

}  // namespace vbagg::cli
