// Meshes and partition specs as primitive parameters (shard_map's mesh, in_specs and out_specs):
// printed as JAX prints them in a jaxpr, compared and hashed by content.
#pragma once

#include <spmd/sharding.h>

#include "ir/params.h"

#include <string>
#include <string_view>
#include <vector>

namespace spmd {

size_t hash_mesh(const Mesh& mesh);
size_t hash_spec(const PartitionSpec& spec);

template <>
struct ParamTraits<Mesh> {
  static constexpr std::string_view name = "Mesh";
  static std::string str(const Mesh& mesh) { return mesh.str(); }
  static size_t hash(const Mesh& mesh) { return hash_mesh(mesh); }
};

// One spec per operand or result: (P('x',), P()).
template <>
struct ParamTraits<std::vector<PartitionSpec>> {
  static constexpr std::string_view name = "PartitionSpec list";
  static std::string str(const std::vector<PartitionSpec>& specs);
  static size_t hash(const std::vector<PartitionSpec>& specs);
};

}  // namespace spmd
