// Bounded polling before a thread blocks. On the virtual machines spmd runs on, a thread woken on
// a sleeping core resumes tens of microseconds later, longer than most waits it would replace; a
// short poll first avoids that. Used only where every polling thread has a core of its own.
#pragma once

#include <chrono>
#include <thread>

#if defined(__SSE2__)
#include <emmintrin.h>
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

// Yields the core while `done` is false, for up to `budget`; returns whether it became true. For
// threads that outnumber the cores: a yielding thread stays runnable, so its peers get the core,
// and it sees `done` at its next turn instead of waiting to be woken, which on a loaded machine
// can take milliseconds.
template <class Done>
bool yield_until(Done done, std::chrono::microseconds budget) {
  if (budget.count() <= 0) return done();
  const auto deadline = std::chrono::steady_clock::now() + budget;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return done();
    std::this_thread::yield();
  }
  return true;
}

}  // namespace spmd::cpu
