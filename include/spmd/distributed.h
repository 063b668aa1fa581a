// Several processes (jax.distributed): one process per host or per share of a host, each with
// its own local devices, all running the same program. Under `mpirun -np P`, initialize() joins
// the P processes through MPI; afterwards devices() lists the devices of every process, meshes
// span processes, and collectives cross them. Without a launcher it leaves the program one
// process, as it was.
#pragma once

#include <optional>

namespace spmd::distributed {

struct Options {
  // What the caller expects; checked against what MPI reports (a mismatch raises ValueError).
  // Unset: taken from MPI.
  std::optional<int> num_processes;
  std::optional<int> process_id;
  // Join through MPI even when no launcher is detected (a single-process MPI job).
  bool force_mpi = false;
};

// Joins the processes of the job. Must come before the first use of a device; a second call
// raises. Under mpirun (or with force_mpi / num_processes set) it initializes MPI and exchanges
// the processes' local device counts; otherwise the program stays one process and MPI is not
// touched. Raises RuntimeError when spmd was built without MPI and processes are asked for.
void initialize(const Options& options = {});

// Leaves the job: waits for this process's launches, then finalizes MPI. Called at exit when the
// program does not; after a failure that reached other processes it ends the job instead (as
// MPI_Abort), since peers may be blocked in a collective that can no longer complete.
void shutdown();

bool is_initialized();

// Whether reading a value whose blocks are spread over processes (printing it, to_vector,
// item) gathers it from every process instead of raising JAX's error. The gather is a
// collective: with it on, every process must read the same values in the same order, as the
// seed examples do when they print. Off by default, as in JAX.
void set_collective_reads(bool on);
bool collective_reads();

// The number of processes the launcher started (Open MPI's mpirun, or a PMI launcher), or 1:
// what initialize() will join, known before it, so that a program can choose its local device
// count (config::set_cpu_device_count) for a total.
int launched_process_count();

}  // namespace spmd::distributed

namespace spmd::detail {
// The MPI communicators of device groups this process keeps (at most
// config::mpi_communicator_limit(), unless one launch needs more); 0 in one process. For tests
// and diagnostics.
int live_mpi_communicators();
}  // namespace spmd::detail
