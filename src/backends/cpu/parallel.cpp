// A small fixed pool of worker threads for kernels. Between jobs a worker polls briefly for the
// next one (the kernels of a program follow each other closely) and then sleeps on a condition
// variable; the caller takes a share of the work itself and polls briefly for the workers'
// shares. The pool has cores − 1 workers and is used by one calling thread at a time, so every
// polling thread has a core. Calls made while the pool is busy (another device thread, or a
// kernel inside a kernel) run on the calling thread.
#include "backends/cpu/parallel.h"

#include "backends/cpu/poll.h"

#include <spmd/config.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#define SPMD_HAS_MXCSR 1
#endif

namespace spmd::cpu {

#ifdef SPMD_HAS_MXCSR
DenormalsAreZero::DenormalsAreZero() : saved_(_mm_getcsr()) {
  _mm_setcsr(saved_ | 0x8040u);
}
DenormalsAreZero::~DenormalsAreZero() {
  _mm_setcsr(saved_);
}
#else
DenormalsAreZero::DenormalsAreZero() : saved_(0) {}
DenormalsAreZero::~DenormalsAreZero() {}
#endif

namespace {

// How long an idle worker waits for the next job, and the caller for the workers, before sleeping.
constexpr std::chrono::microseconds kPoll(50);

class ThreadPool {
 public:
  explicit ThreadPool(int workers) {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { worker_loop(); });
  }
  ~ThreadPool() {
    {
      std::lock_guard lock(mu_);
      stop_.store(true, std::memory_order_release);
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }
  int workers() const { return int(threads_.size()); }

  // Runs chunk(i) for i in [0, chunks) on the workers and the caller. Returns false (running
  // nothing) when the pool is already busy.
  bool run(int chunks, const std::function<void(int)>& chunk) {
    std::unique_lock busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    {
      std::lock_guard lock(mu_);
      job_ = &chunk;
      chunks_ = chunks;
      next_ = 0;
      pending_.store(chunks, std::memory_order_relaxed);
      error_ = nullptr;
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    work();
    cpu::poll_until([&] { return pending_.load(std::memory_order_acquire) == 0; }, kPoll);
    std::unique_lock lock(mu_);
    done_.wait(lock, [&] { return pending_.load(std::memory_order_relaxed) == 0; });
    job_ = nullptr;
    if (error_) std::rethrow_exception(error_);
    return true;
  }

 private:
  void work() {
    for (;;) {
      int i;
      {
        std::lock_guard lock(mu_);
        if (!job_ || next_ >= chunks_) return;
        i = next_++;
      }
      try {
        (*job_)(i);
      } catch (...) {
        std::lock_guard lock(mu_);
        if (!error_) error_ = std::current_exception();
      }
      std::lock_guard lock(mu_);
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) done_.notify_all();
    }
  }

  void worker_loop() {
    DenormalsAreZero ftz;
    uint64_t seen = 0;
    for (;;) {
      cpu::poll_until(
          [&] {
            return stop_.load(std::memory_order_acquire) ||
                   generation_.load(std::memory_order_acquire) != seen;
          },
          kPoll);
      {
        std::unique_lock lock(mu_);
        wake_.wait(lock, [&] { return stop_.load() || (generation_.load() != seen && job_); });
        if (stop_.load()) return;
        seen = generation_.load();
      }
      work();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex busy_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  const std::function<void(int)>* job_ = nullptr;
  int chunks_ = 0, next_ = 0;
  std::atomic<int> pending_{0};          // written under mu_, polled without it
  std::atomic<uint64_t> generation_{0};  // written under mu_, polled without it
  std::atomic<bool> stop_{false};
  std::exception_ptr error_;
};

ThreadPool& pool() {
  static ThreadPool p(std::max(0, config::num_threads() - 1));
  return p;
}

thread_local bool t_inside_kernel = false;

// Marks the current thread as running a kernel range, so nested calls run serially.
struct InsideKernel {
  bool was = t_inside_kernel;
  InsideKernel() { t_inside_kernel = true; }
  ~InsideKernel() { t_inside_kernel = was; }
};

}  // namespace

namespace {
thread_local int t_thread_limit = 0;
}  // namespace

int max_threads() {
  int n = config::num_threads();
  return t_thread_limit > 0 ? std::min(n, t_thread_limit) : n;
}

void set_thread_limit(int n) {
  t_thread_limit = n;
}

void parallel_for(int64_t n, int64_t min_grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  int threads =
      std::min<int64_t>(max_threads(), std::max<int64_t>(1, n / std::max<int64_t>(1, min_grain)));
  if (threads <= 1 || t_inside_kernel) {
    fn(0, n);
    return;
  }
  threads = std::min(threads, pool().workers() + 1);
  const int64_t chunk = (n + threads - 1) / threads;
  auto run_chunk = [&](int i) {
    int64_t begin = int64_t(i) * chunk, end = std::min(n, begin + chunk);
    InsideKernel mark;
    if (begin < end) fn(begin, end);
  };
  if (!pool().run(threads, run_chunk)) fn(0, n);
}

}  // namespace spmd::cpu
