// Explicit SPMD: shard_map (a function applied to each device's block of its arguments, with
// collectives between the blocks) and pmap (a map over a leading axis whose instances run on
// separate devices), as JAX's jax.shard_map and jax.pmap.
#pragma once

#include <spmd/array.h>
#include <spmd/error.h>
#include <spmd/sharding.h>
#include <spmd/transforms.h>
#include <spmd/tree.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace spmd {

// in_specs / out_specs: a tree prefix of the arguments (of the result), as JAX takes them. A
// PartitionSpec applies to every leaf below it; a braced list has one entry per element of a
// tuple, pair, vector or array, per field of a record (in declaration order) or per key of a map
// (in sorted order), nested as deep as the value: {P("x"), {P(), P("y")}}. The arguments form a
// tuple, so in_specs is one spec for all of them or a list with one entry per argument.
class SpecTree {
 public:
  SpecTree(PartitionSpec spec) : spec_(std::move(spec)) {}
  SpecTree(std::initializer_list<SpecTree> children) : children_(children) {}
  SpecTree(std::vector<SpecTree> children) : children_(std::move(children)) {}
  SpecTree(const std::vector<PartitionSpec>& specs) : children_(specs.begin(), specs.end()) {}
  // A single spec, not a list.
  bool is_spec() const { return spec_.has_value(); }
  const PartitionSpec& spec() const { return *spec_; }
  const std::vector<SpecTree>& children() const { return children_; }

 private:
  std::optional<PartitionSpec> spec_;
  std::vector<SpecTree> children_;
};

struct ShardMapOptions {
  // Track which mesh axes each value varies over and reject out_specs that claim replication
  // the body does not guarantee (JAX's check_vma, formerly check_rep).
  bool check_vma = true;
  // The function's name in error messages and jaxprs.
  std::string name = "<lambda>";
};

struct PmapOptions {
  // Name for collectives over the mapped axis; empty: the axis has no usable name.
  std::string axis_name = {};
  std::vector<Axis> in_axes = {0};
  std::vector<Axis> out_axes = {0};
  // Devices to run on, one per instance; empty: the first `size` devices.
  std::vector<Device> devices = {};
  // Positional arguments passed whole to every instance (in_axes None for their leaves).
  std::vector<int> static_broadcasted_argnums = {};
  std::string name = "<lambda>";
};

namespace transform_detail {

// Traced bodies by input signature, kept by a shard_map object across calls.
struct ShardMapCache;
std::shared_ptr<ShardMapCache> new_shard_map_cache();

struct ShardMapCall {
  Mesh mesh;
  SpecTree in_specs;   // a prefix of *in_def, or without in_def one spec per leaf
  SpecTree out_specs;  // a prefix of the result's tree, or without it one spec per result
  ShardMapOptions options;
  std::shared_ptr<ShardMapCache> cache = nullptr;  // null: trace on every call
  const TreeDef* in_def = nullptr;                 // the arguments' structure (cache key)
};
std::vector<Array> shard_map(const FlatFn& fn, std::span<const Array> leaves,
                             const ShardMapCall& call, const std::shared_ptr<TreeDef>& out_def);

struct PmapCall {
  std::vector<std::optional<int>> in_dims;  // per leaf
  PmapOptions options;
};
// pmap runs as a cached call named _fun (JAX's jit of the mapped shard_map); `make_fn` builds
// the flat user function on a cache miss and records its result structure.
std::vector<Array> pmap(JitState& state, const TreeDef& in_def, std::span<const Array> leaves,
                        const std::function<FlatFn(std::shared_ptr<TreeDef>)>& make_fn,
                        const PmapCall& call, TreeDef* out_def);

}  // namespace transform_detail

template <class F>
auto shard_map(F f, Mesh mesh, SpecTree in_specs, SpecTree out_specs,
               ShardMapOptions options = {}) {
  check_callable(f, "shard_map");
  auto cache = transform_detail::new_shard_map_cache();
  return [f, mesh, in_specs, out_specs, options, cache](const auto&... args) {
    using R = std::decay_t<std::invoke_result_t<const F&, const decltype(args)&...>>;
    auto [leaves, def] = tree_flatten(std::make_tuple(args...));
    auto out_def = std::make_shared<TreeDef>();
    auto fn = transform_detail::flatten_fn<F, std::decay_t<decltype(args)>...>(f, def, out_def);
    transform_detail::ShardMapCall call{mesh, in_specs, out_specs, options, cache, &def};
    std::vector<Array> outs = transform_detail::shard_map(fn, leaves, call, out_def);
    return tree_unflatten<R>(*out_def, outs);
  };
}

template <class F>
auto pmap(F f, PmapOptions options = {}) {
  check_callable(f, "pmap");
  auto state = transform_detail::new_pmap_state();
  return [f, options, state](const auto&... args) {
    using R = std::decay_t<std::invoke_result_t<const F&, const decltype(args)&...>>;
    constexpr size_t n = sizeof...(args);
    if (options.in_axes.size() != 1 && options.in_axes.size() != n)
      throw ValueError(
          "[pmap] " +
          tuple_prefix_length_error("pmap in_axes", "pmap in_axes[0]", options.in_axes.size(), n) +
          "\n\nThe 'full pytree' here is the tuple of arguments passed positionally to the "
          "pmapped function, and the value of `in_axes` must be a tree prefix of that tuple. But "
          "it was not a prefix.\n\nCheck that the value of the `in_axes` argument to `pmap` is a "
          "tree prefix of the tuple of arguments passed positionally to the pmapped function.");
    std::vector<std::optional<int>> dims;
    int i = 0;
    auto add = [&](const auto& arg) {
      std::optional<int> d = options.in_axes[options.in_axes.size() == 1 ? 0 : size_t(i)].dim;
      for (int s : options.static_broadcasted_argnums)
        if (s == i) d = std::nullopt;
      for (size_t k = 0, m = tree_leaves(arg).size(); k < m; ++k) dims.push_back(d);
      ++i;
    };
    (add(args), ...);
    auto [leaves, def] = tree_flatten(std::make_tuple(args...));
    auto make_fn = [&](std::shared_ptr<TreeDef> out_def) {
      return transform_detail::flatten_fn<F, std::decay_t<decltype(args)>...>(f, def, out_def);
    };
    transform_detail::PmapCall call{std::move(dims), options};
    TreeDef out_def;
    std::vector<Array> outs = transform_detail::pmap(*state, def, leaves, make_fn, call, &out_def);
    return tree_unflatten<R>(out_def, outs);
  };
}

}  // namespace spmd
