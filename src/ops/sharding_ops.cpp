// The sharding API on trees and the constraint ops (include/spmd/placement.h):
// with_sharding_constraint, device_put on trees, copy and reshard, with JAX's errors.
#include <spmd/error.h>
#include <spmd/placement.h>

#include "compile/partition.h"
#include "core/array_impl.h"
#include "core/trace.h"
#include "ops/op_util.h"
#include "prims/primitive.h"
#include "prims/sharding.h"
#include "runtime/sharded.h"
#include "sharding/python_repr.h"
#include "sharding/type_sharding.h"

#include <algorithm>
#include <ostream>
#include <string>
#include <vector>

namespace spmd {
namespace placement_detail {

namespace {

// JAX checks a constraint's rank when it is staged, and its divisibility only when the value is
// placed (inside jit an uneven constraint is allowed).
void check_constraint_rank(const Array& x, const Sharding& sharding) {
  const auto* named = dynamic_cast<const NamedSharding*>(&sharding);
  if (!named || named->spec().size() <= x.ndim()) return;
  const std::string api = "[with_sharding_constraint] ";
  try {
    sharding.check_shape(x.shape(), "with_sharding_constraint");
  } catch (const ShardingError& e) {
    throw ValueError(api +
                     "One of with_sharding_constraint arguments is incompatible with its "
                     "sharding annotation " +
                     sharding.repr() + ": " + std::string(e.what()).substr(api.size()));
  }
}

// An UNCONSTRAINED dim places nothing: JAX's device_put fails on it with a KeyError naming it.
void refuse_unconstrained_put(const Sharding* sharding) {
  const auto* named = dynamic_cast<const NamedSharding*>(sharding);
  if (named && named->spec().has_unconstrained())
    throw KeyError("[device_put] UNCONSTRAINED: device_put expects each dim of " +
                   named->spec().repr() +
                   " to be None or mesh axes; UNCONSTRAINED is for with_sharding_constraint");
}

std::string ids_text(const std::vector<Device>& devices) {
  std::string s = "[";
  for (size_t i = 0; i < devices.size(); ++i) s += (i ? ", " : "") + std::to_string(devices[i].id);
  return s + "]";
}

// Eagerly, JAX's with_sharding_constraint is a jit of the identity with the sharding as its
// out_shardings, which refuses an array committed to other devices (device_put moves it).
void check_constraint_devices(const Array& x, const Sharding& sharding) {
  if (!is_concrete(x) || !x.committed() || x.sharding()->device_list() == sharding.device_list())
    return;
  throw ValueError(
      "[with_sharding_constraint] Received incompatible devices for jitted computation. Got "
      "argument x of with_sharding_constraint with shape " +
      aval_of(x).typeof_str() + " and with device ids " + ids_text(x.sharding()->device_list()) +
      " on platform CPU and explicit output sharding with device ids " +
      ids_text(sharding.device_list()) + " on platform CPU");
}

}  // namespace

std::vector<Array> device_put(std::span<const Array> leaves, const TreeDef& def,
                              const ShardingTree& shardings) {
  auto per_leaf = broadcast_shardings(shardings, def, "device_put", "device_put device");
  for (const auto& s : per_leaf) refuse_unconstrained_put(s.get());
  // Inside a trace, one equation for the whole tree, as JAX stages it.
  if (innermost_trace(leaves)) return staged_device_put(leaves, ShardingList{per_leaf, "None", {}});
  std::vector<Array> out(leaves.begin(), leaves.end());
  for (size_t i = 0; i < out.size(); ++i)
    if (per_leaf[i]) out[i] = spmd::device_put(out[i], per_leaf[i]);
  return out;
}

std::vector<Array> with_sharding_constraint(std::span<const Array> leaves, const TreeDef& def,
                                            const ShardingTree& shardings) {
  auto per_leaf = broadcast_shardings(shardings, def, "with_sharding_constraint",
                                      "with_sharding_constraint shardings");
  for (const auto& s : per_leaf)
    if (!s)
      throw ValueError(
          "[with_sharding_constraint] One of with_sharding_constraint arguments got sharding "
          "None which is not allowed. Please only pass `jax.sharding.Sharding` instances.");
  for (size_t i = 0; i < leaves.size(); ++i) {
    check_constraint_rank(leaves[i], *per_leaf[i]);
    check_constraint_devices(leaves[i], *per_leaf[i]);
  }
  std::vector<Array> out;
  for (size_t i = 0; i < leaves.size(); ++i)
    out.push_back(sharding_constraint(leaves[i], per_leaf[i]));
  return out;
}

}  // namespace placement_detail

Array device_put(const Array& x, std::shared_ptr<const Sharding> sharding) {
  ops::require_sharding("device_put", sharding.get());
  placement_detail::refuse_unconstrained_put(sharding.get());
  if (innermost_trace({&x, 1})) {
    runtime::check_devices(sharding->device_list(), "device_put");
    return staged_device_put({&x, 1}, ShardingList{{std::move(sharding)}, "None", {}})[0];
  }
  // To the same devices in another order: the ppermute a jit runs for such an argument. The
  // result's layout is spelled as given (JAX's device_put keeps a spec's trailing Nones).
  if (std::optional<Array> moved = put_in_other_order(x, sharding, "device_put")) {
    const std::shared_ptr<ShardedData>& data = moved->impl()->sharded;
    if (*data->sharding == *sharding) data->sharding = std::move(sharding);
    return *moved;
  }
  return place_concrete(x, std::move(sharding));
}

Array device_put(const Array& x, const Sharding& sharding) {
  if (auto* named = dynamic_cast<const NamedSharding*>(&sharding))
    return device_put(x, std::make_shared<NamedSharding>(*named));
  if (auto* single = dynamic_cast<const SingleDeviceSharding*>(&sharding))
    return device_put(x, std::make_shared<SingleDeviceSharding>(*single));
  throw ShardingError("[device_put] unsupported sharding " + sharding.repr());
}

Array device_put(const Array& x, const Device& device) {
  runtime::check_devices({&device, 1}, "device_put");
  auto sharding = std::make_shared<SingleDeviceSharding>(device);
  if (innermost_trace({&x, 1}))
    return staged_device_put({&x, 1}, ShardingList{{std::move(sharding)}, "None", {true}})[0];
  return place_concrete(x, std::move(sharding));
}

ArrayType type_of(const Array& x) {
  const AbstractValue& t = aval_of(x);
  std::vector<PartitionSpec::Entry> entries;
  if (t.sharding)
    for (const std::vector<std::string>& axes : t.sharding->dims)
      entries.push_back(axes.empty()       ? std::nullopt
                        : axes.size() == 1 ? PartitionSpec::Entry(AxisNames(axes[0]))
                                           : PartitionSpec::Entry(AxisNames(axes, true)));
  while (!entries.empty() && !entries.back()) entries.pop_back();
  // str(jax.typeof(x)) marks a weak type with "~"; error messages (str_short) do not.
  std::string text = t.weak_type ? "~" : "";
  text += t.typeof_str();
  return ArrayType(t.shape, t.dtype, PartitionSpec(std::move(entries)), std::move(text),
                   t.weak_type);
}

std::ostream& operator<<(std::ostream& os, const ArrayType& type) {
  return os << type.str();
}

namespace {

using placement_detail::ids_text;

// JAX's reshard is a jit over the target's mesh, which refuses an array committed to other
// devices (another set, or the same in another order) as any jit does: device_put moves it.
void check_same_devices(const Array& x, const NamedSharding& target) {
  const std::vector<Device>& have = x.sharding()->device_list();
  const std::vector<Device>& want = target.device_list();
  if (!x.committed() || have == want) return;
  throw ValueError(
      "[reshard] Received incompatible devices for jitted computation. Got argument "
      "args[0] of reshard with shape " +
      aval_of(x).typeof_str() + " and with device ids " + ids_text(have) +
      " on platform CPU and jit's context mesh with device ids " + ids_text(want) +
      " on platform CPU");
}

}  // namespace

namespace ops {

void require_explicit_axes(const char* api, const NamedSharding& sharding) {
  // On a mesh with Auto axes (on one without, NamedSharding refuses it), JAX fails on it with
  // a KeyError naming it.
  if (sharding.spec().has_unconstrained())
    throw KeyError(prefix(api) +
                   "UNCONSTRAINED: an out_sharding fixes the split of every dim, "
                   "so each is None or Explicit mesh axes; got " +
                   sharding.spec().repr());
  for (int d = 0; d < sharding.spec().size(); ++d)
    for (const std::string& axis : sharding.spec().axes_of(d)) {
      AxisType type = sharding.mesh().axis_type(axis);
      if (type != AxisType::Explicit)
        throw ValueError(prefix(api) + "PartitionSpec passed to " + api +
                         " cannot contain axis names that are of type Auto or Manual. Got "
                         "PartitionSpec: " +
                         sharding.spec().repr() + " with axis name: " + axis +
                         " of type: AxisType." + axis_type_name(type) + ".");
    }
}

ParamValue out_sharding_value(const char* api, const std::optional<NamedSharding>& sharding,
                              const Shape& shape) {
  if (!sharding) return NoneParam{};
  require_explicit_axes(api, *sharding);
  sharding->check_shape(shape, api);
  std::optional<TypeSharding> t = type_sharding_of(*sharding, shape.ndim());
  if (!t) return NoneParam{};
  return object_param(GivenOutSharding{std::move(*t), sharding->spec().entries().size()});
}

namespace {
// JAX's lax.broadcast_shardings of the types `avals` broadcast to rank `ndim`: per dim, the one
// split of the operands that split it (unsplit operands, also untyped ones, count as None);
// nullopt when no type is on a mesh with Explicit axes.
std::optional<TypeSharding> broadcast_type(const char* api, const std::vector<AbstractValue>& avals,
                                           int ndim) {
  const TypeSharding* typed = nullptr;
  for (const AbstractValue& a : avals)
    if (!typed && has_explicit_axis(a.sharding)) typed = &*a.sharding;
  if (!typed) return std::nullopt;
  TypeSharding out{typed->mesh, std::vector<std::vector<std::string>>(size_t(ndim))};
  for (int d = 0; d < ndim; ++d) {
    for (const AbstractValue& a : avals) {
      const int k = d - (ndim - a.shape.ndim());
      if (k < 0 || !a.sharding || size_t(k) >= a.sharding->dims.size()) continue;
      const std::vector<std::string>& axes = a.sharding->dims[size_t(k)];
      if (axes.empty()) continue;
      if (!out.dims[size_t(d)].empty() && out.dims[size_t(d)] != axes) {
        std::string specs;
        for (const AbstractValue& b : avals)
          specs += (specs.empty() ? "" : ", ") +
                   (b.sharding ? spec_of(*b.sharding, b.sharding->dims.size()).repr() : "P()");
        throw ShardingError(
            prefix(api) +
            "broadcast_shardings got incompatible shardings for broadcasting: " + specs + ".");
      }
      out.dims[size_t(d)] = axes;
    }
  }
  return out;
}
}  // namespace

std::vector<Array> broadcast_arrays(const char* api, const std::vector<Array>& xs) {
  std::vector<Shape> shapes;
  std::vector<AbstractValue> avals;
  for (const Array& x : xs) {
    shapes.push_back(aval_of(x).shape);
    avals.push_back(aval_of(x));
  }
  const Shape target = broadcast_shapes(api, shapes);
  if (std::all_of(shapes.begin(), shapes.end(), [&](const Shape& s) { return s == shapes[0]; }))
    return xs;
  const std::optional<TypeSharding> t = broadcast_type(api, avals, target.ndim());
  std::vector<Array> out;
  for (const Array& x : xs) {
    if (!t || (aval_of(x).shape == target && aval_of(x).sharding == t)) {
      out.push_back(broadcast_to(api, x, target));
      continue;
    }
    std::vector<int64_t> dims;
    for (int i = 0; i < x.ndim(); ++i) dims.push_back(target.ndim() - x.ndim() + i);
    out.push_back(broadcast_in_dim(x, target, dims, t));
  }
  return out;
}

Array with_out_sharding(const Array& out, const std::optional<NamedSharding>& sharding,
                        std::initializer_list<Array> operands) {
  if (!sharding) return out;
  for (const Array& x : operands)
    if (aval_of(x).sharding) return out;
  return reshard(out, *sharding);
}

}  // namespace ops

Array copy(const Array& x) {
  static const Primitive& copy_p = primitive("copy");
  return bind1(copy_p, {x});
}

Array reshard(const Array& x, const Sharding& sharding) {
  const auto* named = dynamic_cast<const NamedSharding*>(&sharding);
  if (!named)
    throw TypeError(
        "[reshard] `out_sharding` argument of reshard only supports instances of "
        "`NamedSharding` or `PartitionSpec`. Got " +
        sharding.repr() + " of type: <class 'jax.sharding." +
        (dynamic_cast<const SingleDeviceSharding*>(&sharding) ? "SingleDeviceSharding"
                                                              : "Sharding") +
        "'>");
  ops::require_explicit_axes("reshard", *named);
  if (is_concrete(x)) check_same_devices(x, *named);
  // Auto mode leaves the layout to the partitioner.
  if (!named->mesh().has_explicit_axes()) return x;
  named->check_shape(x.shape(), "reshard");
  // Traced, JAX's reshard primitive, whose sharding becomes the result's type.
  if (!is_concrete(x))
    return reshard_to(x, *type_sharding_of(*named, x.ndim()), object_param(named->mesh()));
  // The result's sharding is its type's: a spec entry per dim, as JAX prints it.
  std::vector<PartitionSpec::Entry> entries = named->spec().entries();
  entries.resize(size_t(std::max<int>(x.ndim(), int(entries.size()))));
  return spmd::device_put(x, NamedSharding(named->mesh(), PartitionSpec(std::move(entries))));
}

namespace detail {

Mesh with_axis_types(const Mesh& mesh, const std::vector<std::string>& axes, AxisType type,
                     const char* api) {
  for (const std::string& a : axes)
    if (mesh.axis_position(a) < 0)
      throw ShardingError(std::string("[") + api + "] axis name '" + a + "' is not in the mesh: " +
                          python_repr::tuple_of_names(mesh.axis_names()));
  std::vector<AxisType> types = mesh.axis_types();
  for (const std::string& a : mesh.axis_names())
    if (axes.empty() || std::find(axes.begin(), axes.end(), a) != axes.end())
      types[size_t(mesh.axis_position(a))] = type;
  return Mesh(mesh.devices(), mesh.devices_shape(), mesh.axis_names(), types);
}

Array onto_mesh(const Array& x, const Mesh& mesh, const PartitionSpec& spec) {
  auto sharding = std::make_shared<const NamedSharding>(mesh, spec);
  if (is_concrete(x)) return device_put(x, std::move(sharding));
  // Traced, JAX's reshard onto the abstract mesh of `mesh` (whose type an Auto mesh's value
  // carries too, unsplit).
  sharding->check_shape(x.shape(), "reshard");
  TypeSharding dst = unsplit_on(mesh, x.ndim());
  for (int d = 0; d < x.ndim(); ++d) dst.dims[size_t(d)] = spec.axes_of(d);
  return reshard_to(x, std::move(dst), object_param(mesh));
}

PartitionSpec explicit_spec_on(const Array& x, const Mesh& mesh) {
  std::vector<PartitionSpec::Entry> entries;
  const std::optional<TypeSharding>& t = aval_of(x).sharding;
  for (int d = 0; t && d < x.ndim(); ++d) {
    std::vector<std::string> kept;
    for (const std::string& a : t->dims[size_t(d)])
      if (mesh.axis_position(a) >= 0 && mesh.axis_type(a) == AxisType::Explicit) kept.push_back(a);
    entries.push_back(kept.empty()       ? std::nullopt
                      : kept.size() == 1 ? PartitionSpec::Entry(AxisNames(kept[0]))
                                         : PartitionSpec::Entry(AxisNames(kept, true)));
  }
  while (!entries.empty() && !entries.back()) entries.pop_back();
  return PartitionSpec(std::move(entries));
}

namespace {

const NamedSharding* first_named(const ShardingTree& tree) {
  if (tree.is_sharding()) return dynamic_cast<const NamedSharding*>(tree.sharding().get());
  for (const ShardingTree& child : tree.children())
    if (const NamedSharding* named = first_named(child)) return named;
  return nullptr;
}

template <class F>
void for_each_named(const ShardingTree& tree, const F& f) {
  if (const auto* named = dynamic_cast<const NamedSharding*>(tree.sharding().get())) f(*named);
  for (const ShardingTree& child : tree.children()) for_each_named(child, f);
}

}  // namespace

Mesh mesh_of(const ShardingTree& shardings, const char* api) {
  const Mesh context = get_mesh();
  const NamedSharding* named = first_named(shardings);
  if (named)
    for_each_named(shardings, [&](const NamedSharding& other) {
      if (!(other.mesh() == named->mesh()))
        throw ValueError(ops::prefix(api) + "Shardings passed to " + api +
                         " should have the same mesh. Got one mesh " +
                         abstract_mesh_str(unsplit_on(named->mesh(), 0)) + " and another " +
                         other.mesh().str());
    });
  if (named && context.size() > 0 && !(named->mesh() == context))
    throw ValueError(ops::prefix(api) + "Context mesh " +
                     abstract_mesh_str(unsplit_on(context, 0)) +
                     " must match the mesh passed to shardings " +
                     abstract_mesh_str(unsplit_on(named->mesh(), 0)) +
                     ". Recommended approach is to use `jax.set_mesh` context manager.");
  if (context.size() > 0) return context;
  if (!named)
    throw ValueError(ops::prefix(api) +
                     "Context mesh cannot be empty. Please use `jax.set_mesh` API to enter into a "
                     "mesh context when using `" +
                     api + "` API.");
  return named->mesh();
}

std::vector<NamedSharding> reshard_shardings(const ShardingTree& shardings, const TreeDef& def,
                                             const char* api) {
  const size_t n = shardings.children().size(), m = def.children().size();
  // JAX's reshard flattens its prefix against the tuple of values as against positional
  // arguments, with that wording for a tuple of the wrong length.
  if (def.kind() == TreeDef::Kind::tuple && !shardings.is_sharding() && !shardings.is_spec() &&
      !shardings.is_unspecified() && n != m)
    throw ValueError(ops::prefix(api) +
                     "reshard out_shardings specification must be a tree prefix of the "
                     "positional arguments tuple. In particular, reshard out_shardings must "
                     "either be a Sharding, a PartitionSpec, or a tuple of length equal to the "
                     "number of positional arguments. But reshard out_shardings is the wrong "
                     "length: got a tuple or list of length " +
                     std::to_string(n) + " for an args tuple of length " + std::to_string(m) + ".");
  std::vector<NamedSharding> out;
  for (const auto& s : broadcast_shardings(shardings, def, api, "reshard out_shardings")) {
    if (!s)
      throw ValueError(ops::prefix(api) +
                       "Reshard should only be used with out_shardings which are non-None and "
                       "have a non-empty mesh. Got sharding None.");
    const auto* named = dynamic_cast<const NamedSharding*>(s.get());
    if (!named)
      throw TypeError(ops::prefix(api) +
                      "`out_sharding` argument of reshard only supports instances of "
                      "`NamedSharding` or `PartitionSpec`. Got " +
                      s->repr());
    out.push_back(*named);
  }
  return out;
}

}  // namespace detail

Array reshard(const Array& x, const PartitionSpec& spec) {
  const TreeDef leaf = tree_flatten(x).second;
  return reshard(x, detail::reshard_shardings(spec, leaf, "reshard")[0]);
}

}  // namespace spmd
