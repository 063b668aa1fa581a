// Process-wide settings, mirroring jax.config: 64-bit types and the random-number mode.
#pragma once

namespace spmd::config {

// JAX's jax_enable_x64. Off by default: 64-bit requests become 32-bit types.
void enable_x64(bool on);
bool x64_enabled();

// JAX's jax_threefry_partitionable (default true since JAX 0.5). False gives the older
// "stable" derivation of split and random bits.
void set_threefry_partitionable(bool on);
bool threefry_partitionable();

// Worker threads kernels may use on this process (default: env SPMD_NUM_THREADS, else the
// hardware concurrency). The variable must be an integer from 1 to kMaxNumThreads; it is read
// on first use, where anything else raises ValueError.
inline constexpr int kMaxNumThreads = 1024;
void set_num_threads(int n);
int num_threads();

// JAX's jax_num_cpu_devices: the number of virtual CPU devices, from 1 to kMaxCpuDevices
// (default: env SPMD_CPU_DEVICES, else 1). Must be set before the devices are first used;
// changing it afterwards raises. The variable is read when the count is first needed and must be
// an integer in the same range; anything else raises ValueError there.
inline constexpr int kMaxCpuDevices = 4096;
void set_cpu_device_count(int n);
int cpu_device_count();

// What jit and eager ops do when the partitioner must move data that no annotation asked for
// (an all-gather or all-to-all between the splits propagation chose and what an equation
// needs): allow it silently (default, as JAX), warn once per compiled program on stderr with
// sp::explain's account, or raise ShardingError with it.
enum class ImplicitResharding { allow, warn, error };
void set_implicit_resharding(ImplicitResharding mode);
ImplicitResharding implicit_resharding();

}  // namespace spmd::config
