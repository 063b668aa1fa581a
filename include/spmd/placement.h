// Placing arrays on devices: device_put, an array's shards, and the Array forms of the sharding
// pictures (JAX's jax.device_put, x.addressable_shards, jax.debug.visualize_array_sharding).
#pragma once

#include <spmd/array.h>
#include <spmd/device.h>
#include <spmd/sharding.h>

#include <memory>
#include <string>
#include <vector>

namespace spmd {

// One device's piece of an array (jax.Shard).
struct Shard {
  Device device;
  std::vector<Slice> index;  // the global slice this shard holds, one per dim
  int replica_id = 0;
  Array data;  // the shard's values, on `device`
};

// Places x on a device or lays it out by a sharding; the result is committed. An array already
// laid out that way is returned as it is (no copy).
Array device_put(const Array& x, const Device& device);
Array device_put(const Array& x, const Sharding& sharding);
Array device_put(const Array& x, std::shared_ptr<const Sharding> sharding);

// The sharding picture of an array (rank 1 or 2; `opts.dims` picks two dims of a higher rank).
std::string sharding_to_string(const Array& x, const VisualizeOptions& opts = {});
void visualize_array_sharding(const Array& x, const VisualizeOptions& opts = {});

}  // namespace spmd
