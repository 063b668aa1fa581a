// Placing arrays on devices: device_put, an array's shards, sharding constraints, and the Array
// forms of the sharding pictures (JAX's jax.device_put, x.addressable_shards,
// jax.lax.with_sharding_constraint, jax.sharding.reshard, jnp.copy,
// jax.debug.visualize_array_sharding).
#pragma once

#include <spmd/array.h>
#include <spmd/device.h>
#include <spmd/sharding.h>
#include <spmd/sharding_tree.h>
#include <spmd/tree.h>

#include <iosfwd>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <vector>

namespace spmd {

// One device's piece of an array (jax.Shard).
struct Shard {
  Device device;
  std::vector<Slice> index;  // the global slice this shard holds, one per dim
  int replica_id = 0;
  Array data;  // the shard's values, on `device`
};

// Places x on a device or lays it out by a sharding; the result is committed. An array already
// laid out that way is returned as it is (no copy).
Array device_put(const Array& x, const Device& device);
Array device_put(const Array& x, const Sharding& sharding);
Array device_put(const Array& x, std::shared_ptr<const Sharding> sharding);

namespace placement_detail {
std::vector<Array> device_put(std::span<const Array> leaves, const TreeDef& def,
                              const ShardingTree& shardings);
std::vector<Array> with_sharding_constraint(std::span<const Array> leaves, const TreeDef& def,
                                            const ShardingTree& shardings);
}  // namespace placement_detail

// jax.device_put on a tree: `shardings` is a prefix of `tree` (see ShardingTree); leaves under an
// unspecified entry are returned as they are. A prefix that does not fit raises JAX's ValueError.
template <class T>
T device_put(const T& tree, const ShardingTree& shardings) {
  auto [leaves, def] = tree_flatten(tree);
  return tree_unflatten<T>(def, placement_detail::device_put(leaves, def, shardings));
}

// Constrains how x (an Array or a tree of them) is laid out (jax.lax.with_sharding_constraint):
// under jit or make_jaxpr a sharding_constraint equation per leaf, which jit's partitioning
// honours; with no trace the leaves are placed as device_put places them (committed results).
// `shardings` is a prefix of the tree; every leaf needs a sharding, a spec may not be longer than
// its leaf's rank, and placed leaves must divide evenly (JAX's errors); a leaf committed to other
// devices than its sharding's raises JAX's "Received incompatible devices" (device_put moves it).
template <class T>
T with_sharding_constraint(const T& x, const ShardingTree& shardings) {
  auto [leaves, def] = tree_flatten(x);
  return tree_unflatten<T>(def, placement_detail::with_sharding_constraint(leaves, def, shardings));
}

// The type of a value (jax.typeof): its shape, dtype and, on a mesh with Explicit axes, its
// sharding over them (Explicit mode: "sharding in types").
class ArrayType {
 public:
  ArrayType(Shape shape, DType dtype, PartitionSpec spec, std::string text, bool weak_type = false)
      : shape_(std::move(shape)),
        dtype_(dtype),
        spec_(std::move(spec)),
        text_(std::move(text)),
        weak_type_(weak_type) {}
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  // Per dim, the Explicit axes splitting it (trailing Nones dropped); P() without a sharding.
  const PartitionSpec& spec() const { return spec_; }
  bool weak_type() const { return weak_type_; }
  // "float32[16@a,16@b]"; a weak type "~float32[4]".
  std::string str() const { return text_; }
  // As repr(jax.typeof(x)): "ShapedArray(float32[4], weak_type=True)" for a weak type.
  std::string repr() const {
    return weak_type_ ? "ShapedArray(" + text_.substr(1) + ", weak_type=True)"
                      : "ShapedArray(" + text_ + ")";
  }

