// The process's devices: `cpu_device_count()` virtual CPU devices, fixed on first use.
#include <spmd/config.h>
#include <spmd/device.h>
#include <spmd/error.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <ostream>
#include <string>

namespace spmd {
namespace {

int initial_device_count() {
  if (const char* env = std::getenv("SPMD_CPU_DEVICES")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  return 1;
}

struct DeviceTable {
  std::mutex mu;
  int requested = initial_device_count();
  bool frozen = false;
  std::vector<Device> devices;
};

DeviceTable& table() {
  static DeviceTable* t = new DeviceTable();
  return *t;
}

const std::vector<Device>& frozen_devices() {
  DeviceTable& t = table();
  std::lock_guard lock(t.mu);
  if (!t.frozen) {
    for (int i = 0; i < t.requested; ++i) t.devices.push_back(Device{i, "cpu", 0});
    t.frozen = true;
  }
  return t.devices;
}

}  // namespace

namespace config {

void set_cpu_device_count(int n) {
  if (n < 1)
    throw ValueError("[set_cpu_device_count] expected a positive device count, got " +
                     std::to_string(n));
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
  return t.frozen ? int(t.devices.size()) : t.requested;
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

}  // namespace spmd
