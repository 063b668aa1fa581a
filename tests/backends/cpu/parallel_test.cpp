// cpu::parallel_for: covers every index once, carries exceptions back, and runs nested or
// concurrent calls serially instead of deadlocking.
#include "backends/cpu/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

namespace cpu = spmd::cpu;

TEST(ParallelFor, CoversEveryIndexExactlyOnce) {
  for (int64_t n : {0, 1, 7, 1000, 1 << 20}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    cpu::parallel_for(n, 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[size_t(i)]++;
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << "n=" << n << " i=" << i;
  }
}

TEST(ParallelFor, RethrowsAnExceptionFromAnyRange) {
  EXPECT_THROW(cpu::parallel_for(1 << 20, 1,
                                 [](int64_t b, int64_t e) {
                                   if (b <= 1000 && 1000 < e) throw std::runtime_error("boom");
                                 }),
               std::runtime_error);
  // The pool stays usable afterwards.
  std::atomic<int64_t> sum{0};
  cpu::parallel_for(1000, 1, [&](int64_t b, int64_t e) { sum += e - b; });
  EXPECT_EQ(sum.load(), 1000);
}

TEST(ParallelFor, NestedAndConcurrentCallsComplete) {
  std::atomic<int64_t> total{0};
  auto work = [&] {
    cpu::parallel_for(64, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        cpu::parallel_for(100, 1, [&](int64_t bb, int64_t ee) { total += ee - bb; });
    });
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(work);
  for (auto& t : threads) t.join();
  EXPECT_EQ(total.load(), 4 * 64 * 100);
}
