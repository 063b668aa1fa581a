// The processes of a job and the MPI calls that cross them. Everything here is a no-op or an
// error in a build without MPI (SPMD_WITH_MPI unset) or before distributed::initialize.
//
// Collectives between processes run on one MPI communicator per device group (a collective's
// members in instance order), made collectively by every process when a launch first needs it
// (make_groups, called on the launching thread in launch order, which is the same on every
// process), so that collectives of different groups run concurrently without mixing, and those
// of one group meet in call order. At most config::mpi_communicator_limit() of them live: the
// least recently used are freed when a launch needs new ones, a decision every process takes
// alike, since it depends on the order of launches alone. Calls are nonblocking and waited on by
// polling with a growing pause, so a wait can end at a timeout, when a device of this process
// failed, or when another process reported a failure; MPI's own blocking calls can do none of
// these.
#pragma once

#include <spmd/dtype.h>

#include "runtime/communicator.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace spmd::runtime::mpi {

// Whether this build has MPI.
bool built();

// The job, once initialized: this process's rank and every process's local device count.
struct Job {
  int rank = 0;
  int size = 1;
  std::vector<int> device_counts;  // per process
  std::vector<int> first_device;   // global id of each process's first device
};
// Initializes MPI (thread level MPI_THREAD_MULTIPLE) and exchanges `local_devices`.
Job init(int local_devices);
bool active();  // initialized with MPI and not yet finalized
// Finalizes MPI, or aborts the job when a cross-process operation was abandoned (a peer may be
// blocked in it for ever).
void finalize();

// A communicator over the processes of one device group, in the group's order of processes.
struct GroupComm;

// The communicators of the groups one launch's collectives may name, made by make_groups.
struct GroupSet;

// Every process calls this with the same groups in the same order, on the thread that launches,
// before a launch that needs them: it makes the communicators of the groups (lists of global
// device ids in instance order) that span several processes and have none yet, and returns the
// set of all of them. Making some first frees the least recently used others beyond
// config::mpi_communicator_limit() (never those of `groups`), once `before_free` has returned:
// it must wait until no launch made so far can still use them. `process_of` maps a global
// device id to its process.
std::shared_ptr<GroupSet> make_groups(const std::vector<std::vector<int>>& groups,
                                      const std::function<int(int)>& process_of,
                                      const std::function<void()>& before_free);
// Before each further launch with `set` (on the launching thread, in launch order): marks its
// communicators used now, or returns false when one of them was freed since (then make the set
// again).
bool use_groups(GroupSet& set);
// The communicator of a group (global device ids in instance order), or null. A launch's
// communicators stay until it has ended, so its device threads find them here.
std::shared_ptr<GroupComm> find_group(const std::vector<int>& group);
// The communicators of groups alive in this process.
int live_groups();
// The processes of a group, in the communicator's rank order.
const std::vector<int>& processes(const GroupComm& g);

// When a wait gives up: after `timeout`, or as soon as `stop` returns a reason (a device of this
// launch failed), or another process reported a failure.
struct Wait {
  std::chrono::milliseconds timeout;
  std::function<std::optional<std::string>()> stop;
};

// data (count elements) = reduction of `in` over the group's processes, the same bits on each:
// pairwise, lower process first, in a balanced tree over a power-of-two number of processes (one
// half each, then swapped back), else MPI_Iallreduce. `in` may be `data`. `keep_alive` owns
// `data`, and `in` too when `in_kept`: if the wait gives up it is kept for ever, since MPI may
// still read and write. MPI writes only `data`, and reads `in` only when `in_kept` (else this
// thread reads it, and it need not outlive a wait given up).
void allreduce(const GroupComm& g, ReduceOp op, DType dtype, const void* in, void* data,
               int64_t count, std::shared_ptr<void> keep_alive, const Wait& wait,
               bool in_kept = false);
// out = the processes' contributions one after another (counts[r] bytes from rank r); `in` may
// be this process's own place in `out`.
void allgatherv(const GroupComm& g, const void* in, int64_t in_bytes, void* out,
                const std::vector<int64_t>& counts, std::shared_ptr<void> keep_alive,
                const Wait& wait);
// allgatherv with `bytes` from every rank.
void allgather(const GroupComm& g, const void* in, int64_t bytes, void* out,
               std::shared_ptr<void> keep_alive, const Wait& wait);
void barrier(const GroupComm& g, const Wait& wait);
// What MPI_Alltoallv does, with messages only where there are bytes: send_counts[r] bytes of
// `send` (the ranks' parts one after another) go to rank r, and recv_counts[r] bytes from rank
// r into `recv` (likewise); this process's own parts are skipped. Used where each process needs
// only some blocks of the others (ppermute, all_to_all).
void alltoallv(const GroupComm& g, const void* send, const std::vector<int64_t>& send_counts,
               void* recv, const std::vector<int64_t>& recv_counts,
               std::shared_ptr<void> keep_alive, const Wait& wait);

// Tells every other process that this one failed (`what` names the device and the error).
void report_failure(const std::string& what);
// A failure another process reported, once one has arrived.
std::optional<std::string> remote_failure();

}  // namespace spmd::runtime::mpi

#if SPMD_WITH_MPI
#include <mpi.h>

#include <span>

namespace spmd::runtime::mpi {

// For the other files that call MPI (runtime/mpi_blocks.cpp): the communicator over every
// process that reads and moves of whole values use (with tags of their own), and the wait
// every call between processes ends with.
MPI_Comm world();
void wait_for(std::span<MPI_Request> requests, const Wait& w, const char* what,
              std::shared_ptr<void> keep_alive);

}  // namespace spmd::runtime::mpi
#endif
