// Global arrays across processes (JAX's multi-controller model): an array's sharding names every
// device of every process, but a process holds only the shards of its own, addressable, devices.
// These build such arrays from each process's part and bring their whole value back
// (jax.make_array_from_callback, jax.make_array_from_process_local_data,
// multihost_utils.process_allgather). In one process every device is addressable.
#pragma once

#include <spmd/array.h>
#include <spmd/dtype.h>
#include <spmd/sharding.h>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace spmd {

// A block of a global array: one Slice per dim (what JAX passes as a tuple of slices).
using Index = std::vector<Slice>;

// The values of the block at `index`: an Array, or anything convertible to one (a C++ scalar).
using DataCallback = std::function<Array(const Index& index)>;

// jax.make_array_from_callback: a committed array of `shape` laid out by `sharding`, each
// addressable device's shard given by `callback` on that shard's index. A fully replicated
// sharding calls it once, with the whole index; otherwise once per addressable device, replicas
// included, in the sharding's device order. The dtype is `dtype` or, when unset, the first
// block's; every block must have it and the shard shape (JAX's ValueErrors otherwise).
Array make_array_from_callback(const Shape& shape, std::shared_ptr<const Sharding> sharding,
                               const DataCallback& callback,
                               std::optional<DType> dtype = std::nullopt);
Array make_array_from_callback(const Shape& shape, const Sharding& sharding,
                               const DataCallback& callback,
                               std::optional<DType> dtype = std::nullopt);

// jax.make_array_from_process_local_data: a committed array laid out by `sharding` from this
// process's part of it. Per dim, local_data spans either the whole global dim or just the blocks
// this process's devices hold, stacked in order of their position. `global_shape` unset infers it
// (each process holding an equal share); in one process it must equal local_data's shape.
Array make_array_from_process_local_data(std::shared_ptr<const Sharding> sharding,
                                         const Array& local_data,
                                         std::optional<Shape> global_shape = std::nullopt);
Array make_array_from_process_local_data(const Sharding& sharding, const Array& local_data,
                                         std::optional<Shape> global_shape = std::nullopt);

// multihost_utils.process_allgather, as an uncommitted array. A fully addressable x is each
// process's own value: stacked along a new axis 0 (one entry per process) or, with `tiled`,
// concatenated along axis 0 (scalars are stacked); in one process that is x[None], or x itself
// with `tiled`. An x spanning processes is one global value: its whole value, which needs
// `tiled` (JAX's ValueError otherwise).
Array process_allgather(const Array& x, bool tiled = false);

}  // namespace spmd
