// ShardingTree and its broadcast over a value's tree (include/spmd/sharding_tree.h), with the
// structure errors of JAX's flatten_axes.
#include <spmd/sharding_tree.h>

#include <spmd/error.h>
#include <spmd/sharding.h>

#include "sharding/context_mesh.h"

#include <algorithm>
#include <string>
#include <utility>

namespace spmd {

ShardingTree::ShardingTree(const NamedSharding& sharding)
    : sharding_(std::make_shared<NamedSharding>(sharding)) {}
ShardingTree::ShardingTree(const SingleDeviceSharding& sharding)
    : sharding_(std::make_shared<SingleDeviceSharding>(sharding)) {}
ShardingTree::ShardingTree(std::shared_ptr<const Sharding> sharding)
    : sharding_(std::move(sharding)) {}
ShardingTree::ShardingTree(const PartitionSpec& spec)
    : spec_(std::make_shared<PartitionSpec>(spec)) {}
ShardingTree::ShardingTree(std::initializer_list<ShardingTree> children)
    : ShardingTree(std::vector<ShardingTree>(children)) {}
ShardingTree::ShardingTree(std::vector<ShardingTree> children)
    : children_(std::move(children)), has_children_(true) {
  for (const ShardingTree& c : children_) depth_ = std::max(depth_, c.depth_ + 1);
  // Copying, reading and destroying a tree recurse once per level; Python stops at its
  // recursion limit of 1000 where JAX would.
  if (depth_ > kMaxDepth)
    throw ValueError("[ShardingTree] expected a tree nested at most " + std::to_string(kMaxDepth) +
                     " levels deep, got " + std::to_string(depth_) + " levels");
}

namespace {

// The node's type as JAX's prefix errors name it for a length mismatch.
std::string kind_name(const TreeDef& t) {
  switch (t.kind()) {
    case TreeDef::Kind::list:
      return "list";
    case TreeDef::Kind::tuple:
      return "tuple";
    case TreeDef::Kind::dict:
      return "dict";
    case TreeDef::Kind::ordered_dict:
      return "OrderedDict";
    case TreeDef::Kind::record:
      return t.name();
    case TreeDef::Kind::none:
      return "NoneType";
    default:
      return "jax._src.api_util.PytreeLeaf";
  }
}

struct Broadcast {
  const std::string& api;
  const std::string& what;
  std::vector<std::shared_ptr<const Sharding>> out;

  // JAX's message: `headline` names the difference, `tail` follows "has a subtree of type".
  [[noreturn]] void mismatch(const std::string& key, const std::string& headline,
                             const std::string& tail) const {
    throw ValueError("[" + api + "] " + what +
                     " specification must be a tree prefix of the corresponding value; \n"
                     "  Mismatch details (1 found):\n  pytree structure error: " +
                     headline + " at key path\n    " + what + key +
                     "\nAt that key path, the prefix pytree " + what + " has a subtree of type" +
                     tail);
  }

  void add(const ShardingTree& prefix, const TreeDef& value, const std::string& key) {
    if (prefix.is_unspecified()) return fill(nullptr, value);
    if (prefix.is_sharding()) return fill(prefix.sharding(), value);
    if (prefix.is_spec())
      return fill(std::make_shared<NamedSharding>(over_context_mesh(*prefix.spec(), api, what)),
                  value);
    const std::string kind = kind_name(value);
    if (!value.is_container())
      mismatch(key, "different types",
               "\n    <class 'tuple'>\nbut at the same key path the full pytree has a subtree of "
               "different type\n    <class '" +
                   kind + "'>.");
    std::vector<TreeDef> children = value.children();
    if (children.size() != prefix.children().size())
      mismatch(key, "different lengths of " + kind,
               " " + kind + " of length " + std::to_string(prefix.children().size()) +
                   ", but the full pytree has a subtree of the same type but of length " +
                   std::to_string(children.size()) + ".");
    for (size_t i = 0; i < children.size(); ++i)
      add(prefix.children()[i], children[i], key + value.child_key(i));
  }

  // One entry per Array leaf of `value`.
  void fill(const std::shared_ptr<const Sharding>& sharding, const TreeDef& value) {
    out.insert(out.end(), size_t(value.num_leaves()), sharding);
  }
};

}  // namespace

std::vector<std::shared_ptr<const Sharding>> broadcast_shardings(const ShardingTree& shardings,
                                                                 const TreeDef& value,
                                                                 const std::string& api,
                                                                 const std::string& what) {
  Broadcast b{api, what, {}};
  b.add(shardings, value, "");
  return std::move(b.out);
}

void refuse_unconstrained(const ShardingTree& shardings, const std::string& api,
                          const std::string& arg_name) {
  auto refuse = [&](const std::string& what) {
    throw ValueError("[" + api + "] Unconstrained dims are not allowed when passed to " + arg_name +
                     ": " + what);
  };
  if (shardings.is_spec() && shardings.spec()->has_unconstrained())
    refuse(shardings.spec()->repr());
  if (shardings.is_sharding())
    if (auto* named = dynamic_cast<const NamedSharding*>(shardings.sharding().get()))
      if (named->spec().has_unconstrained()) refuse(named->repr());
  for (const ShardingTree& child : shardings.children()) refuse_unconstrained(child, api, arg_name);
}

}  // namespace spmd
