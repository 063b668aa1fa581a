// The process's devices: `cpu_device_count()` virtual CPU devices, fixed on first use.
#include <spmd/config.h>
#include <spmd/device.h>
#include <spmd/error.h>

#include "core/env.h"

#include <cctype>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>

namespace spmd {
namespace {

struct DeviceTable {
  std::mutex mu;
  std::optional<int> requested;  // unset until set_cpu_device_count or the first read of the count
  bool frozen = false;
  std::vector<Device> devices;
};

DeviceTable& table() {
  static DeviceTable* t = new DeviceTable();
  return *t;
}

// The count to create, under t.mu. SPMD_CPU_DEVICES is read here, when the count is first
// needed, rather than in a static initialiser: a malformed value then raises a ValueError the
// caller can catch, and raises again on every later use until set_cpu_device_count replaces it.
int requested_count(DeviceTable& t) {
  if (!t.requested)
    t.requested = int(env_int("SPMD_CPU_DEVICES", 1, config::kMaxCpuDevices).value_or(1));
  return *t.requested;
}

const std::vector<Device>& frozen_devices() {
  DeviceTable& t = table();
  std::lock_guard lock(t.mu);
  if (!t.frozen) {
    const int n = requested_count(t);
    for (int i = 0; i < n; ++i) t.devices.push_back(Device{i, "cpu", 0});
    t.frozen = true;
  }
  return t.devices;
}

std::string id_range(int count) {
  return count == 1
             ? "1 CPU device, with id 0"
             : std::to_string(count) + " CPU devices, with ids 0 to " + std::to_string(count - 1);
}

// Why `d` is not one of the `count` devices of this process, or nullopt. The texts after the
// device are JAX's: jax.devices('gpu') without a GPU, jax.local_devices(process_index=1) in a
// single process, and PjRt's lookup of an id the client lacks (x.__dlpack__(dl_device=(1, 42))).
std::optional<std::string> unknown_device(const Device& d, int count) {
  if (d.platform != "cpu")
    return repr(d) + ": Unknown backend: '" + d.platform +
           "' requested, but no platforms that are instances of " + d.platform +
           " are present. Platforms present are: cpu";
  if (d.process_index != process_index())
    return repr(d) + ": Unknown process_index " + std::to_string(d.process_index);
  if (d.id < 0 || d.id >= count)
    return repr(d) + ": No matching device found for local_device_id " + std::to_string(d.id) +
           "; this process has " + id_range(count);
  return std::nullopt;
}

}  // namespace

namespace config {

void set_cpu_device_count(int n) {
  if (n < 1 || n > kMaxCpuDevices)
    throw ValueError("[set_cpu_device_count] expected a device count from 1 to " +
                     std::to_string(kMaxCpuDevices) + ", got " + std::to_string(n));
  DeviceTable& t = table();
  std::lock_guard lock(t.mu);
  if (t.frozen && n != int(t.devices.size()))
    throw ValueError("[set_cpu_device_count] the CPU devices are already in use with " +
                     std::to_string(t.devices.size()) +
                     " devices; set the count before the first use of any device");
  t.requested = n;
}

int cpu_device_count() {
  DeviceTable& t = table();
  std::lock_guard lock(t.mu);
  return t.frozen ? int(t.devices.size()) : requested_count(t);
}

}  // namespace config

std::string repr(const Device& d) {
  std::string platform = d.platform;
  if (!platform.empty()) platform[0] = char(std::toupper(static_cast<unsigned char>(platform[0])));
  return platform + "Device(id=" + std::to_string(d.id) + ")";
}

std::ostream& operator<<(std::ostream& os, const Device& d) {
  return os << repr(d);
}

std::vector<Device> devices() {
  return frozen_devices();
}
int device_count() {
  return int(frozen_devices().size());
}
std::vector<Device> local_devices() {
  return frozen_devices();
}
int local_device_count() {
  return device_count();
}
int process_index() {
  return 0;
}
int process_count() {
  return 1;
}

namespace runtime {

void check_devices(std::span<const Device> devices, std::string_view api) {
  if (devices.empty()) return;
  const int count = device_count();
  for (const Device& d : devices)
    if (std::optional<std::string> why = unknown_device(d, count))
      throw ValueError("[" + std::string(api) + "] " + *why);
}

}  // namespace runtime

}  // namespace spmd
