// Devices named by the caller are checked where they enter: device_put, SingleDeviceSharding,
// Mesh (and so NamedSharding and shard_map) and pmap's `devices` refuse an unknown id, platform
// or process with JAX's wording (tests/goldens/errors/device_errors.txt, written by
// tools/goldens/gen_device_errors.py), and the executor refuses an unknown id as an internal
// error. The integer environment variables are parsed strictly: SPMD_CPU_DEVICES and
// SPMD_NUM_THREADS in a child process (this process's devices are fixed at their first use), the
// collective timeouts here. Runs with SPMD_CPU_DEVICES=8.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "runtime/communicator.h"
#include "runtime/executor.h"
#include "support/golden.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace sp = spmd;
using sp::Device;
using spmd_test::error_message;

namespace {

std::string device_error(const std::string& name) {
  return spmd_test::jax_error("errors/device_errors.txt", name);
}

// JAX's text for CPU device 42, without PjRt's status code.
std::string unknown_id_42() {
  std::string text = device_error("unknown_device_id");
  const std::string status = "INVALID_ARGUMENT: ";
  EXPECT_EQ(text.rfind(status, 0), 0u) << text;
  return text.substr(status.size());
}

const std::string kEightDevices = "this process has 8 CPU devices, with ids 0 to 7";

TEST(DeviceValidation, DevicePutRefusesAnIdThatIsNotADevice) {
  ASSERT_EQ(sp::device_count(), 8);
  EXPECT_EQ(error_message<sp::ValueError>([] { sp::device_put(sp::ones({2}), Device{.id = 42}); }),
            "[device_put] CpuDevice(id=42): " + unknown_id_42() + "; " + kEightDevices);
  EXPECT_EQ(error_message<sp::ValueError>([] { sp::device_put(sp::ones({2}), Device{.id = 8}); }),
            "[device_put] CpuDevice(id=8): No matching device found for local_device_id 8; " +
                kEightDevices);
  EXPECT_EQ(error_message<sp::ValueError>([] { sp::device_put(sp::ones({2}), Device{.id = -1}); }),
            "[device_put] CpuDevice(id=-1): No matching device found for local_device_id -1; " +
                kEightDevices);
  // The last device is one.
  EXPECT_EQ(sp::device_put(sp::ones({2}), Device{.id = 7}).addressable_shards()[0].device.id, 7);
}

// A Device with a valid id but another platform or process is not a device of this process
// either: spmd has CPU devices of process 0 only.
TEST(DeviceValidation, DevicePutRefusesAnotherPlatformOrProcess) {
  EXPECT_EQ(error_message<sp::ValueError>(
                [] { sp::device_put(sp::ones({2}), Device{.id = 0, .platform = "gpu"}); }),
            "[device_put] GpuDevice(id=0): " + device_error("unknown_platform"));
  EXPECT_EQ(error_message<sp::ValueError>(
                [] { sp::device_put(sp::ones({2}), Device{.id = 3, .process_index = 1}); }),
            "[device_put] CpuDevice(id=3): " + device_error("unknown_process_index"));
}

TEST(DeviceValidation, ShardingsRefuseUnknownDevicesWhenMade) {
  EXPECT_EQ(error_message<sp::ValueError>([] { sp::SingleDeviceSharding(Device{.id = 42}); }),
            "[SingleDeviceSharding] CpuDevice(id=42): " + unknown_id_42() + "; " + kEightDevices);
  EXPECT_EQ(
      error_message<sp::ValueError>([] {
        sp::Mesh({Device{.id = 50}, Device{.id = 51}}, {2}, {"x"});
      }),
      "[Mesh] CpuDevice(id=50): No matching device found for local_device_id 50; " + kEightDevices);
  EXPECT_EQ(error_message<sp::ValueError>([] {
              sp::Mesh({Device{.id = 0}, Device{.id = 1, .platform = "tpu"}}, {2}, {"x"});
            }),
            "[Mesh] TpuDevice(id=1): Unknown backend: 'tpu' requested, but no platforms that are "
            "instances of tpu are present. Platforms present are: cpu");
}

TEST(DeviceValidation, PmapRefusesUnknownAndRepeatedDevices) {
  auto twice = [](const sp::Array& x) { return x * 2; };
  EXPECT_EQ(
      error_message<sp::ValueError>([&] {
        sp::pmap(twice, {.devices = {Device{.id = 99}, Device{.id = 100}}})(sp::ones({2}));
      }),
      "[pmap] CpuDevice(id=99): No matching device found for local_device_id 99; " + kEightDevices);
  EXPECT_EQ(error_message<sp::ValueError>([&] {
              sp::pmap(twice, {.devices = {Device{.id = 2}, Device{.id = 2}}})(sp::ones({2}));
            }),
            "[pmap] a device may appear in `devices` only once, but CpuDevice(id=2) appears more "
            "than once");
}

// Every device id the library launches on comes from checked devices, so an unknown one is an
// internal error, raised before any worker thread is started for it.
TEST(DeviceValidation, ExecutorRefusesAnIdOutsideTheDevices) {
  ASSERT_EQ(sp::device_count(), 8);
  for (int id : {8, 42, -1}) {
    std::vector<int> ids = {0, id};
    bool ran = false;
    EXPECT_EQ(error_message<std::logic_error>(
                  [&] { sp::runtime::launch(ids, [&](int) { ran = true; }).get(); }),
              "[launch] internal error: device id " + std::to_string(id) +
                  " is not one of the 8 devices");
    EXPECT_FALSE(ran) << "device id " << id;
  }
}

TEST(DeviceValidation, SetCpuDeviceCountHasAnUpperBound) {
  EXPECT_EQ(error_message<sp::ValueError>([] { sp::config::set_cpu_device_count(4097); }),
            "[set_cpu_device_count] expected a device count from 1 to 4096, got 4097");
  EXPECT_EQ(sp::config::cpu_device_count(), 8);
}

// Runs tests/runtime/env_probe.cpp with `env` prepended; its output (stdout and stderr) and
// exit status.
std::pair<std::string, int> run_probe(const std::string& env) {
  std::string command = env + " " + SPMD_ENV_PROBE + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return {"(popen failed)", -1};
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  int status = pclose(pipe);
  return {out, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

TEST(DeviceEnv, MalformedCpuDeviceCountIsAValueErrorAtFirstUse) {
  using Result = std::pair<std::string, int>;
  EXPECT_EQ(run_probe("SPMD_CPU_DEVICES=' 6 ' SPMD_NUM_THREADS=3"),
            Result("6 devices, 3 threads\n", 0));
  // atoi read "8x" as 8; "abc", "0" and "-3" as one device.
  for (const char* bad : {"8x", "abc", "0", "-3", "4097", ""}) {
    ASSERT_EQ(run_probe(std::string("SPMD_CPU_DEVICES='") + bad + "'"),
              Result(std::string("ValueError: [SPMD_CPU_DEVICES] expected an integer from 1 to "
                                 "4096, got '") +
                         bad + "'\n",
                     1));
  }
  // Past int's range, where the process used to grow without bound creating devices; reached
  // only once the cases above pass.
  EXPECT_EQ(run_probe("SPMD_CPU_DEVICES=99999999999"),
            Result("ValueError: [SPMD_CPU_DEVICES] expected an integer from 1 to 4096, got "
                   "'99999999999'\n",
                   1));
}

TEST(DeviceEnv, MalformedThreadCountIsAValueErrorAtFirstUse) {
  using Result = std::pair<std::string, int>;
  for (const char* bad : {"0", "two", "4x", "1025"})
    EXPECT_EQ(run_probe(std::string("SPMD_CPU_DEVICES=2 SPMD_NUM_THREADS='") + bad + "'"),
              Result(std::string("ValueError: [SPMD_NUM_THREADS] expected an integer from 1 to "
                                 "1024, got '") +
                         bad + "'\n",
                     1));
}

TEST(DeviceEnv, MalformedFusionSwitchIsAValueErrorAtFirstCompile) {
  using Result = std::pair<std::string, int>;
  EXPECT_EQ(run_probe("SPMD_CPU_DEVICES=2 SPMD_NUM_THREADS=1 SPMD_FUSION=0"),
            Result("2 devices, 1 threads\n", 0));
  for (const char* bad : {"off", "2", ""})
    EXPECT_EQ(run_probe(std::string("SPMD_CPU_DEVICES=2 SPMD_FUSION='") + bad + "'"),
              Result(std::string("ValueError: [SPMD_FUSION] expected an integer from 0 to 1, "
                                 "got '") +
                         bad + "'\n",
                     1));
}

// Sets an environment variable for one scope and restores it.
class EnvScope {
 public:
  EnvScope(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) saved_ = old;
    setenv(name, value, 1);
  }
  ~EnvScope() {
    if (saved_)
      setenv(name_, saved_->c_str(), 1);
    else
      unsetenv(name_);
  }
  EnvScope(const EnvScope&) = delete;
  EnvScope& operator=(const EnvScope&) = delete;

 private:
  const char* name_;
  std::optional<std::string> saved_;
};

TEST(DeviceEnv, CollectiveTimeoutAndPollingAreParsedStrictly) {
  {
    EnvScope timeout("SPMD_COLLECTIVE_TIMEOUT_MS", "10x");  // strtoll read 10 ms
    EXPECT_EQ(error_message<sp::ValueError>([] { sp::runtime::default_collective_timeout(); }),
              "[SPMD_COLLECTIVE_TIMEOUT_MS] expected an integer from 1 to 86400000, got '10x'");
  }
  {
    EnvScope timeout("SPMD_COLLECTIVE_TIMEOUT_MS", " 250 ");
    EXPECT_EQ(sp::runtime::default_collective_timeout(), std::chrono::milliseconds(250));
  }
  EnvScope poll("SPMD_COLLECTIVE_POLL_US", "-5");  // ignored before: the default 50 µs
  EXPECT_EQ(error_message<sp::ValueError>([] {
              sp::runtime::Communicator comm({0, 1});
            }),
            "[SPMD_COLLECTIVE_POLL_US] expected an integer from 0 to 1000000, got '-5'");
}

TEST(DeviceEnv, CollectiveYieldBudgetIsParsedStrictly) {
  EnvScope yield("SPMD_COLLECTIVE_YIELD_US", "2ms");
  EXPECT_EQ(error_message<sp::ValueError>([] {
              sp::runtime::Communicator comm({0, 1});
            }),
            "[SPMD_COLLECTIVE_YIELD_US] expected an integer from 0 to 1000000, got '2ms'");
}

}  // namespace
