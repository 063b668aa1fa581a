// The devices: `cpu_device_count()` virtual CPU devices in this process, fixed on first use, and
// after distributed::initialize those of every process of the job, numbered process by process.
#include <spmd/config.h>
#include <spmd/device.h>
#include <spmd/error.h>

#include "core/env.h"
#include "runtime/devices.h"

#include <algorithm>
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
  std::vector<Device> devices;  // every process's, by id
  // The job: this process's index and each process's first device id and device count.
  int process = 0;
  std::vector<int> first{0};
  std::vector<int> counts;
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
    t.counts = {n};
    t.frozen = true;
  }
  return t.devices;
}

int owner_of(const DeviceTable& t, int id) {
  auto it = std::upper_bound(t.first.begin(), t.first.end(), id);
  return int(it - t.first.begin()) - 1;
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
  if (d.process_index < 0 || d.process_index >= process_count())
    return repr(d) + ": Unknown process_index " + std::to_string(d.process_index);
  if (d.id < 0 || d.id >= count)
    return repr(d) + ": No matching device found for local_device_id " + std::to_string(d.id) +
           (process_count() == 1 ? "; this process has " : "; the processes have ") +
           id_range(count);
  if (const int owner = runtime::process_of_device(d.id); owner != d.process_index)
    return repr(d) + ": device " + std::to_string(d.id) + " belongs to process " +
           std::to_string(owner) + ", not process " + std::to_string(d.process_index);
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
  if (t.frozen && n != t.counts[size_t(t.process)])
    throw ValueError("[set_cpu_device_count] the CPU devices are already in use with " +
                     std::to_string(t.counts[size_t(t.process)]) +
                     " devices; set the count before the first use of any device");
  t.requested = n;
}

int cpu_device_count() {
  DeviceTable& t = table();
  std::lock_guard lock(t.mu);
  return t.frozen ? t.counts[size_t(t.process)] : requested_count(t);
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
  const std::vector<Device>& all = frozen_devices();
  const int p = process_index();
  std::vector<Device> mine;
  for (const Device& d : all)
    if (d.process_index == p) mine.push_back(d);
  return mine;
}
int local_device_count() {
  frozen_devices();
  return config::cpu_device_count();
}
int process_index() {
  DeviceTable& t = table();
  std::lock_guard lock(t.mu);
  return t.process;
}
int process_count() {
  DeviceTable& t = table();
  std::lock_guard lock(t.mu);
  return int(t.first.size());
}

namespace runtime {

bool devices_in_use() {
  DeviceTable& t = table();
  std::lock_guard lock(t.mu);
  return t.frozen;
}

int requested_local_devices() {
  DeviceTable& t = table();
  std::lock_guard lock(t.mu);
  return requested_count(t);
}

void set_job(int process, const std::vector<int>& counts) {
  DeviceTable& t = table();
  std::lock_guard lock(t.mu);
  t.process = process;
  t.counts = counts;
  t.first.clear();
  t.devices.clear();
  int id = 0;
  for (size_t p = 0; p < counts.size(); ++p) {
    t.first.push_back(id);
    for (int i = 0; i < counts[p]; ++i) t.devices.push_back(Device{id++, "cpu", int(p)});
  }
  t.frozen = true;
}

int process_of_device(int id) {
  frozen_devices();
  DeviceTable& t = table();
  std::lock_guard lock(t.mu);
  return owner_of(t, id);
}

bool is_local_device(int id) {
  frozen_devices();
  DeviceTable& t = table();
  std::lock_guard lock(t.mu);
  return owner_of(t, id) == t.process;
}

void check_devices(std::span<const Device> devices, std::string_view api) {
  if (devices.empty()) return;
  const int count = device_count();
  for (const Device& d : devices)
    if (std::optional<std::string> why = unknown_device(d, count))
      throw ValueError("[" + std::string(api) + "] " + *why);
}

}  // namespace runtime

}  // namespace spmd
