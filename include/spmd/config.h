// Process-wide settings, mirroring jax.config: 64-bit types and the random-number mode.
#pragma once

#include <cstddef>
#include <map>
#include <string>

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

// The most entries each in-memory compile cache keeps (default 4096, jaxlib's PjitFunctionCache
// capacity and jax._src.util.cache's max_size): jit's traces per jitted function, shard_map's per
// shard_map object, the compiled programs by content (jit, shard_map and pmap bodies,
// partitioned programs), the linearizations and transpositions of call bodies, and eager ops'
// compiled primitives per thread. Past it the least recently used entry is dropped and compiled
// again when met again. At least 1; a smaller bound takes effect as each cache next adds an
// entry.
inline constexpr size_t kDefaultCompileCacheSize = 4096;
void set_compile_cache_size(size_t n);
size_t compile_cache_size();

// The most MPI communicators of device groups each process keeps between processes (default
// 256): a launch whose collectives name groups without one makes theirs first, freeing the least
// recently used others beyond the bound (after the launches already made have finished), and a
// group met again gets a new one. Open MPI has a finite number of communicator ids, and each
// costs memory. At least 1; a launch keeps all of its own, even more than the bound. Every
// process of a job must set the same value at the same point of the program (between the same
// launches), since the processes make and free communicators together.
inline constexpr size_t kDefaultMpiCommunicatorLimit = 256;
void set_mpi_communicator_limit(size_t n);
size_t mpi_communicator_limit();

}  // namespace spmd::config

namespace spmd {

// JAX's jax.clear_caches(): empties every compile cache listed at config::set_compile_cache_size,
// so later calls trace and compile again. Safe while other threads call jit, eager ops or
// shard_map: a call already running keeps what it found.
void clear_caches();

namespace detail {
// Entries held by each process-wide compile cache by name, and by the calling thread's eager
// caches (names ending in "(this thread)"). For tests and diagnostics.
std::map<std::string, size_t> cache_sizes();
}  // namespace detail

}  // namespace spmd
