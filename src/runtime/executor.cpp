// One worker thread per device, sleeping on a condition variable between tasks.
#include "runtime/executor.h"

#include "backends/cpu/parallel.h"

#include <spmd/config.h>
#include <spmd/device.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
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
    idle_.wait(lock, [&] { return tasks_.empty() && !busy_; });
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
        cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
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
  bool stop_ = false;
  std::thread thread_;  // last: starts after the members it uses
};

// The shared state of one launch.
struct LaunchState {
  explicit LaunchState(int n) : remaining(n), errors(size_t(n)) {}
  std::mutex mu;
  int remaining;
  std::vector<std::exception_ptr> errors;
  std::promise<void> done;
};

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

// The threads live for the process. Launches return before their devices finish, so a program
// may reach exit with work still running; the exit waits for it (registered after the
// primitive registry and the other statics the work uses were made, so it runs before they are
// destroyed). Not from a device thread, which would wait for itself.
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

}  // namespace

int current_device_id() {
  return t_device;
}

std::shared_future<void> launch(std::span<const int> device_ids, std::function<void(int)> fn) {
  check_device_ids(device_ids);
  const int n = int(device_ids.size());
  auto state = std::make_shared<LaunchState>(n);
  std::shared_future<void> result = state->done.get_future().share();
  if (n == 0) {
    state->done.set_value();
    return result;
  }
  auto shared_fn = std::make_shared<std::function<void(int)>>(std::move(fn));
  // Threads each kernel may use: the cores divided among the devices running at once, so
  // eight devices on two cores do not oversubscribe.
  const int kernel_threads = std::max(1, config::num_threads() / n);
  Workers& ws = workers();
  std::lock_guard order(ws.launch_mu);
  for (int rank = 0; rank < n; ++rank) {
    ws.at(device_ids[size_t(rank)]).post([state, shared_fn, rank, kernel_threads] {
      omp_set_num_threads(kernel_threads);
      cpu::set_thread_limit(kernel_threads);
      try {
        (*shared_fn)(rank);
      } catch (...) {
        state->errors[size_t(rank)] = std::current_exception();
      }
      std::lock_guard lock(state->mu);
      if (--state->remaining > 0) return;
      for (auto& e : state->errors)
        if (e) {
          state->done.set_exception(e);
          return;
        }
      state->done.set_value();
    });
  }
  return result;
}

}  // namespace spmd::runtime
