// Process-wide settings.
#include <spmd/config.h>

#include <atomic>
#include <cstdlib>
#include <thread>

namespace spmd::config {
namespace {
std::atomic<bool> g_x64{false};
std::atomic<bool> g_partitionable{true};

int initial_threads() {
  if (const char* env = std::getenv("SPMD_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  unsigned hw = std::thread::hardware_concurrency();
  return hw ? int(hw) : 1;
}
std::atomic<int> g_threads{initial_threads()};
}  // namespace

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
  return g_threads;
}

}  // namespace spmd::config
