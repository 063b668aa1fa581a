// The device worker threads: launches run on every device at once, in launch order per device,
// hand data from one launch to the next, report errors through their future, and combine with
// the Communicator as shard_map uses them. Also built into spmd_tsan_tests.
#include "runtime/executor.h"
#include "backends/cpu/parallel.h"
#include "runtime/communicator.h"
#include "runtime/launch.h"

#include <spmd/config.h>
#include <spmd/error.h>

#include <gtest/gtest.h>

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

namespace {

using spmd::DType;
using spmd::Shape;
namespace rt = spmd::runtime;

std::vector<int> ids(int n) {
  std::vector<int> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

TEST(Executor, RunsEveryRankOnItsDeviceThread) {
  std::vector<int> seen(8, -1);
  rt::launch(ids(8), [&](int rank) { seen[size_t(rank)] = rt::current_device_id(); }).get();
  EXPECT_EQ(seen, ids(8));
  EXPECT_EQ(rt::current_device_id(), -1);
}

TEST(Executor, KernelsShareTheCoresAmongTheDevicesOfALaunch) {
  // Each device's kernels get the cores divided by the devices running at once (at least one),
  // in the library's pool and in OpenMP (oneDNN), so 8 devices on 2 cores use 8 threads in all.
  for (int n : {1, 2, 8}) {
    std::vector<int> pool_threads(static_cast<size_t>(n)), omp_threads(static_cast<size_t>(n));
    rt::launch(ids(n), [&](int rank) {
      pool_threads[size_t(rank)] = spmd::cpu::max_threads();
      omp_threads[size_t(rank)] = omp_get_max_threads();
    }).get();
    const int want = std::max(1, spmd::config::num_threads() / n);
    EXPECT_EQ(pool_threads, std::vector<int>(size_t(n), want)) << n << " devices";
    EXPECT_EQ(omp_threads, std::vector<int>(size_t(n), want)) << n << " devices";
  }
}

TEST(Executor, LaunchesPassDataAlongEachDevice) {
  // Like consecutive pmaps: each launch reads what the previous one wrote on the same device,
  // without waiting for the previous launch as a whole.
  const int n = 8;
  auto data = std::make_shared<std::vector<std::vector<float>>>(n, std::vector<float>(1024, 0.f));
  std::vector<std::shared_future<void>> done;
  for (int step = 0; step < 20; ++step)
    done.push_back(rt::launch(ids(n), [data](int rank) {
      for (float& v : (*data)[size_t(rank)]) v += float(rank + 1);
    }));
  done.back().get();
  for (int r = 0; r < n; ++r) EXPECT_EQ((*data)[size_t(r)][7], 20.f * float(r + 1));
}

TEST(Executor, AnExceptionOnOneDeviceReachesTheFuture) {
  auto f = rt::launch(ids(4), [](int rank) {
    if (rank == 2) throw spmd::ValueError("[test] device 2 failed");
  });
  EXPECT_THROW(f.get(), spmd::ValueError);
  // The devices keep working.
  std::atomic<int> count{0};
  rt::launch(ids(4), [&](int) { ++count; }).get();
  EXPECT_EQ(count.load(), 4);
}

TEST(Executor, CollectivesAcrossALaunchAndAbortOnFailure) {
  const int n = 8;
  auto comm = std::make_shared<rt::Communicator>(ids(n));
  std::vector<float> out(n, 0.f);
  rt::launch(ids(n), [&, comm](int rank) {
    rt::LaunchContext ctx{{"x", "y"}, {4, 2}, comm.get(), rank, rank, {}};
    rt::LaunchScope scope(&ctx);
    rt::Group g = rt::group_over(*rt::current_launch(), {"y"});
    float in = float(rank), sum = 0;
    comm->all_reduce("psum", g.ranks, g.me, rt::ReduceOp::sum, DType::float32, Shape{}, &in, &sum);
    out[size_t(rank)] = sum;
  }).get();
  for (int r = 0; r < n; ++r) EXPECT_EQ(out[size_t(r)], float(r / 2 * 2 * 2 + 1)) << r;

  // A device that fails before a collective releases the others at once.
  auto comm2 = std::make_shared<rt::Communicator>(ids(4), std::chrono::milliseconds(60000));
  auto f = rt::launch(ids(4), [comm2](int rank) {
    try {
      if (rank == 0) throw spmd::ValueError("[test] device 0 failed");
      std::vector<int> all = ids(4);
      float in = 1, sum = 0;
      comm2->all_reduce("psum", all, rank, rt::ReduceOp::sum, DType::float32, Shape{}, &in, &sum);
    } catch (const std::exception& e) {
      comm2->abort(rank, e.what());
      throw;
    }
  });
  EXPECT_THROW(f.get(), spmd::Error);
}

TEST(Executor, ALaunchAbortsItsCommunicatorAndReportsTheFailureItself) {
  // Rank 2 fails before the psum: the launch releases the others (a 60 s timeout would fail the
  // test), whose PeerFailures rank 0 and 1 raise first, yet the caller gets rank 2's error.
  auto comm = std::make_shared<rt::Communicator>(ids(4), std::chrono::milliseconds(60000));
  std::vector<std::string> errors(4);
  auto f = rt::launch(
      ids(4),
      [&errors, comm](int rank) {
        if (rank == 2) throw spmd::ValueError("[test] device 2 failed");
        try {
          std::vector<int> all = ids(4);
          float in = 1, sum = 0;
          comm->all_reduce("psum", all, rank, rt::ReduceOp::sum, DType::float32, Shape{}, &in,
                           &sum);
        } catch (const rt::PeerFailure& e) {
          errors[size_t(rank)] = e.what();
          throw;
        }
      },
      comm);
  try {
    f.get();
    ADD_FAILURE() << "no error";
  } catch (const spmd::ValueError& e) {
    EXPECT_EQ(std::string(e.what()), "[test] device 2 failed");
  }
  for (int r : {0, 1, 3})
    EXPECT_EQ(errors[size_t(r)].rfind("[psum] device 2 failed ([test] device 2 failed) while", 0),
              0u)
        << errors[size_t(r)];
}

}  // namespace
