// One worker thread per device, sleeping on a condition variable between tasks.
#include "runtime/executor.h"

#include "backends/cpu/parallel.h"
#include "runtime/communicator.h"
#include "runtime/devices.h"
#include "runtime/fault_injection.h"
#include "runtime/mpi.h"

#include <spmd/config.h>
#include <spmd/device.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <omp.h>

namespace spmd::runtime {
namespace {

thread_local int t_device = -1;

class Worker {
 public:
  explicit Worker(int device) : thread_([this, device] { loop(device); }) {}
  ~Worker() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  void post(std::function<void()> task) {
    {
      std::lock_guard lock(mu_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }
  // Returns once the queue is empty and no task runs.
  void wait_idle() {
    std::unique_lock lock(mu_);
    idle_.wait(lock, [&] { return tasks_.empty() && !busy_ && !claimed_; });
  }
  // Lends the device to the calling thread when nothing is queued or running on it: tasks
  // posted meanwhile wait until release(), so the device still runs one task at a time, in
  // launch order. False when the device is in use.
  bool try_claim() {
    std::lock_guard lock(mu_);
    if (busy_ || claimed_ || !tasks_.empty()) return false;
    claimed_ = true;
    return true;
  }
  // Ends a try_claim() that succeeded.
  void release() {
    bool idle;
    {
      std::lock_guard lock(mu_);
      claimed_ = false;
      idle = tasks_.empty();
    }
    if (idle)
      idle_.notify_all();
    else
      cv_.notify_one();
  }

 private:
  void loop(int device) {
    t_device = device;
    cpu::DenormalsAreZero ftz;
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(mu_);
        busy_ = false;
        if (tasks_.empty()) idle_.notify_all();
        cv_.wait(lock, [&] { return !claimed_ && (stop_ || !tasks_.empty()); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
        busy_ = true;
      }
      task();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_;  // signalled when the queue runs empty
  std::deque<std::function<void()>> tasks_;
  bool busy_ = false;
  bool claimed_ = false;  // the device's work runs on a thread that claimed it
  bool stop_ = false;
  std::thread thread_;  // last: starts after the members it uses
};

// The launches one thread has made that have not finished: their count, waited on at the
// thread's end.
struct Outstanding {
  std::atomic<int> count{0};
  void wait_none() {
    for (int n; (n = count.load(std::memory_order_acquire)) != 0;)
      count.wait(n, std::memory_order_acquire);
  }
};

// A launch's place in its thread's Outstanding, given back when the launch lets go of
// everything it holds.
class Ticket {
 public:
  explicit Ticket(std::shared_ptr<Outstanding> of) : of_(std::move(of)) {
    of_->count.fetch_add(1, std::memory_order_relaxed);
  }
  ~Ticket() {
    if (of_->count.fetch_sub(1, std::memory_order_acq_rel) == 1) of_->count.notify_all();
  }
  Ticket(const Ticket&) = delete;
  Ticket& operator=(const Ticket&) = delete;

 private:
  std::shared_ptr<Outstanding> of_;  // shared: the thread may be gone when the launch ends
};

// The calling thread's Outstanding. A thread's thread_local objects are destroyed when it ends
// and, for the thread that calls exit (main's return included), before any object with static
// storage duration ([basic.start.term]). So waiting here drains a thread's launches before
// the statics their kernels use (oneDNN's, made lazily by the first kernel on a device thread,
// after anything the runtime could register) are destroyed, whatever order they were made in.
// A device thread does not wait: its own queue holds the launches it made, behind the task it
// runs (an exit inside a launch), and the other devices may be waiting for it in a collective.
std::shared_ptr<Outstanding>& this_thread_launches() {
  struct Waiter {
    std::shared_ptr<Outstanding> launches = std::make_shared<Outstanding>();
    ~Waiter() {
      if (t_device < 0) launches->wait_none();
    }
  };
  thread_local Waiter waiter;
  return waiter.launches;
}

// A future that is ready, shared by every launch that has nothing left to wait for: making one
// from a promise costs a futex wake-up (the promise's first set), a tenth of a small launch.
const std::shared_future<void>& ready_future() {
  static const std::shared_future<void> ready = [] {
    std::promise<void> p;
    p.set_value();
    return p.get_future().share();
  }();
  return ready;
}

// The shared state of one launch. Destroyed on the thread that lets go of it last (a device's,
// or the launching thread), after every rank has run; the function (and what it captured) goes
// before the ticket.
struct LaunchState {
  // A rank's error, and whether it is a PeerFailure (a consequence of another rank's error).
  struct RankError {
    std::exception_ptr error;
    bool consequence = false;
  };
  LaunchState(int ranks, int local_ranks, std::function<void(int)> f,
              std::shared_ptr<Communicator> c)
      : ticket(this_thread_launches()),
        fn(std::move(f)),
        remaining(local_ranks),
        ranks(ranks),
        comm(std::move(c)) {}
  Ticket ticket;  // first: given back last
  std::function<void(int)> fn;
  std::mutex mu;
  int remaining;
  int ranks;
  std::vector<RankError> errors;  // one per rank once a rank has failed (under mu), else empty
  std::atomic<bool> failed{false};
  std::shared_ptr<Communicator> comm;
  // Set when the launch runs on device threads; a launch run on the calling thread has none
  // (see outcome()).
  std::optional<std::promise<void>> done;

  // Records the exception being handled as `rank`'s (on `device`) and releases whoever waits for
  // the rank.
  void fail(int rank, int device) {
    bool consequence = false;
    std::string reason = "unknown error";
    try {
      throw;
    } catch (const PeerFailure& e) {
      consequence = true;
      reason = e.what();
    } catch (const std::exception& e) {
      reason = e.what();
    } catch (...) {
    }
    {
      std::lock_guard lock(mu);
      if (errors.empty()) errors.resize(size_t(ranks));
      errors[size_t(rank)] = {std::current_exception(), consequence};
    }
    failed.store(true, std::memory_order_release);
    if (comm) comm->abort(rank, reason);
    // The other processes of the job stop waiting for this one.
    if (!consequence)
      mpi::report_failure("process " + std::to_string(process_index()) + " failed on device " +
                          std::to_string(device) + ": " + reason);
    fault::wake_stalls();
  }

  // The error the launch reports: the first by rank that is a device's own.
  std::exception_ptr root_cause() const {
    for (const RankError& e : errors)
      if (e.error && !e.consequence) return e.error;
    for (const RankError& e : errors)
      if (e.error) return e.error;
    return nullptr;
  }

  void finish_rank() {
    std::lock_guard lock(mu);
    if (--remaining > 0 || !done) return;
    if (std::exception_ptr e = root_cause())
      done->set_exception(e);
    else
      done->set_value();
  }

  // The future of a launch that has finished on the calling thread: the shared ready future
  // when it succeeded, its error otherwise.
  std::shared_future<void> outcome() {
    std::exception_ptr e;
    {
      std::lock_guard lock(mu);
      e = root_cause();
    }
    if (!e) return ready_future();
    std::promise<void> p;
    p.set_exception(e);
    return p.get_future().share();
  }
};

// A fault injected for tests (runtime/fault_injection.h) at the start of a device's share: a
// throw, or a stall that lasts until another device of the launch has failed.
void inject_launch_fault(int device, const LaunchState& state) {
  if (auto bound = fault::check(fault::Where::launch, device, "launch"))
    fault::stall(*bound, [&] { return state.failed.load(std::memory_order_acquire); });
}

class Workers {
 public:
  std::mutex launch_mu;  // keeps every device's queue in one launch order
  Worker& at(int device) {
    std::lock_guard lock(mu_);
    auto& w = workers_[device];
    if (!w) w = std::make_unique<Worker>(device);
    return *w;
  }
  // Waits for every launch posted so far to finish.
  void drain() {
    std::vector<Worker*> all;
    {
      std::lock_guard lock(mu_);
      for (auto& [device, w] : workers_) all.push_back(w.get());
    }
    for (Worker* w : all) w->wait_idle();
  }

 private:
  std::mutex mu_;
  std::unordered_map<int, std::unique_ptr<Worker>> workers_;
};

// The threads live for the process. Launches return before their devices finish; a thread
// waits for its own when it ends (this_thread_launches), which covers a program returning from
// main or calling exit. This handler is the rest: an exit from one thread while others that
// launched are still alive waits for every queue before the statics made before the first
// device use (the primitive registry among them) are destroyed. Not from a device thread, which
// would wait for itself.
Workers& workers() {
  static Workers* w = [] {
    auto* made = new Workers();
    std::atexit([] {
      if (t_device < 0) workers().drain();
    });
    return made;
  }();
  return *w;
}

// The ids come from meshes and shardings whose devices were checked when they were made (see
// runtime::check_devices), so an unknown id here is a bug in spmd: refuse it before starting a
// thread for it.
void check_device_ids(std::span<const int> device_ids) {
  const int count = device_count();
  for (int id : device_ids)
    if (id < 0 || id >= count)
      throw std::logic_error("[launch] internal error: device id " + std::to_string(id) +
                             " is not one of the " + std::to_string(count) + " devices");
}

// Runs `rank`'s share of a launch on the calling thread (device `device`'s worker, or a thread
// that claimed it), recording an error as the rank's.
void run_rank(LaunchState& state, int rank, int device, int kernel_threads) {
  omp_set_num_threads(kernel_threads);
  cpu::set_thread_limit(kernel_threads);
  try {
    if (fault::armed()) inject_launch_fault(device, state);
    state.fn(rank);
  } catch (...) {
    state.fail(rank, device);
  }
  state.finish_rank();
}

// A launch whose one local device has its peers in other processes (a mesh of one device per
// process) runs that device's share on the launching thread, which then waits for it anyway:
// posting it to the device's thread and waiting for that thread to finish costs two thread
// wake-ups, more than a small collective between processes. Not from a device thread, and
// never within one process, where launches stay asynchronous.
bool runs_inline(std::span<const int> device_ids, int local_count) {
  return local_count == 1 && device_ids.size() > 1 && t_device < 0;
}

// Runs `rank`'s share on the calling thread, which has claimed `w`, as device `device`'s own
// thread would (its id, its floating-point mode), then gives the device back.
void run_claimed(Worker& w, LaunchState& state, int rank, int device, int kernel_threads) {
  struct Restore {
    Worker& w;
    int omp_threads = omp_get_max_threads();
    ~Restore() {
      t_device = -1;
      cpu::set_thread_limit(0);
      omp_set_num_threads(omp_threads);
      w.release();
    }
  } restore{w};
  t_device = device;
  cpu::DenormalsAreZero ftz;
  run_rank(state, rank, device, kernel_threads);
}

}  // namespace

int current_device_id() {
  return t_device;
}

void wait_for_launches() {
  if (t_device >= 0)
    throw std::logic_error("[launch] internal error: a device thread waits for its own launches");
  this_thread_launches()->wait_none();
}

std::vector<int> local_ranks_of(std::span<const int> device_ids) {
  check_device_ids(device_ids);
  std::vector<int> local_ranks;
  for (size_t r = 0; r < device_ids.size(); ++r)
    if (is_local_device(device_ids[r])) local_ranks.push_back(int(r));
  return local_ranks;
}

std::shared_future<void> launch(std::span<const int> device_ids, std::function<void(int)> fn,
                                std::shared_ptr<Communicator> comm, bool* ran_here) {
  const std::vector<int> local_ranks = local_ranks_of(device_ids);
  return launch(device_ids, local_ranks, std::move(fn), std::move(comm), ran_here);
}

std::shared_future<void> launch(std::span<const int> device_ids, std::span<const int> local_ranks,
                                std::function<void(int)> fn, std::shared_ptr<Communicator> comm,
                                bool* ran_here) {
  if (ran_here) *ran_here = false;
  // This process runs the ranks of its own devices; the other processes run theirs.
  const int n = int(local_ranks.size());
  if (n == 0) return ready_future();
  // Threads each kernel may use: the cores divided among the devices running at once, so
  // eight devices on two cores do not oversubscribe.
  const int kernel_threads = std::max(1, config::num_threads() / n);
  Workers& ws = workers();
  std::unique_lock order(ws.launch_mu);
  if (runs_inline(device_ids, n)) {
    const int rank = local_ranks.front(), device = device_ids[size_t(rank)];
    Worker& w = ws.at(device);
    if (w.try_claim()) {
      order.unlock();
      LaunchState state(int(device_ids.size()), n, std::move(fn), std::move(comm));
      run_claimed(w, state, rank, device, kernel_threads);
      if (ran_here) *ran_here = true;
      return state.outcome();
    }
  }
  auto state =
      std::make_shared<LaunchState>(int(device_ids.size()), n, std::move(fn), std::move(comm));
  std::shared_future<void> result = state->done.emplace().get_future().share();
  for (int rank : local_ranks) {
    const int device = device_ids[size_t(rank)];
    ws.at(device).post(
        [state, rank, device, kernel_threads] { run_rank(*state, rank, device, kernel_threads); });
  }
  return result;
}

}  // namespace spmd::runtime
