// The one place shard geometry is computed: JAX's iota tile assignment for a NamedSharding.
// Every device's index slices and replica id, and so shard shapes, devices_indices_map, the
// pictures and the partitioner's block order, come from tile_assignment().
#pragma once

#include <spmd/sharding.h>

#include <cstdint>
#include <vector>

namespace spmd {

struct TileAssignment {
  // Blocks per array dim: the product of the sizes of the mesh axes on that dim.
  std::vector<int64_t> tiles;
  // Devices holding each block: the product of the sizes of the axes the spec leaves out.
  int64_t replication = 1;
  // Positions in mesh.devices(), row-major over (tiles..., replication): entry
  // t * replication + r is replica r of block t (t row-major over `tiles`).
  std::vector<int64_t> positions;
};

// The tile assignment of `spec` over `mesh` for arrays of rank `rank` (>= spec.size()):
// iota(mesh size) in the mesh's shape, transposed so the axes used by the spec come first (by
// array dim, then in tuple order) and the unused ones last (in mesh order), reshaped to
// (tiles..., replication).
TileAssignment tile_assignment(const Mesh& mesh, const PartitionSpec& spec, int rank);

// Every device's block of `global`, in mesh order. The shape must fit (see
// Sharding::check_shape).
std::vector<ShardSlot> tile_layout(const Mesh& mesh, const PartitionSpec& spec,
                                   const Shape& global);

}  // namespace spmd
