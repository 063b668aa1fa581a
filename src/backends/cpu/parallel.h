// Splitting a kernel's work across the process's worker threads. Small work stays on the
// calling thread; workers sleep on a condition variable between jobs (no spinning).
#pragma once

#include <cstdint>
#include <functional>

namespace spmd::cpu {

// Calls fn(begin, end) over disjoint ranges covering [0, n). Work below `min_grain` items per
// thread runs on the calling thread alone. Returns when every range is done; an exception in
// any range is rethrown here.
void parallel_for(int64_t n, int64_t min_grain, const std::function<void(int64_t, int64_t)>& fn);

// Threads parallel_for may use on the calling thread: config::num_threads(), or less on a device
// thread that shares the cores with other devices (set_thread_limit).
int max_threads();
// Caps max_threads() for the calling thread (0 removes the cap).
void set_thread_limit(int n);

// While alive, the calling thread flushes denormal results to zero and reads denormal inputs as
// zero (x86 MXCSR FTZ and DAZ), as XLA:CPU runs its kernels; the previous mode is restored
// afterwards. Pool threads run in this mode always.
class DenormalsAreZero {
 public:
  DenormalsAreZero();
  ~DenormalsAreZero();
  DenormalsAreZero(const DenormalsAreZero&) = delete;
  DenormalsAreZero& operator=(const DenormalsAreZero&) = delete;

 private:
  unsigned saved_;
};

}  // namespace spmd::cpu
