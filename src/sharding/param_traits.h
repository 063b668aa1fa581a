// Meshes, partition specs and shardings as primitive parameters (shard_map's mesh, in_specs and
// out_specs; sharding_constraint's sharding, context_mesh and unconstrained_dims): printed as JAX
// prints them in a jaxpr, hashed by content.
#pragma once

#include <spmd/sharding.h>

#include "ir/params.h"

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace spmd {

size_t hash_mesh(const Mesh& mesh);
size_t hash_spec(const PartitionSpec& spec);

template <>
struct ParamTraits<Mesh> {
  static constexpr std::string_view name = "Mesh";
  // An empty mesh (no mesh in context) prints as JAX's Mesh().
  static std::string str(const Mesh& mesh) { return mesh.size() ? mesh.str() : "Mesh()"; }
  static size_t hash(const Mesh& mesh) { return hash_mesh(mesh); }
};

// One spec per operand or result: (P('x',), P()).
template <>
struct ParamTraits<std::vector<PartitionSpec>> {
  static constexpr std::string_view name = "PartitionSpec list";
  static std::string str(const std::vector<PartitionSpec>& specs);
  static size_t hash(const std::vector<PartitionSpec>& specs);
};

// A sharding, printed as its repr. Equal when it puts blocks on the same devices in the same
// order and prints the same, so that equal shardings made apart share cached programs.
template <>
struct ParamTraits<std::shared_ptr<const Sharding>> {
  static constexpr std::string_view name = "Sharding";
  static std::string str(const std::shared_ptr<const Sharding>& sharding) {
    return sharding->repr();
  }
  static size_t hash(const std::shared_ptr<const Sharding>& sharding);
  static bool equal(const std::shared_ptr<const Sharding>& a,
                    const std::shared_ptr<const Sharding>& b) {
    return a == b || (a->device_list() == b->device_list() && a->repr() == b->repr());
  }
};

// Per operand or result of an equation, a sharding or none: jit's in_shardings and
// out_shardings, device_put's devices and srcs. None prints as `absent` ("UnspecifiedValue" in
// jit's params, "None" in device_put's); a device_put target given as a Device prints as JAX
// prints the device (CpuDevice(id=1)).
struct ShardingList {
  std::vector<std::shared_ptr<const Sharding>> items;
  std::string absent = "UnspecifiedValue";
  std::vector<bool> as_device;  // empty, or per item: written as a Device

  bool any() const;
};

template <>
struct ParamTraits<ShardingList> {
  static constexpr std::string_view name = "Sharding list";
  static std::string str(const ShardingList& list);
  static size_t hash(const ShardingList& list);
  static bool equal(const ShardingList& a, const ShardingList& b);
};

// A set of dims, printed as JAX prints a frozenset param: frozenset({0, 2}).
template <>
struct ParamTraits<std::set<int64_t>> {
  static constexpr std::string_view name = "frozenset of dims";
  static std::string str(const std::set<int64_t>& dims);
  static size_t hash(const std::set<int64_t>& dims);
};

}  // namespace spmd
