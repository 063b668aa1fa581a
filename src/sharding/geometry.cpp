// JAX's iota tile assignment: device → block and replica id for a NamedSharding.
#include "sharding/geometry.h"

namespace spmd {

TileAssignment tile_assignment(const Mesh& mesh, const PartitionSpec& spec, int rank) {
  const Shape& mesh_shape = mesh.devices_shape();
  TileAssignment ta;
  ta.tiles.assign(size_t(rank), 1);
  std::vector<int> perm;
  std::vector<bool> used(size_t(mesh_shape.ndim()), false);
  for (int d = 0; d < rank; ++d) {
    for (const std::string& name : spec.axes_of(d)) {
      int pos = mesh.axis_position(name);
      perm.push_back(pos);
      used[size_t(pos)] = true;
      ta.tiles[size_t(d)] *= mesh_shape[pos];
    }
  }
  for (int a = 0; a < mesh_shape.ndim(); ++a) {
    if (used[size_t(a)]) continue;
    perm.push_back(a);
    ta.replication *= mesh_shape[a];
  }
  // Walk the transposed iota row-major; each entry is the mesh position it came from.
  std::vector<int64_t> strides = mesh_shape.strides();
  std::vector<int64_t> counter(perm.size(), 0);
  for (int64_t k = 0; k < mesh.size(); ++k) {
    int64_t pos = 0;
    for (size_t j = 0; j < perm.size(); ++j) pos += counter[j] * strides[size_t(perm[j])];
    ta.positions.push_back(pos);
    for (int j = int(perm.size()) - 1; j >= 0; --j) {
      if (++counter[size_t(j)] < mesh_shape[perm[size_t(j)]]) break;
      counter[size_t(j)] = 0;
    }
  }
  return ta;
}

std::vector<ShardSlot> tile_layout(const Mesh& mesh, const PartitionSpec& spec,
                                   const Shape& global) {
  const int rank = global.ndim();
  TileAssignment ta = tile_assignment(mesh, spec, rank);
  std::vector<ShardSlot> slots(size_t(mesh.size()));
  for (size_t k = 0; k < ta.positions.size(); ++k) {
    ShardSlot& slot = slots[size_t(ta.positions[k])];
    slot.device = mesh.devices()[size_t(ta.positions[k])];
    slot.replica_id = int(int64_t(k) % ta.replication);
    slot.index.resize(size_t(rank));
    int64_t tile = int64_t(k) / ta.replication;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t n = ta.tiles[size_t(d)], block = tile % n, size = global[d] / n;
      tile /= n;
      slot.index[size_t(d)] = Slice{block * size, (block + 1) * size};
    }
  }
  return slots;
}

}  // namespace spmd
