// Bounded polling before a thread blocks. On the virtual machines spmd runs on, a thread woken on
// a sleeping core resumes tens of microseconds later, longer than most waits it would replace; a
// short poll first avoids that. Used only where every polling thread has a core of its own.
#pragma once

#include <chrono>

#if defined(__SSE2__)
#include <emmintrin.h>
#else
#include <thread>
#endif

namespace spmd::cpu {

inline void cpu_relax() {
#if defined(__SSE2__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Polls `done` for up to `budget`; returns whether it became true.
template <class Done>
bool poll_until(Done done, std::chrono::microseconds budget) {
  if (budget.count() <= 0) return done();
  const auto deadline = std::chrono::steady_clock::now() + budget;
  for (int i = 0;; ++i) {
    if (done()) return true;
    cpu_relax();
    if (i % 64 == 63 && std::chrono::steady_clock::now() > deadline) return done();
  }
}

}  // namespace spmd::cpu
