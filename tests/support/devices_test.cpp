// The test binary runs on 8 virtual CPU devices (as JAX's tests use 8 host devices), unless
// SPMD_CPU_DEVICES says otherwise. Set before any test touches a device.
#include <spmd/config.h>

#include <cstdlib>

namespace {
const bool kEightDevices = [] {
  if (!std::getenv("SPMD_CPU_DEVICES")) spmd::config::set_cpu_device_count(8);
  return true;
}();
}  // namespace
