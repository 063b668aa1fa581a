#include "runtime/mpi.h"

#include <spmd/config.h>
#include <spmd/error.h>

#include "core/buffer.h"
#include "runtime/transfer.h"

#include <stdexcept>

#if SPMD_WITH_MPI
#include <mpi.h>

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstddef>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <thread>
#include <utility>
#endif

namespace spmd::runtime::mpi {

#if !SPMD_WITH_MPI

struct GroupComm {
  std::vector<int> procs;
};

bool built() {
  return false;
}
Job init(int) {
  throw RuntimeError(
      "[distributed.initialize] this build of spmd has no MPI, so it runs one process; build it "
      "with Open MPI (Debian's libopenmpi-dev) to run on several");
}
bool active() {
  return false;
}
void finalize() {}
struct GroupSet {};

std::shared_ptr<GroupSet> make_groups(const std::vector<std::vector<int>>&,
                                      const std::function<int(int)>&,
                                      const std::function<void()>&) {
  return std::make_shared<GroupSet>();
}
bool use_groups(GroupSet&) {
  return true;
}
std::shared_ptr<GroupComm> find_group(const std::vector<int>&) {
  return nullptr;
}
int live_groups() {
  return 0;
}
const std::vector<int>& processes(const GroupComm& g) {
  return g.procs;
}
void allreduce(const GroupComm&, ReduceOp, DType, const void*, void*, int64_t,
               std::shared_ptr<void>, const Wait&, bool) {
  throw std::logic_error("[mpi] internal error: no MPI in this build");
}
void allgatherv(const GroupComm&, const void*, int64_t, void*, const std::vector<int64_t>&,
                std::shared_ptr<void>, const Wait&) {
  throw std::logic_error("[mpi] internal error: no MPI in this build");
}
void allgather(const GroupComm&, const void*, int64_t, void*, std::shared_ptr<void>, const Wait&) {
  throw std::logic_error("[mpi] internal error: no MPI in this build");
}
void barrier(const GroupComm&, const Wait&) {
  throw std::logic_error("[mpi] internal error: no MPI in this build");
}
void alltoallv(const GroupComm&, const void*, const std::vector<int64_t>&, void*,
               const std::vector<int64_t>&, std::shared_ptr<void>, const Wait&) {
  throw std::logic_error("[mpi] internal error: no MPI in this build");
}
void report_failure(const std::string&) {}
std::optional<std::string> remote_failure() {
  return std::nullopt;
}

#else

struct GroupComm {
  MPI_Comm comm = MPI_COMM_NULL;
  std::vector<int> procs;
  int rank = 0;  // this process's rank in `comm`
  // The bookkeeping of the bound, the same on every process: the order it was made in among all
  // groups, the clock (State::clock) of the last launch that was handed it, and whether it has
  // been freed (then `comm` is no longer used, and a set holding it is made again).
  uint64_t made = 0;
  std::atomic<uint64_t> last_use{0};
  std::atomic<bool> freed{false};
};

struct GroupSet {
  std::vector<std::shared_ptr<GroupComm>> comms;
  std::atomic<uint64_t> seen{0};  // the clock when its communicators were last marked used
};

namespace {

constexpr int kFailureTag = 1;
constexpr int kExchangeTag = 2;  // the point-to-point messages of allreduce and allgatherv
constexpr int kFailureBytes = 4096;

struct State {
  std::atomic<bool> active{false};
  int rank = 0, size = 1;
  MPI_Comm failures = MPI_COMM_NULL;  // a duplicate of the world for failure reports
  MPI_Comm reads = MPI_COMM_NULL;     // a duplicate of the world for reads of whole values