 private:
  Shape shape_;
  DType dtype_;
  PartitionSpec spec_;
  std::string text_;
  bool weak_type_ = false;
};
std::ostream& operator<<(std::ostream& os, const ArrayType& type);

// jax.typeof(x): an Array or a traced value.
ArrayType type_of(const Array& x);
#ifdef __STRICT_ANSI__
// JAX's spelling. GNU dialects (-std=gnu++20, CMake's default unless CXX_EXTENSIONS is off)
// reserve `typeof` as a keyword, so there only type_of exists.
inline ArrayType typeof(const Array& x) {
  return type_of(x);
}
#endif

// A copy of x (jnp.copy): binds the `copy` primitive.
Array copy(const Array& x);

// jax.sharding.reshard: x laid out by a NamedSharding whose spec names only Explicit axes (else
// JAX's ValueError naming the axis and its type); its type then carries that sharding (traced:
// JAX's `reshard` equation). On a mesh without Explicit axes (P() only) x is returned as it is,
// as JAX's Auto mode leaves the layout to the partitioner. Other shardings raise TypeError. A
// concrete x committed to other devices than the sharding's (another set or order) raises JAX's
// "Received incompatible devices" ValueError, as JAX's jit over the target mesh does;
// device_put moves it. A PartitionSpec is over the mesh in context (sp::use_mesh); without one
// it raises JAX's ValueError.
Array reshard(const Array& x, const Sharding& sharding);
Array reshard(const Array& x, const PartitionSpec& spec);

namespace detail {
// `mesh` with the axes `axes` (every axis when empty) of type `type`; ShardingError "[api] ..."
// for an axis the mesh lacks.
Mesh with_axis_types(const Mesh& mesh, const std::vector<std::string>& axes, AxisType type,
                     const char* api);
// x laid out on `mesh` (the devices of its own mesh, other axis types) split as `spec`:
// placed when concrete, resharded when traced (JAX's reshard onto `mesh`). Its type then has
// its split over the axes Explicit on `mesh`.
Array onto_mesh(const Array& x, const Mesh& mesh, const PartitionSpec& spec);
// The axes of x's type sharding that are Explicit on `mesh`, as a spec.
PartitionSpec explicit_spec_on(const Array& x, const Mesh& mesh);
// The mesh auto_axes and explicit_axes work on, as JAX chooses it: the mesh in context, else that
// of the NamedShardings of `shardings` (which must agree with it and with each other: JAX's
// ValueErrors); ValueError "[api] ..." when there is neither.
Mesh mesh_of(const ShardingTree& shardings, const char* api);
// The sharding of each leaf of a value with tree `def`, from the prefix `shardings`, as
// jax.sharding.reshard reads its out_shardings: JAX's ValueErrors for a prefix that does not
// fit or a leaf without a sharding, and TypeError for one that is not a NamedSharding.
std::vector<NamedSharding> reshard_shardings(const ShardingTree& shardings, const TreeDef& def,
                                             const char* api);
}  // namespace detail

// jax.sharding.auto_axes: f run with the mesh axes `axes` (all of out_sharding's mesh when
// empty) made Auto, the Array leaves of its arguments (Arrays or trees of them) keeping their
// split over the axes still Explicit (so f's ops need not agree on the others); the leaves of
// its result are then resharded to out_sharding, a tree prefix of the result (one
// NamedSharding covers all). The mesh is the one in context, else out_sharding's; f runs with
// the inner mesh in context. Traced, the moves are JAX's reshard equations; when the axes are
// Auto already, f runs as it is.
template <class F>
auto auto_axes(F f, std::vector<std::string> axes, ShardingTree out_sharding) {
  return [f = std::move(f), axes = std::move(axes),
          out = std::move(out_sharding)](const auto&... args) {
    const Mesh outer = detail::mesh_of(out, "auto_axes");
    const Mesh inner = detail::with_axis_types(outer, axes, AxisType::Auto, "auto_axes");
    // Axes already Auto: f as it is, as JAX's.
    if (inner == outer) return f(args...);
    auto onto_inner = [&](const Array& x) {
      return detail::onto_mesh(x, inner, detail::explicit_spec_on(x, inner));
    };
    auto result = [&] {
      MeshScope scope(inner);
      return f(tree_map(onto_inner, args)...);
    }();
    auto [leaves, def] = tree_flatten(result);
    const std::vector<NamedSharding> shardings = detail::reshard_shardings(out, def, "auto_axes");
    for (size_t i = 0; i < leaves.size(); ++i) leaves[i] = reshard(leaves[i], shardings[i]);
    return tree_unflatten<decltype(result)>(def, leaves);
  };
}

// jax.sharding.explicit_axes: f run with the mesh axes `axes` (all of in_sharding's mesh when
// empty) made Explicit and the Array leaves of its arguments split as in_sharding says (a tree
// prefix of the tuple of arguments; one NamedSharding covers all), so that their types carry
// it; the leaves of the result go back to in_sharding's mesh with their split over the axes
// Explicit there. The mesh is the one in context, else in_sharding's; f runs with the inner
// mesh in context.
template <class F>
auto explicit_axes(F f, std::vector<std::string> axes, ShardingTree in_sharding) {
  return [f = std::move(f), axes = std::move(axes),
          in = std::move(in_sharding)](const auto&... args) {
    const Mesh outer = detail::mesh_of(in, "explicit_axes");
    const Mesh inner = detail::with_axis_types(outer, axes, AxisType::Explicit, "explicit_axes");
    auto all = std::make_tuple(args...);
    auto [leaves, def] = tree_flatten(all);
    const std::vector<NamedSharding> shardings =
        detail::reshard_shardings(in, def, "explicit_axes");
    for (size_t i = 0; i < leaves.size(); ++i)
      leaves[i] = detail::onto_mesh(leaves[i], inner, shardings[i].spec());
    auto out = [&] {
      MeshScope scope(inner);
      return std::apply(f, tree_unflatten<decltype(all)>(def, leaves));
    }();
    return tree_map(
        [&](const Array& o) {
          return detail::onto_mesh(o, outer, detail::explicit_spec_on(o, outer));
        },
        out);
  };
}

// The whole value of x as an uncommitted array, as jax.device_get brings it to the host: it moves
// freely into any computation. Gathering a sharded array is counted as a device-to-host copy.
Array device_get(const Array& x);

// The sharding picture of an array (rank 1 or 2; `opts.dims` picks two dims of a higher rank).
std::string sharding_to_string(const Array& x, const VisualizeOptions& opts = {});
void visualize_array_sharding(const Array& x, const VisualizeOptions& opts = {});

}  // namespace spmd
