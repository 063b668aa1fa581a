// How a process's local data maps onto the blocks of a global array (JAX's
// local_to_global_shape, num_addressable_indices and the slicing of
// make_array_from_process_local_data). Computed from a layout whose devices carry their process
// index and from the process asking, so that the mapping for several processes can be checked
// in one.
#pragma once

#include <spmd/global_arrays.h>
#include <spmd/sharding.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace spmd::global_arrays {

// JAX's get_process_index_and_count: how many distinct sets of dim `dim`'s blocks the processes
// hold (1 when `process` holds every slot or every slot holds everything), or nullopt when the
// layout is not process-uniform on that dim (the processes hold different numbers of blocks, or
// sets that overlap without being equal). `universal` is the layout of an array whose every dim
// has as many elements as there are devices.
std::optional<int64_t> process_count_on_dim(const std::vector<ShardSlot>& universal, int dim,
                                            int process);

// JAX's num_addressable_indices: the elements of dim `dim` that `process`'s slots hold.
int64_t num_addressable_indices(const std::vector<ShardSlot>& layout, int dim, int process);

// Where each block of a global array lies in one process's local data.
struct LocalBlocks {
  std::vector<bool> whole;                   // per dim: the local data spans the global dim
  std::vector<std::vector<int64_t>> starts;  // per dim: the process's distinct block starts
  Shape block;                               // the shard shape
  // The part of the local data that holds the block at `index` (a block of the process).
  Index local_index(const Index& index) const;
};

// The mapping for `process` with local data of shape `local`, or JAX's ValueError when a dim of
// `local` is neither the global dim nor what the process's blocks span.
LocalBlocks local_blocks(const std::vector<ShardSlot>& layout, const Shape& block,
                         const Shape& local, const Shape& global, int process);

// JAX's local_to_global_shape: per dim, the local extent times process_count_on_dim, nullopt
// where the layout is not process-uniform.
std::vector<std::optional<int64_t>> local_to_global_shape(const std::vector<ShardSlot>& universal,
                                                          const Shape& local, int process);

}  // namespace spmd::global_arrays
