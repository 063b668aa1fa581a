// A tree prefix of shardings (the shardings argument of jax.lax.with_sharding_constraint and
// jax.device_put, jit's in_shardings and out_shardings), and its broadcast over a value's tree.
// Sharding is only declared here so that transforms.h, which sharding.h includes, can hold one.
#pragma once

#include <spmd/tree.h>

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace spmd {

class Sharding;
class NamedSharding;
class SingleDeviceSharding;
class PartitionSpec;

// A Sharding applies to every leaf below it; a braced list has one entry per element of a tuple,
// pair, vector or array, per field of a record (in declaration order) or per key of a map (in
// sorted order), nested as deep as the value: {s_x, {s_rep, s_y}}. A default-constructed tree
// (also `{}` inside a list) is unspecified, JAX's None. A PartitionSpec stands for
// NamedSharding(mesh, spec) over the mesh in context when the tree is read (sp::use_mesh).
class ShardingTree {
 public:
  ShardingTree() = default;
  ShardingTree(const NamedSharding& sharding);
  ShardingTree(const SingleDeviceSharding& sharding);
  ShardingTree(std::shared_ptr<const Sharding> sharding);
  ShardingTree(const PartitionSpec& spec);
  ShardingTree(std::initializer_list<ShardingTree> children);
  ShardingTree(std::vector<ShardingTree> children);

  bool is_unspecified() const { return !sharding_ && !spec_ && !has_children_; }
  // A single sharding, not a list.
  bool is_sharding() const { return sharding_ != nullptr; }
  const std::shared_ptr<const Sharding>& sharding() const { return sharding_; }
  // A single PartitionSpec, not a list.
  bool is_spec() const { return spec_ != nullptr; }
  const std::shared_ptr<const PartitionSpec>& spec() const { return spec_; }
  const std::vector<ShardingTree>& children() const { return children_; }
  // The deepest a tree may nest lists; deeper ones raise ValueError where they are built.
  static constexpr int kMaxDepth = 1000;

 private:
  std::shared_ptr<const Sharding> sharding_;
  std::shared_ptr<const PartitionSpec> spec_;
  std::vector<ShardingTree> children_;
  bool has_children_ = false;
  int depth_ = 0;  // levels of lists below this node
};

// The sharding of every Array leaf of `value`, in flattening order; null where the prefix is
// unspecified. `what` names the prefix in JAX's errors ("with_sharding_constraint shardings",
// "device_put device"); a prefix that does not match `value` raises ValueError "[<api>] <what>
// specification must be a tree prefix of the corresponding value; ...". A PartitionSpec with no
// mesh in context raises the error JAX's <api> raises for it.
std::vector<std::shared_ptr<const Sharding>> broadcast_shardings(const ShardingTree& shardings,
                                                                 const TreeDef& value,
                                                                 const std::string& api,
                                                                 const std::string& what);

// JAX's check of jit's in_shardings and out_shardings (`arg_name`): a leaf whose spec has a
// P::UNCONSTRAINED dim raises ValueError "[<api>] Unconstrained dims are not allowed when passed
// to <arg_name>: <the sharding or spec>".
void refuse_unconstrained(const ShardingTree& shardings, const std::string& api,
                          const std::string& arg_name);

}  // namespace spmd