  // The communicators of device groups, by the group's device ids. make_mu orders the launching
  // threads' make_groups (which waits for launches without holding groups_mu, which device
  // threads take in find_group).
  std::mutex make_mu;
  std::mutex groups_mu;
  std::map<std::vector<int>, std::shared_ptr<GroupComm>> groups;
  // Advanced by each make_groups that makes a communicator, the only point where others are
  // freed: a launch marks its communicators with it, so the least recently used are those with
  // the lowest mark (by launch order, as finely as the freeing decisions need it).
  std::atomic<uint64_t> clock{1};
  uint64_t made = 0;  // communicators made so far

  // The report of another process's failure: one receive posted from any process.
  std::mutex fail_mu;
  MPI_Request fail_request = MPI_REQUEST_NULL;
  char fail_buffer[kFailureBytes] = {};
  std::optional<std::string> remote;
  std::atomic<bool> remote_seen{false};
  std::atomic<bool> reported{false};
  std::string report;  // the text this process sent; alive until exit

  // Buffers of operations given up on while MPI may still write them, kept for the process.
  std::mutex abandoned_mu;
  std::vector<std::shared_ptr<void>> abandoned;
  std::atomic<bool> gave_up{false};

  // Reductions MPI has no built-in operation for, indexed by [dtype][op].
  MPI_Op ops[kNumDTypes][3] = {};
};

State& state() {
  static State* s = new State();
  return *s;
}

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw RuntimeError(std::string("[distributed] ") + what + " failed: " + std::string(text, len));
}

MPI_Datatype datatype(DType d) {
  switch (d) {
    case DType::bool_:
    case DType::uint8:
      return MPI_UINT8_T;
    case DType::int8:
      return MPI_INT8_T;
    case DType::int16:
      return MPI_INT16_T;
    case DType::int32:
      return MPI_INT32_T;
    case DType::int64:
      return MPI_INT64_T;
    case DType::uint16:
    case DType::bfloat16:
    case DType::float16:
      return MPI_UINT16_T;
    case DType::uint32:
      return MPI_UINT32_T;
    case DType::uint64:
      return MPI_UINT64_T;
    case DType::float32:
      return MPI_FLOAT;
    case DType::float64:
      return MPI_DOUBLE;
  }
  return MPI_BYTE;
}

// The user functions: inout = in ⊕ inout, `in` being the earlier process's value, with the
// element rules of the in-process collectives (NaN wins max and min; 16-bit floats round after
// each step).
template <DType kDType, ReduceOp kOp>
void combine_fn(void* in, void* inout, int* len, MPI_Datatype*) {
  combine_into(kOp, kDType, in, inout, *len);
}

template <DType kDType>
void make_ops(State& s) {
  MPI_Op_create(&combine_fn<kDType, ReduceOp::sum>, 0, &s.ops[int(kDType)][int(ReduceOp::sum)]);
  MPI_Op_create(&combine_fn<kDType, ReduceOp::max>, 0, &s.ops[int(kDType)][int(ReduceOp::max)]);
  MPI_Op_create(&combine_fn<kDType, ReduceOp::min>, 0, &s.ops[int(kDType)][int(ReduceOp::min)]);
}

// MPI's built-in operation where it computes what the in-process collectives compute (sums of
// two values commute exactly; integer max and min), else ours.
MPI_Op operation(ReduceOp op, DType d) {
  const bool floating =
      d == DType::float32 || d == DType::float64 || d == DType::bfloat16 || d == DType::float16;
  const bool half = d == DType::bfloat16 || d == DType::float16;
  if (half || (floating && op != ReduceOp::sum)) return state().ops[int(d)][int(op)];
  switch (op) {
    case ReduceOp::sum:
      return MPI_SUM;
    case ReduceOp::max:
      return MPI_MAX;
    case ReduceOp::min:
      return MPI_MIN;
  }
  return MPI_SUM;
}

void poll_failure_report() {
  State& s = state();
  if (s.remote_seen.load(std::memory_order_acquire)) return;
  std::unique_lock lock(s.fail_mu, std::try_to_lock);
  if (!lock.owns_lock() || s.fail_request == MPI_REQUEST_NULL) return;
  int done = 0;
  MPI_Status status;
  MPI_Test(&s.fail_request, &done, &status);
  if (!done) return;
  int len = 0;
  MPI_Get_count(&status, MPI_CHAR, &len);
  s.remote = std::string(s.fail_buffer, size_t(std::max(len, 0)));
  s.remote_seen.store(true, std::memory_order_release);
}

[[noreturn]] void give_up(const std::string& why, std::shared_ptr<void> keep_alive) {
  State& s = state();
  {
    std::lock_guard lock(s.abandoned_mu);
    if (keep_alive) s.abandoned.push_back(std::move(keep_alive));
  }
  s.gave_up.store(true, std::memory_order_release);
  throw CollectiveError(why);
}

}  // namespace

