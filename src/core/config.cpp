// Process-wide settings.
#include <spmd/config.h>
#include <spmd/error.h>

#include "core/env.h"

#include <atomic>
#include <optional>
#include <thread>

namespace spmd::config {
namespace {
std::atomic<bool> g_x64{false};
std::atomic<bool> g_partitionable{true};
std::atomic<ImplicitResharding> g_resharding{ImplicitResharding::allow};

// Read on first use rather than at load time, so a malformed SPMD_NUM_THREADS raises a
// ValueError the caller can catch instead of terminating the program before main.
int default_threads() {
  static const int n = [] {
    if (std::optional<int64_t> env = env_int("SPMD_NUM_THREADS", 1, kMaxNumThreads))
      return int(*env);
    unsigned hw = std::thread::hardware_concurrency();
    return hw ? int(hw) : 1;
  }();
  return n;
}
std::atomic<int> g_threads{0};  // 0: not set, default_threads()
std::atomic<size_t> g_compile_cache_size{kDefaultCompileCacheSize};
std::atomic<size_t> g_mpi_communicator_limit{kDefaultMpiCommunicatorLimit};
}  // namespace

void set_implicit_resharding(ImplicitResharding mode) {
  g_resharding = mode;
}

ImplicitResharding implicit_resharding() {
  return g_resharding;
}

void enable_x64(bool on) {
  g_x64 = on;
}
bool x64_enabled() {
  return g_x64;
}
void set_threefry_partitionable(bool on) {
  g_partitionable = on;
}
bool threefry_partitionable() {
  return g_partitionable;
}
void set_num_threads(int n) {
  g_threads = n > 0 ? n : 1;
}
int num_threads() {
  int n = g_threads;
  return n > 0 ? n : default_threads();
}

void set_compile_cache_size(size_t n) {
  if (n < 1)
    throw ValueError("[config.set_compile_cache_size] expected a size of at least 1, got " +
                     std::to_string(n));
  g_compile_cache_size = n;
}
size_t compile_cache_size() {
  return g_compile_cache_size.load(std::memory_order_relaxed);
}

void set_mpi_communicator_limit(size_t n) {
  if (n < 1)
    throw ValueError("[config.set_mpi_communicator_limit] expected a limit of at least 1, got " +
                     std::to_string(n));
  g_mpi_communicator_limit = n;
}
size_t mpi_communicator_limit() {
  return g_mpi_communicator_limit.load(std::memory_order_relaxed);
}

}  // namespace spmd::config
