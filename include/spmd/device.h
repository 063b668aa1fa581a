// Devices: JAX's jax.Device. On CPU the process has `config::cpu_device_count()` virtual
// devices, each a worker thread with its own allocations.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace spmd {

struct Device {
  int id = 0;
  std::string platform = "cpu";
  int process_index = 0;
  bool operator==(const Device& o) const { return id == o.id && platform == o.platform; }
  bool operator<(const Device& o) const { return id < o.id; }
};

// "CpuDevice(id=0)", as JAX prints a CPU device.
std::string repr(const Device& d);
std::ostream& operator<<(std::ostream& os, const Device& d);

// Every device of every process, by id (jax.devices()).
std::vector<Device> devices();
int device_count();
// The devices of this process (jax.local_devices()).
std::vector<Device> local_devices();
int local_device_count();
// This process's index (0 without multi-process).
int process_index();
int process_count();
// Whether this process holds the device's buffers (JAX's addressable devices): the device
// belongs to process_index().
bool is_addressable(const Device& device);

}  // namespace spmd

namespace spmd::runtime {

// Throws ValueError "[api] ..." unless every device is one of devices(): platform "cpu", process
// index 0 and an id from 0 to device_count() - 1. Device is a plain struct a caller can fill
// with anything, so every API that takes devices checks them here before using them.
void check_devices(std::span<const Device> devices, std::string_view api);

// Bytes copied between the host and devices or between devices since the last reset. Every
// copy the runtime makes is counted, so a test can show that a computation moved no data.
struct TransferStats {
  int64_t host_to_device_bytes = 0;
  int64_t device_to_host_bytes = 0;
  int64_t device_to_device_bytes = 0;
  int64_t transfers = 0;  // number of copies (and of messages from other processes)
  // Bytes this process received from other processes (device_put, collectives and gathers
  // between processes, counted by the receiver). Not part of total_bytes, which counts copies
  // within this process.
  int64_t between_processes_bytes = 0;
  int64_t total_bytes() const {
    return host_to_device_bytes + device_to_host_bytes + device_to_device_bytes;
  }
};
TransferStats transfer_stats();
void reset_transfer_stats();

}  // namespace spmd::runtime