// Waits for `requests`, polling: MPI makes progress inside its calls, and a blocking wait could
// not end at a timeout or a failure. The first microseconds poll without a pause: a peer's reply
// to a small message comes within them, and a yield there (a system call, and the core handed to
// whatever else is runnable) more than doubled a psum of 8 B between two processes. Up to a
// millisecond, each poll yields the core (as MPI's own blocking calls do when cores are shared),
// so that the steps of a transfer (a handshake, the copy, the notice that it is done) follow each
// other at once: against pausing after 50 µs, this took a psum of 2 MiB between two processes
// from 880 to 580 µs. After that the pause grows with the time waited (a sixteenth of it, at
// most 200 µs), so a long transfer costs a few percent more, and an idle wait little CPU. Only
// one thread per process waits here for a collective, so the spin takes at most one core.
void wait_for(std::span<MPI_Request> requests, const Wait& w, const char* what,
              std::shared_ptr<void> keep_alive) {
  using clock = std::chrono::steady_clock;
  constexpr auto kSpin = std::chrono::microseconds(20);
  // While spinning, the clock is read every 8th poll only: here (a virtual machine) reading it
  // took as long as a poll, and the poll is what sees the peer's message arrive. The wait is
  // timed from its first reading, so a wait that ends within 8 polls (a small exchange with a
  // peer that arrived with it) reads no clock at all.
  constexpr unsigned kPollsPerClock = 8;
  clock::time_point start, deadline;
  bool spinning = true;
  for (unsigned polls = 1;; ++polls) {
    int done = 0;
    MPI_Testall(int(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE);
    if (done) return;
    if (spinning && polls % kPollsPerClock != 0) continue;
    const auto now = clock::now();
    if (polls == kPollsPerClock) {
      start = now;
      deadline = now + w.timeout;
    }
    const auto waited = now - start;
    spinning = waited < kSpin;
    if (spinning) continue;
    poll_failure_report();
    if (auto r = remote_failure())
      give_up(std::string(what) + " could not complete: " + *r, std::move(keep_alive));
    if (w.stop)
      if (auto r = w.stop())
        give_up(std::string(what) + " could not complete: " + *r, std::move(keep_alive));
    if (now > deadline)
      give_up(std::string(what) + " timed out after " + std::to_string(w.timeout.count()) +
                  " ms waiting for the other processes",
              std::move(keep_alive));
    if (waited < std::chrono::milliseconds(1))
      sched_yield();
    else
      std::this_thread::sleep_for(
          std::min<clock::duration>(waited / 16, std::chrono::microseconds(200)));
  }
}

void wait_for(MPI_Request& request, const Wait& w, const char* what,
              std::shared_ptr<void> keep_alive) {
  wait_for(std::span<MPI_Request>(&request, 1), w, what, std::move(keep_alive));
}

namespace {

// The bytes this process receives from others, for runtime::transfer_stats.
void count_received(int64_t bytes) {
  if (bytes > 0) record_transfer(TransferKind::between_processes, bytes);
}

int as_count(int64_t n, const char* what) {
  if (n > INT_MAX)
    throw NotImplementedError(std::string("[distributed] ") + what + " of " + std::to_string(n) +
                              " elements between processes: at most " + std::to_string(INT_MAX) +
                              " are supported");
  return int(n);
}

std::vector<int> processes_of(const std::vector<int>& group,
                              const std::function<int(int)>& process_of) {
  std::vector<int> procs;
  for (int id : group) {
    int p = process_of(id);
    if (std::find(procs.begin(), procs.end(), p) == procs.end()) procs.push_back(p);
  }
  return procs;
}

}  // namespace

bool built() {
  return true;
}

Job init(int local_devices) {
  State& s = state();
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
    if (provided < MPI_THREAD_MULTIPLE)
      throw RuntimeError(
          "[distributed.initialize] the MPI library does not support MPI_THREAD_MULTIPLE, "
          "which device threads calling collectives at once need");
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &s.size);
  check(MPI_Comm_dup(MPI_COMM_WORLD, &s.failures), "MPI_Comm_dup");
  check(MPI_Comm_dup(MPI_COMM_WORLD, &s.reads), "MPI_Comm_dup");
  Job job;
  job.rank = s.rank;
  job.size = s.size;
  job.device_counts.resize(size_t(s.size));
  check(MPI_Allgather(&local_devices, 1, MPI_INT, job.device_counts.data(), 1, MPI_INT,
                      MPI_COMM_WORLD),
        "MPI_Allgather");
  int first = 0;
  for (int c : job.device_counts) job.first_device.push_back(first), first += c;
  make_ops<DType::bfloat16>(s);
  make_ops<DType::float16>(s);
  make_ops<DType::float32>(s);
  make_ops<DType::float64>(s);
  MPI_Irecv(s.fail_buffer, kFailureBytes, MPI_CHAR, MPI_ANY_SOURCE, kFailureTag, s.failures,
            &s.fail_request);
  s.active.store(true, std::memory_order_release);
  return job;
}

