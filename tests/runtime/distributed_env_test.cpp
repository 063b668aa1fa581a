// Under mpirun (ctest's spmd_mpi_suites runs the collective and partitioning suites so),
// this test program is one process of the job: it joins the others before any test uses a
// device, and reads of values spread over processes gather them, so each process checks whole
// values as one process of eight devices does.
#include <spmd/config.h>
#include <spmd/device.h>
#include <spmd/distributed.h>

#include <spmd/error.h>

#include <gtest/gtest.h>

#include <string>

namespace {

const bool joined = [] {
  if (spmd::distributed::launched_process_count() > 1) {
    spmd::distributed::initialize();
    spmd::distributed::set_collective_reads(true);
  }
  return true;
}();

TEST(DistributedEnv, ThisProcessSeesEveryDeviceOfTheJob) {
  ASSERT_TRUE(joined);
  EXPECT_EQ(spmd::device_count(), spmd::config::cpu_device_count() * spmd::process_count());
}

TEST(DistributedEnv, InitializeAfterTheDevicesAreInUseRaises) {
  spmd::devices();
  try {
    spmd::distributed::initialize();
    FAIL() << "expected an error";
  } catch (const spmd::RuntimeError& e) {
    // Joined at start under mpirun: the second call is refused for that instead.
    const std::string want = spmd::distributed::is_initialized()
                                 ? "distributed.initialize should only be called once."
                                 : "must be called before any computations are executed";
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
}

TEST(DistributedEnv, LaunchedProcessCountReadsTheLauncher) {
  // Outside mpirun: 1; under it, the job's size.
  EXPECT_EQ(spmd::distributed::launched_process_count(), spmd::process_count());
}

TEST(DistributedEnv, MpiCommunicatorLimitTakesSizesFromOne) {
  EXPECT_EQ(spmd::config::mpi_communicator_limit(), spmd::config::kDefaultMpiCommunicatorLimit);
  try {
    spmd::config::set_mpi_communicator_limit(0);
    FAIL() << "expected an error";
  } catch (const spmd::ValueError& e) {
    EXPECT_STREQ(e.what(),
                 "[config.set_mpi_communicator_limit] expected a limit of at least 1, got 0");
  }
  EXPECT_EQ(spmd::config::mpi_communicator_limit(), spmd::config::kDefaultMpiCommunicatorLimit);
  // One process keeps none; the processes of a job at most the limit.
  if (spmd::process_count() == 1)
    EXPECT_EQ(spmd::detail::live_mpi_communicators(), 0);
  else
    EXPECT_LE(size_t(spmd::detail::live_mpi_communicators()),
              spmd::config::mpi_communicator_limit());
}

}  // namespace
