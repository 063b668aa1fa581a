// sp::distributed: joining the processes of an MPI job (include/spmd/distributed.h).
#include <spmd/distributed.h>

#include <spmd/error.h>

#include "runtime/devices.h"
#include "runtime/mpi.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

namespace spmd::distributed {
namespace {

std::mutex mu;
bool initialized = false;

// Whether a launcher started this process as one of several: Open MPI's mpirun, or a PMIx or
// PMI launcher (srun, hydra) that MPI_Init would join.
bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(var)) return true;
  return false;
}

int env_count(const char* var) {
  const char* v = std::getenv(var);
  if (!v) return 0;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  return end != v && *end == '\0' && n > 0 && n < (1 << 20) ? int(n) : 0;
}

void check_expected(const char* what, const std::optional<int>& expected, int got) {
  if (expected && *expected != got)
    throw ValueError(std::string("[distributed.initialize] expected ") + what + " " +
                     std::to_string(*expected) + ", but MPI reports " + std::to_string(got));
}

}  // namespace

void initialize(const Options& options) {
  std::lock_guard lock(mu);
  if (initialized)
    throw RuntimeError(
        "[distributed.initialize] distributed.initialize should only be called once.");
  if (runtime::devices_in_use())
    throw RuntimeError(
        "[distributed.initialize] distributed.initialize() must be called before any "
        "computations are executed; the devices are already in use");
  if (options.num_processes && *options.num_processes < 1)
    throw ValueError("[distributed.initialize] expected num_processes of at least 1, got " +
                     std::to_string(*options.num_processes));
  const bool want_mpi =
      launched_by_mpi() || options.force_mpi || options.num_processes.value_or(1) > 1;
  if (!want_mpi) {
    check_expected("process_id", options.process_id, 0);
    initialized = true;
    return;
  }
  const int local = runtime::requested_local_devices();
  runtime::mpi::Job job = runtime::mpi::init(local);
  check_expected("num_processes", options.num_processes, job.size);
  check_expected("process_id", options.process_id, job.rank);
  runtime::set_job(job.rank, job.device_counts);
  std::atexit([] { runtime::mpi::finalize(); });
  initialized = true;
}

void shutdown() {
  runtime::mpi::finalize();
}

namespace {
std::atomic<bool> reads_gather{false};
}  // namespace

void set_collective_reads(bool on) {
  reads_gather.store(on, std::memory_order_relaxed);
}

bool collective_reads() {
  return reads_gather.load(std::memory_order_relaxed);
}

int launched_process_count() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"})
    if (int n = env_count(var)) return n;
  return 1;
}

bool is_initialized() {
  std::lock_guard lock(mu);
  return initialized;
}

}  // namespace spmd::distributed

namespace spmd::detail {

int live_mpi_communicators() {
  return runtime::mpi::live_groups();
}

}  // namespace spmd::detail