bool active() {
  return state().active.load(std::memory_order_acquire);
}

void finalize() {
  State& s = state();
  if (!s.active.exchange(false)) return;
  poll_failure_report();
  if (s.gave_up.load() || s.reported.load() || s.remote_seen.load()) {
    // A peer may wait for ever in an operation this process left: end the whole job, after a
    // moment in which the other processes can report what they saw.
    std::fflush(nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    MPI_Abort(MPI_COMM_WORLD, 1);
    return;
  }
  {
    std::lock_guard lock(s.fail_mu);
    if (s.fail_request != MPI_REQUEST_NULL) {
      MPI_Cancel(&s.fail_request);
      MPI_Wait(&s.fail_request, MPI_STATUS_IGNORE);
    }
  }
  {
    std::lock_guard lock(s.groups_mu);
    for (auto& [key, g] : s.groups) {
      if (g->comm != MPI_COMM_NULL) MPI_Comm_free(&g->comm);
      g->freed.store(true, std::memory_order_release);
    }
    s.groups.clear();
  }
  MPI_Comm_free(&s.failures);
  MPI_Comm_free(&s.reads);
  MPI_Finalize();
}

namespace {

// Marks `comms` used by a launch at `now`.
void mark_used(const std::vector<std::shared_ptr<GroupComm>>& comms, uint64_t now) {
  for (const auto& g : comms) g->last_use.store(now, std::memory_order_relaxed);
}

// The `count` communicators to free before `now`'s launch makes new ones: the least recently
// used (lowest mark, then the earliest made) of those it does not use itself (marked `now`).
std::vector<std::vector<int>> least_recently_used(const State& s, size_t count, uint64_t now) {
  std::vector<std::pair<std::pair<uint64_t, uint64_t>, const std::vector<int>*>> unused;
  for (const auto& [key, g] : s.groups) {
    const uint64_t used = g->last_use.load(std::memory_order_relaxed);
    if (used < now) unused.push_back({{used, g->made}, &key});
  }
  count = std::min(count, unused.size());
  std::partial_sort(unused.begin(), unused.begin() + std::ptrdiff_t(count), unused.end());
  std::vector<std::vector<int>> out;
  for (size_t k = 0; k < count; ++k) out.push_back(*unused[k].second);
  return out;
}

}  // namespace

std::shared_ptr<GroupSet> make_groups(const std::vector<std::vector<int>>& groups,
                                      const std::function<int(int)>& process_of,
                                      const std::function<void()>& before_free) {
  State& s = state();
  auto set = std::make_shared<GroupSet>();
  if (!active()) return set;
  std::lock_guard make_lock(s.make_mu);
  std::vector<std::pair<const std::vector<int>*, std::vector<int>>> missing;  // group, processes
  {
    std::lock_guard lock(s.groups_mu);
    std::set<std::vector<int>> listed;
    for (const std::vector<int>& group : groups) {
      if (!listed.insert(group).second) continue;
      if (auto it = s.groups.find(group); it != s.groups.end()) {
        set->comms.push_back(it->second);
        continue;
      }
      std::vector<int> procs = processes_of(group, process_of);
      if (procs.size() >= 2) missing.emplace_back(&group, std::move(procs));
    }
  }
  uint64_t now = s.clock.load(std::memory_order_relaxed);
  if (!missing.empty()) {
    now = s.clock.fetch_add(1, std::memory_order_relaxed) + 1;
    mark_used(set->comms, now);
    const size_t limit = config::mpi_communicator_limit();
    std::vector<std::vector<int>> victims;
    {
      std::lock_guard lock(s.groups_mu);
      const size_t wanted = s.groups.size() + missing.size();
      if (wanted > limit) victims = least_recently_used(s, wanted - limit, now);
    }
    if (!victims.empty()) {
      before_free();
      for (const std::vector<int>& key : victims) {
        std::shared_ptr<GroupComm> g;
        {
          std::lock_guard lock(s.groups_mu);
          auto it = s.groups.find(key);
          g = std::move(it->second);
          s.groups.erase(it);
        }
        g->freed.store(true, std::memory_order_release);
        if (g->comm != MPI_COMM_NULL) check(MPI_Comm_free(&g->comm), "MPI_Comm_free");
      }
    }
    for (auto& [group, procs] : missing) {
      auto it = std::find(procs.begin(), procs.end(), s.rank);
      const int color = it == procs.end() ? MPI_UNDEFINED : 0;
      const int key = it == procs.end() ? 0 : int(it - procs.begin());
      MPI_Comm comm = MPI_COMM_NULL;
      check(MPI_Comm_split(MPI_COMM_WORLD, color, key, &comm), "MPI_Comm_split");
      auto g = std::make_shared<GroupComm>();
      g->comm = comm;
      g->procs = std::move(procs);
      g->rank = key;
      g->made = ++s.made;
      set->comms.push_back(g);
      std::lock_guard lock(s.groups_mu);
      s.groups[*group] = std::move(g);
    }
  }
  mark_used(set->comms, now);
  set->seen.store(now, std::memory_order_relaxed);
  return set;
}

bool use_groups(GroupSet& set) {
  const uint64_t now = state().clock.load(std::memory_order_relaxed);
  if (set.seen.load(std::memory_order_relaxed) == now) return true;
  for (const auto& g : set.comms)
    if (g->freed.load(std::memory_order_acquire)) return false;
  mark_used(set.comms, now);
  set.seen.store(now, std::memory_order_relaxed);
  return true;
}

std::shared_ptr<GroupComm> find_group(const std::vector<int>& group) {
  State& s = state();
  std::lock_guard lock(s.groups_mu);
  auto it = s.groups.find(group);
  if (it == s.groups.end() || it->second->comm == MPI_COMM_NULL) return nullptr;
  return it->second;
}

int live_groups() {
  State& s = state();
  std::lock_guard lock(s.groups_mu);
  return int(s.groups.size());
}

const std::vector<int>& processes(const GroupComm& g) {
  return g.procs;
}

namespace {

// Both directions of a swap with `peer` at once: `send_count` elements from `send`, `recv_count`
// into `recv`.
void swap_with(const GroupComm& g, int peer, DType dtype, const void* send, int send_count,
               void* recv, int recv_count, const std::shared_ptr<void>& keep, const Wait& wait) {
  MPI_Request requests[2];
  check(MPI_Irecv(recv, recv_count, datatype(dtype), peer, kExchangeTag, g.comm, &requests[0]),
        "MPI_Irecv");
  check(MPI_Isend(send, send_count, datatype(dtype), peer, kExchangeTag, g.comm, &requests[1]),
        "MPI_Isend");
  count_received(int64_t(recv_count) * itemsize(dtype));
  wait_for(requests, wait, "a reduction between processes", keep);
}

// Over a power-of-two number of processes, Rabenseifner's reduction: recursive halving (at each
// step a process sends the half of its range its partner keeps, receives the half it keeps and
// combines it, lower rank's value first), then recursive doubling to hand the reduced ranges
// back. Every element is combined on one process only, so every process ends with the same bits,
// and each process reduces a 1/P share: what MPI_Allreduce does between two processes for large
// buffers. Open MPI's MPI_Iallreduce there reduces everything on one process and broadcasts it,
// twice the time. The first step reads `in`: it sends the half it gives straight from `in` when
// `in_kept` (else it copies that half into `data` first), receives the half it keeps straight
// into its place in `data`, and combines it there with `in`'s values, so that nothing is copied
// that MPI_Allreduce does not copy (this took a psum per launch at 1 to 2 MiB between two
// processes from 1.5 to 1.3 × MPI_Allreduce).
void allreduce_by_halving(const GroupComm& g, ReduceOp op, DType dtype, const void* in, void* data,
                          int count, bool in_kept, std::shared_ptr<void> keep_alive,
                          const Wait& wait) {
  const int64_t item = itemsize(dtype);
  auto* base = static_cast<std::byte*>(data);
  const auto* src = static_cast<const std::byte*>(in);
  // The halves received while this process's own values are in `data` (after the first step, or
  // when `in` is `data`): made at the first such step.
  auto keep = std::make_shared<std::pair<std::shared_ptr<void>, std::shared_ptr<Buffer>>>(
      std::move(keep_alive), nullptr);
  auto scratch = [&] {
    if (!keep->second) keep->second = Buffer::allocate(size_t((count / 2 + 1) * item));
    return static_cast<std::byte*>(keep->second->data());
  };
  const int rank = g.rank, size = int(g.procs.size());
  int lo = 0, hi = count;
  std::vector<std::pair<int, int>> ranges;  // this process's range before each halving
  for (int mask = size / 2; mask >= 1; mask /= 2) {
    const int peer = rank ^ mask, mid = lo + (hi - lo) / 2;
    const bool lower = rank < peer;
    const int keep_lo = lower ? lo : mid, keep_hi = lower ? mid : hi;
    const int give_lo = lower ? mid : lo, give_hi = lower ? hi : mid;
    const bool from_in = src != base;
    const std::byte* give = (from_in && in_kept ? src : base) + give_lo * item;
    if (from_in && !in_kept)
      std::memcpy(base + give_lo * item, src + give_lo * item, size_t((give_hi - give_lo) * item));
    std::byte* mine = base + keep_lo * item;
    std::byte* theirs = from_in ? mine : scratch();
    swap_with(g, peer, dtype, give, give_hi - give_lo, theirs, keep_hi - keep_lo, keep, wait);
    const std::byte* my_values = src + keep_lo * item;
    if (lower)
      combine(op, dtype, my_values, theirs, mine, keep_hi - keep_lo);
    else
      combine(op, dtype, theirs, my_values, mine, keep_hi - keep_lo);
    ranges.emplace_back(lo, hi);
    lo = keep_lo, hi = keep_hi;
    src = base;
  }
  for (int mask = 1; mask < size; mask *= 2) {
    const int peer = rank ^ mask;
    const auto [whole_lo, whole_hi] = ranges.back();
    ranges.pop_back();
    const int their_lo = lo == whole_lo ? hi : whole_lo;
    const int their_hi = lo == whole_lo ? whole_hi : lo;
    swap_with(g, peer, dtype, base + lo * item, hi - lo, base + their_lo * item,
              their_hi - their_lo, keep, wait);
    lo = whole_lo, hi = whole_hi;
  }
}

}  // namespace

void allreduce(const GroupComm& g, ReduceOp op, DType dtype, const void* in, void* data,
               int64_t count, std::shared_ptr<void> keep_alive, const Wait& wait, bool in_kept) {
  const int n = as_count(count, "a reduction");
  const size_t procs = g.procs.size();
  if ((procs & (procs - 1)) == 0) {
    allreduce_by_halving(g, op, dtype, in, data, n, in_kept, std::move(keep_alive), wait);
    return;
  }
  if (in != data) std::memcpy(data, in, size_t(count * itemsize(dtype)));
  count_received(count * itemsize(dtype));  // what MPI moves is its own choice: the buffer once
  MPI_Request request;
  check(MPI_Iallreduce(MPI_IN_PLACE, data, n, datatype(dtype), operation(op, dtype), g.comm,
                       &request),
        "MPI_Iallreduce");
  wait_for(request, wait, "a reduction between processes", std::move(keep_alive));
}

namespace {

// Blocks above Open MPI's eager size for shared memory (btl_vader_eager_limit, 4 KiB with its
// header) wait for the receiver to ask for them, a round trip more than an eager send: a block of
// up to kPiecedUpTo bytes goes in pieces of kPieceBytes, each sent eagerly (same tag and peer,
// so they arrive in order). Larger blocks go whole (a single copy between the processes).
constexpr int kPieceBytes = 2048;
constexpr int kPiecedUpTo = 16384;

int pieces_of(int bytes) {
  return bytes > kPieceBytes && bytes <= kPiecedUpTo ? (bytes + kPieceBytes - 1) / kPieceBytes
                                                     : 1;
}

// Posts `bytes` of `data` to or from `peer` (MPI_Isend or MPI_Irecv), in pieces_of(bytes)
// messages.
template <class Post>
void post_pieces(Post post, std::byte* data, int bytes, MPI_Request* requests, int& posted) {
  const int n = pieces_of(bytes);
  for (int k = 0, at = 0; k < n; ++k) {
    const int len = k + 1 < n ? kPieceBytes : bytes - at;
    post(data + at, len, &requests[posted++]);
    at += len;
  }
}

// allgatherv with counts[r] = count_of(r). The requests of up to 8 processes are kept on the
// stack: a gather of a few bytes takes a fraction of a microsecond, and each allocation counts.
template <class CountOf>
void gather_blocks(const GroupComm& g, const void* in, int64_t in_bytes, void* out,
                   CountOf count_of, std::shared_ptr<void> keep_alive, const Wait& wait) {
  const int size = int(g.procs.size());
  const int sent = as_count(in_bytes, "a gather");
  int most = 0;
  for (int r = 0; r < size; ++r)
    if (r != g.rank) most += pieces_of(as_count(count_of(r), "a gather")) + pieces_of(sent);
  constexpr int kOnStack = 16;
  MPI_Request on_stack[kOnStack];
  std::vector<MPI_Request> on_heap(size_t(most > kOnStack ? most : 0));
  MPI_Request* requests = on_heap.empty() ? on_stack : on_heap.data();
  int posted = 0;
  auto* base = static_cast<std::byte*>(out);
  auto* mine = static_cast<std::byte*>(const_cast<void*>(in));  // only sent from
  int64_t at = 0;
  for (int r = 0; r < size; ++r) {
    const int n = as_count(count_of(r), "a gather");
    if (r == g.rank) {
      if (n > 0 && base + at != in) std::memcpy(base + at, in, size_t(n));
    } else {
      auto recv = [&](std::byte* to, int len, MPI_Request* q) {
        check(MPI_Irecv(to, len, MPI_BYTE, r, kExchangeTag, g.comm, q), "MPI_Irecv");
      };
      auto send = [&](std::byte* from, int len, MPI_Request* q) {
        check(MPI_Isend(from, len, MPI_BYTE, r, kExchangeTag, g.comm, q), "MPI_Isend");
      };
      if (n > 0) {
        post_pieces(recv, base + at, n, requests, posted);
        count_received(n);
      }
      if (sent > 0) post_pieces(send, mine, sent, requests, posted);
    }
    at += n;
  }
  wait_for(std::span<MPI_Request>(requests, size_t(posted)), wait, "a gather between processes",
           std::move(keep_alive));
}

}  // namespace

void allgatherv(const GroupComm& g, const void* in, int64_t in_bytes, void* out,
                const std::vector<int64_t>& counts, std::shared_ptr<void> keep_alive,
                const Wait& wait) {
  gather_blocks(
      g, in, in_bytes, out, [&](int r) { return counts[size_t(r)]; }, std::move(keep_alive), wait);
}

void allgather(const GroupComm& g, const void* in, int64_t bytes, void* out,
               std::shared_ptr<void> keep_alive, const Wait& wait) {
  gather_blocks(
      g, in, bytes, out, [=](int) { return bytes; }, std::move(keep_alive), wait);
}

void alltoallv(const GroupComm& g, const void* send, const std::vector<int64_t>& send_counts,
               void* recv, const std::vector<int64_t>& recv_counts,
               std::shared_ptr<void> keep_alive, const Wait& wait) {
  const int rank = g.rank, size = int(g.procs.size());
  std::vector<MPI_Request> requests;
  requests.reserve(size_t(2 * size));
  const auto* from = static_cast<const std::byte*>(send);
  auto* to = static_cast<std::byte*>(recv);
  int64_t received = 0;
  for (int r = 0; r < size; ++r) {
    const int out = as_count(send_counts[size_t(r)], "an exchange");
    const int in = as_count(recv_counts[size_t(r)], "an exchange");
    if (r != rank && in > 0) {
      requests.emplace_back();
      check(MPI_Irecv(to, in, MPI_BYTE, r, kExchangeTag, g.comm, &requests.back()), "MPI_Irecv");
      received += in;
    }
    if (r != rank && out > 0) {
      requests.emplace_back();
      check(MPI_Isend(from, out, MPI_BYTE, r, kExchangeTag, g.comm, &requests.back()), "MPI_Isend");
    }
    from += out;
    to += in;
  }
  count_received(received);
  wait_for(requests, wait, "an exchange between processes", std::move(keep_alive));
}

MPI_Comm world() {
  return state().reads;
}

void barrier(const GroupComm& g, const Wait& wait) {
  MPI_Request request;
  check(MPI_Ibarrier(g.comm, &request), "MPI_Ibarrier");
  wait_for(request, wait, "a barrier between processes", nullptr);
}

void report_failure(const std::string& what) {
  State& s = state();
  if (!active() || s.reported.exchange(true)) return;
  s.report = what.substr(0, kFailureBytes);
  for (int r = 0; r < s.size; ++r) {
    if (r == s.rank) continue;
    MPI_Request request;
    MPI_Isend(s.report.data(), int(s.report.size()), MPI_CHAR, r, kFailureTag, s.failures,
              &request);
    MPI_Request_free(&request);
  }
}

std::optional<std::string> remote_failure() {
  State& s = state();
  if (!s.remote_seen.load(std::memory_order_acquire)) return std::nullopt;
  std::lock_guard lock(s.fail_mu);
  return s.remote;
}

#endif

}  // namespace spmd::runtime::mpi
