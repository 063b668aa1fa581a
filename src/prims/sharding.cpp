// Primitive family: sharding_constraint, JAX's with_sharding_constraint, device_put staged
// into a trace, and reshard, JAX's reshard_p (Explicit mode: the value moved to the sharding its
// result's type names). The values are unchanged. The constraint says how a value is laid out over
// devices: staged programs keep it for propagation and the partitioner, and with no trace the
// value is placed at once, as device_put places it. A staged device_put, as in JAX 0.10, asks for
// its mesh's devices but leaves the layout to propagation on Auto axes; on Explicit axes it sets
// its results' types.
#include "prims/sharding.h"

#include <spmd/error.h>
#include <spmd/placement.h>

#include "backends/cpu/copy.h"
#include "core/trace.h"
#include "prims/families.h"
#include "prims/primitive.h"
#include "prims/rule_util.h"
#include "sharding/param_traits.h"
#include "sharding/python_repr.h"
#include "sharding/type_sharding.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace spmd {

namespace {

const Primitive& sharding_constraint_p() {
  static const Primitive& p = primitive("sharding_constraint");
  return p;
}

using ShardingPtr = std::shared_ptr<const Sharding>;

// The dims a NamedSharding's spec leaves UNCONSTRAINED (JAX's get_unconstrained_dims).
std::set<int64_t> unconstrained_dims_of(const Sharding& sharding) {
  std::set<int64_t> dims;
  if (auto* named = dynamic_cast<const NamedSharding*>(&sharding))
    for (int d = 0; d < named->spec().size(); ++d)
      if (named->spec().is_unconstrained(d)) dims.insert(d);
  return dims;
}

Params constraint_params(ShardingPtr sharding) {
  std::set<int64_t> unconstrained = unconstrained_dims_of(*sharding);
  // spmd has no mesh context (jax.set_mesh), so the context mesh is always the empty one.
  return Params{{"context_mesh", object_param(Mesh())},
                {"layout", NoneParam{}},
                {"sharding", object_param(std::move(sharding))},
                {"unconstrained_dims", object_param(std::move(unconstrained))}};
}

Array constrain_as(const Array& x, const Params& params) {
  return sharding_constraint(x, params.get_object<ShardingPtr>("sharding"));
}

// The value's type is its operand's, with the constraint's sharding over Explicit axes (an
// operand typed without one, such as an Auto value resharded onto an Explicit mesh, takes it
// here; for a typed operand infer_type_shardings decides the same).
std::vector<AbstractValue> identity_rule(std::span<const AbstractValue> in, const Params& p) {
  if (in.size() != 1)
    throw TypeError("[sharding_constraint] expected 1 operand, got " + std::to_string(in.size()));
  AbstractValue out = in[0];
  if (auto* named = dynamic_cast<const NamedSharding*>(p.get_object<ShardingPtr>("sharding").get()))
    out.sharding = type_sharding_of(*named, out.shape.ndim());
  return {out};
}

void copy_kernel(const KernelArgs& a) {
  cpu::copy(a.in[0].data, a.out[0].data, a.out[0].aval->size(), itemsize(a.out[0].aval->dtype));
}

void copy_all_kernel(const KernelArgs& a) {
  for (size_t i = 0; i < a.out.size(); ++i)
    cpu::copy(a.in[i].data, a.out[i].data, a.out[i].aval->size(), itemsize(a.out[i].aval->dtype));
}

// Once its operands have the split the equation needs, the values are the operands themselves.
LocalEquation pass_on(const Params&, std::span<const AbstractValue>,
                      std::span<const AbstractValue>) {
  return LocalEquation{nullptr, {}};
}

// JAX's jvp: the tangent gets the same constraint.
JvpResult constraint_jvp(std::span<const Array> x, std::span<const Array> t, const Params& p) {
  return JvpResult{{constrain_as(x[0], p)}, {constrain_as(t[0], p)}};
}

// JAX's transpose: the constraint on the cotangent. A constraint that moved a typed value onto
// a mesh of other axis types over the same devices (auto_axes) sends the cotangent back to its
// operand's mesh and type, as the transpose of JAX's reshard, which auto_axes binds, does.
std::vector<Array> constraint_transpose(std::span<const Array> ct, std::span<const LinearInput> in,
                                        const Params& p) {
  if (is_zero(ct[0])) return {Array()};
  const auto* named = dynamic_cast<const NamedSharding*>(p.get_object<ShardingPtr>("sharding").get());
  const std::optional<TypeSharding>& from = in[0].aval.sharding;
  if (!named || !from || unsplit_on(named->mesh(), 0).mesh == from->mesh)
    return {constrain_as(ct[0], p)};
  auto back = std::make_shared<const NamedSharding>(mesh_of_type(named->mesh(), *from),
                                                    spec_of(*from, from->dims.size()));
  return {sharding_constraint(ct[0], std::move(back))};
}

// JAX's _sharding_constraint_batcher: a NamedSharding's spec with its dims from `d` on shifted
// one up, and at the batch dim `d` vmap's spmd_axis_name, or without one UNCONSTRAINED, which
// propagation then splits as it likes; the spec may not name the spmd_axis_name's axes. As
// JAX's spec is stored without trailing Nones and padded to the operand's rank when a dim is
// open, it is so here.
BatchResult constraint_batch(std::span<const Array> args, std::span<const int> dims,
                             const Params& p, const BatchContext& ctx) {
  const int d = dims[0];
  ShardingPtr sharding = p.get_object<ShardingPtr>("sharding");
  if (const auto* named = dynamic_cast<const NamedSharding*>(sharding.get())) {
    const PartitionSpec& spec = named->spec();
    if (names_spmd_axis(spec, ctx))
      throw ValueError("[with_sharding_constraint] vmap spmd_axis_name " +
                       python_repr::tuple_of_names(ctx.spmd_axis_name) +
                       " cannot appear in with_sharding_constraint spec, but got spec " +
                       spec.repr());
    std::vector<PartitionSpec::Entry> entries = spec.entries();
    std::vector<bool> open = spec.unconstrained();
    open.resize(entries.size());
    while (!entries.empty() && !entries.back() && !open.back()) {
      entries.pop_back();
      open.pop_back();
    }
    if (entries.size() < size_t(d)) entries.resize(size_t(d));
    open.resize(entries.size());
    entries.insert(entries.begin() + d, batch_spec(P(), 0, ctx)[0]);
    open.insert(open.begin() + d, ctx.spmd_axis_name.empty());
    if (std::find(open.begin(), open.end(), true) != open.end()) {
      entries.resize(size_t(args[0].ndim()));
      open.resize(entries.size());
    }
    sharding = std::make_shared<NamedSharding>(named->mesh(),
                                               PartitionSpec(std::move(entries), std::move(open)));
  }
  return result_at(sharding_constraint(args[0], std::move(sharding)), d);
}

}  // namespace

namespace {

// Where a constraint places x outside a trace: its open dims keep the split of a committed x on
// the constraint's mesh where their axes are free of the fixed dims, as jit's propagation gives
// them when JAX applies the primitive; otherwise they are unsplit. The spec has no trailing
// Nones, as the result's of JAX's jit.
ShardingPtr placed_sharding(const Array& x, ShardingPtr sharding) {
  const auto* named = dynamic_cast<const NamedSharding*>(sharding.get());
  if (!named || !named->spec().has_unconstrained()) return sharding;
  const PartitionSpec& spec = named->spec();
  std::vector<PartitionSpec::Entry> entries = spec.entries();
  const auto* held =
      x.committed() ? dynamic_cast<const NamedSharding*>(x.sharding().get()) : nullptr;
  if (held && held->mesh() == named->mesh()) {
    std::set<std::string> used;
    for (int d = 0; d < spec.size(); ++d)
      for (const std::string& a : spec.axes_of(d)) used.insert(a);
    for (int d = 0; d < spec.size(); ++d) {
      if (!spec.is_unconstrained(d)) continue;
      const std::vector<std::string> axes = held->spec().axes_of(d);
      if (std::any_of(axes.begin(), axes.end(),
                      [&](const std::string& a) { return used.count(a); }))
        continue;
      entries[size_t(d)] = held->spec()[d];
      used.insert(axes.begin(), axes.end());
    }
  }
  while (!entries.empty() && !entries.back()) entries.pop_back();
  return std::make_shared<NamedSharding>(named->mesh(), PartitionSpec(std::move(entries)));
}

}  // namespace

Array sharding_constraint(const Array& x, ShardingPtr sharding) {
  if (!innermost_trace({&x, 1})) {
    // JAX checks divisibility only when the value is placed (inside jit it may be uneven).
    sharding->check_shape(x.shape(), "with_sharding_constraint");
    return device_put(x, placed_sharding(x, std::move(sharding)));
  }
  return bind1(sharding_constraint_p(), {x}, constraint_params(std::move(sharding)));
}

namespace {

// The constraint fixes its operand's and result's split to the sharding's spec, on the
// sharding's devices, except its unconstrained dims (P::UNCONSTRAINED, vmap's batch dim):
// those are open, split as propagation decides.
ShardingRule constraint_sharding(std::span<const AbstractValue> in,
                                 std::span<const AbstractValue> out, const Params& p) {
  ShardingRule rule = elementwise_sharding_rule(in, out);
  const ShardingPtr& sharding = p.get_object<ShardingPtr>("sharding");
  ShardingRule::Split split(size_t(in[0].shape.ndim()));
  if (auto* named = dynamic_cast<const NamedSharding*>(sharding.get()))
    for (size_t d = 0; d < split.size(); ++d) split[d] = named->spec().axes_of(int(d));
  rule.fixed_operands = {split};
  rule.fixed_results = {split};
  rule.fixed_on = std::get<ObjectParam>(p.at("sharding"));
  std::vector<bool> open(split.size());
  for (int64_t d : p.get_object<std::set<int64_t>>("unconstrained_dims"))
    if (d >= 0 && d < int64_t(open.size())) open[size_t(d)] = true;
  if (std::find(open.begin(), open.end(), true) != open.end()) rule.open_dims = {open};
  return rule;
}

const Primitive& device_put_p() {
  static const Primitive& p = primitive("device_put");
  return p;
}

// device_put's copy_semantics: JAX's ArrayCopySemantics per operand.
struct CopySemantics {
  std::vector<std::string> names;
  bool operator==(const CopySemantics&) const = default;
};

}  // namespace

template <>
struct ParamTraits<CopySemantics> {
  static constexpr std::string_view name = "copy semantics";
  static std::string str(const CopySemantics& c) { return python_repr::tuple(c.names); }
  static size_t hash(const CopySemantics& c) {
    size_t h = c.names.size();
    for (const std::string& n : c.names) hash_combine(h, std::hash<std::string>{}(n));
    return h;
  }
};

namespace {

const ShardingList& targets_of(const Params& p) {
  return p.get_object<ShardingList>("devices");
}

std::vector<AbstractValue> device_put_types(std::span<const AbstractValue> in, const Params& p) {
  const ShardingList& targets = targets_of(p);
  if (in.size() != targets.items.size())
    throw TypeError("[device_put] expected " + std::to_string(targets.items.size()) +
                    " operands, got " + std::to_string(in.size()));
  std::vector<AbstractValue> out(in.begin(), in.end());
  for (size_t i = 0; i < out.size(); ++i)
    if (auto* named = dynamic_cast<const NamedSharding*>(targets.items[i].get()))
      out[i].sharding = type_sharding_of(*named, out[i].shape.ndim());
  return out;
}

constexpr const char* kReuseInput = "ArrayCopySemantics.REUSE_INPUT";
constexpr const char* kAlwaysCopy = "ArrayCopySemantics.ALWAYS_COPY";

Params device_put_params(ShardingList devices, ShardingList srcs, const char* copy = kReuseInput) {
  CopySemantics copies{std::vector<std::string>(devices.items.size(), copy)};
  return Params{{"copy_semantics", object_param(std::move(copies))},
                {"devices", object_param(std::move(devices))},
                {"srcs", object_param(std::move(srcs))}};
}

// device_put of the operands `xs` holds nonzero, from `srcs` to `devices` (each holding one entry
// per operand): staged under a trace, placed when concrete (the rules of an eager grad or vmap).
// Inside a compiled program the equation only copies: JAX 0.10 lowers it to nothing.
std::vector<Array> put(std::span<const Array> xs, const ShardingList& devices,
                       const ShardingList& srcs, const char* copy = kReuseInput) {
  std::vector<Array> in;
  ShardingList to{{}, "None", {}}, from{{}, "None", {}};
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!xs[i].valid() || is_zero(xs[i])) continue;
    in.push_back(xs[i]);
    to.items.push_back(devices.items[i]);
    from.items.push_back(srcs.items[i]);
    if (!devices.as_device.empty()) to.as_device.push_back(devices.as_device[i]);
  }
  std::vector<Array> moved;
  if (innermost_trace(in))
    moved = spmd::bind(device_put_p(), in, device_put_params(std::move(to), std::move(from), copy));
  else
    for (size_t i = 0; i < in.size(); ++i)
      moved.push_back(to.items[i] ? device_put(in[i], to.items[i]) : in[i]);
  std::vector<Array> out(xs.begin(), xs.end());
  for (size_t i = 0, k = 0; i < xs.size(); ++i)
    if (xs[i].valid() && !is_zero(xs[i])) out[i] = moved[k++];
  return out;
}

std::vector<Array> put_as(std::span<const Array> xs, const Params& p) {
  return put(xs, targets_of(p), p.get_object<ShardingList>("srcs"));
}

// JAX's linear jvp (zero tangents stay zero) and _device_put_transpose: the cotangents go back
// from the targets to the sources, copied (JAX turns REUSE_INPUT into ALWAYS_COPY there).
JvpResult device_put_jvp(std::span<const Array> primals, std::span<const Array> tangents,
                         const Params& p) {
  return {put_as(primals, p), put_as(tangents, p)};
}

std::vector<Array> device_put_transpose(std::span<const Array> cts, std::span<const LinearInput>,
                                        const Params& p) {
  return put(cts, p.get_object<ShardingList>("srcs"), targets_of(p), kAlwaysCopy);
}

// Each operand passes through to its result dim by dim, on whatever split propagation gives it;
// the mesh of a NamedSharding target decides the devices, as JAX's device assignment does.
ShardingRule device_put_sharding(std::span<const AbstractValue> in, std::span<const AbstractValue>,
                                 const Params& p) {
  ShardingRule rule;
  for (const AbstractValue& t : in) {
    ShardingRule::Tensor tensor;
    for (int d = 0; d < t.shape.ndim(); ++d) tensor.push_back({rule.add_factor(t.shape[d])});
    rule.operands.push_back(tensor);
    rule.results.push_back(tensor);
  }
  rule.pad_all();
  for (const auto& target : targets_of(p).items)
    if (auto* named = dynamic_cast<const NamedSharding*>(target.get())) {
      rule.fixed_on = object_param(named->mesh());
      break;
    }
  return rule;
}

// ---- reshard ------------------------------------------------------------------------------------
// JAX's reshard_p: the value moved to `dst_sharding`, its split over the Explicit axes of the
// abstract mesh, which is the result's type; `concrete_mesh` is the Mesh the sharding was given
// on, or None for a sharding read off a type (grad's cotangent seed). JAX prints neither.

const Primitive& reshard_p() {
  static const Primitive& p = primitive("reshard");
  return p;
}

const TypeSharding& dst_of(const Params& p) {
  return p.get_object<TypeSharding>("dst_sharding");
}

std::vector<AbstractValue> reshard_types(std::span<const AbstractValue> in, const Params& p) {
  if (in.size() != 1)
    throw TypeError("[reshard] expected 1 operand, got " + std::to_string(in.size()));
  AbstractValue out = in[0];
  const TypeSharding& dst = dst_of(p);
  if (int(dst.dims.size()) != out.shape.ndim())
    throw ValueError("[reshard] a sharding of " + std::to_string(dst.dims.size()) +
                     " dims for a value of shape " + out.shape.str());
  // The result's type is on dst's abstract mesh, as JAX's: one of Auto axes only (auto_axes)
  // too; a seed resharded onto such a mesh without a concrete one stays untyped.
  const bool explicit_axes = std::any_of(dst.mesh.begin(), dst.mesh.end(),
                                         [](const TypeSharding::Axis& a) { return a.is_explicit; });
  if (explicit_axes || std::holds_alternative<ObjectParam>(p.at("concrete_mesh")))
    out.sharding = dst;
  return {out};
}

Array reshard_as(const Array& x, const Params& p) {
  return reshard_to(x, dst_of(p), p.at("concrete_mesh"));
}

JvpResult reshard_jvp(std::span<const Array> x, std::span<const Array> t, const Params& p) {
  return JvpResult{{reshard_as(x[0], p)}, {reshard_as(t[0], p)}};
}

// JAX's _reshard_transpose_fancy: the cotangent goes back to its operand's sharding (an
// untyped operand's, unsplit as JAX's empty-mesh operand is: so that the cotangents of two
// reshards of one untyped value to different shardings add).
std::vector<Array> reshard_transpose(std::span<const Array> ct, std::span<const LinearInput> in,
                                     const Params& p) {
  if (is_zero(ct[0])) return {ct[0]};
  if (!in[0].aval.sharding) {
    std::optional<TypeSharding> unsplit = aval_of(ct[0]).sharding;
    if (!unsplit) return {ct[0]};
    for (std::vector<std::string>& axes : unsplit->dims) axes.clear();
    return {reshard_to(ct[0], std::move(*unsplit), p.at("concrete_mesh"))};
  }
  const TypeSharding& from = *in[0].aval.sharding;
  ParamValue mesh = p.at("concrete_mesh");
  // Back onto the operand's mesh: the same devices with the axis types of its type (auto_axes
  // moves values between such meshes).
  if (std::holds_alternative<ObjectParam>(mesh)) {
    const Mesh& on = p.get_object<Mesh>("concrete_mesh");
    if (!(unsplit_on(on, 0).mesh == from.mesh)) mesh = object_param(mesh_of_type(on, from));
  }
  return {reshard_to(ct[0], from, std::move(mesh))};
}

// JAX's _reshard_batcher: the batch dim is split over vmap's explicit mesh axes, those that are
// Explicit on the destination's mesh (onto auto_axes's Auto mesh, it is unsplit).
BatchResult reshard_batch(std::span<const Array> args, std::span<const int> dims, const Params& p,
                          const BatchContext& ctx) {
  std::vector<std::string> axes;
  for (const std::string& a : ctx.explicit_mesh_axis)
    for (const TypeSharding::Axis& axis : dst_of(p).mesh)
      if (axis.name == a && axis.is_explicit) axes.push_back(a);
  Params batched = p;
  batched.set("dst_sharding", batched_out_sharding(p, "dst_sharding", dims[0], axes));
  return result_at(bind1(reshard_p(), {args[0]}, batched), dims[0]);
}

// As a constraint's: the operand and the result have the split of the result's type, on the
// concrete mesh when there is one; the partitioner moves the operand to it.
ShardingRule reshard_sharding(std::span<const AbstractValue> in, std::span<const AbstractValue> out,
                              const Params& p) {
  ShardingRule rule = elementwise_sharding_rule(in, out);
  rule.fixed_operands = {dst_of(p).dims};
  rule.fixed_results = {dst_of(p).dims};
  if (const auto* mesh = std::get_if<ObjectParam>(&p.at("concrete_mesh"))) rule.fixed_on = *mesh;
  return rule;
}

// Run eagerly, as JAX's _reshard_impl: placed on the concrete mesh as the type says.
std::vector<Array> reshard_impl(std::span<const Array> in, const Params& p) {
  const auto* mesh = std::get_if<ObjectParam>(&p.at("concrete_mesh"));
  if (!mesh) return apply_primitive(reshard_p(), in, p);
  std::vector<PartitionSpec::Entry> entries;
  for (const std::vector<std::string>& axes : dst_of(p).dims)
    entries.push_back(axes.empty() ? PartitionSpec::Entry() : AxisNames(axes, axes.size() > 1));
  const Mesh& on = p.get_object<Mesh>("concrete_mesh");
  return {device_put(in[0], NamedSharding(on, PartitionSpec(std::move(entries))))};
}

}  // namespace

Array reshard_to(const Array& x, TypeSharding dst, ParamValue concrete_mesh) {
  // Onto a mesh of Manual axes only (inside a shard_map body), as JAX's: nothing to move.
  if (!dst.mesh.empty() &&
      std::ranges::all_of(dst.mesh, [](const TypeSharding::Axis& a) { return a.is_manual; }))
    return x;
  return bind1(reshard_p(), {x},
               Params{{"concrete_mesh", std::move(concrete_mesh)},
                      {"dst_sharding", object_param(std::move(dst))}});
}

std::vector<Array> staged_device_put(std::span<const Array> xs, ShardingList targets) {
  targets.absent = "None";
  ShardingList sources{std::vector<ShardingPtr>(xs.size()), "None", {}};
  return spmd::bind(device_put_p(), xs, device_put_params(std::move(targets), std::move(sources)));
}

void register_sharding_primitives(PrimitiveRegistry& r) {
  Primitive& p = r.define("sharding_constraint", identity_rule, copy_kernel);
  p.output_aliases_input = true;
  p.jvp = constraint_jvp;
  p.transpose = constraint_transpose;
  p.batch = constraint_batch;
  p.sharding_rule = constraint_sharding;
  // Once its operand has the constrained split, the constraint is the operand itself.
  p.localize = pass_on;

  Primitive& put = r.define("device_put", device_put_types, copy_all_kernel);
  put.jvp = device_put_jvp;
  put.transpose = device_put_transpose;
  put.batch = [](std::span<const Array> args, std::span<const int> dims, const Params& p,
                 const BatchContext&) {
    return BatchResult{put_as(args, p), std::vector<int>(dims.begin(), dims.end())};
  };
  put.sharding_rule = device_put_sharding;
  put.type_sharding_rule = [](std::span<const AbstractValue> in, std::span<AbstractValue> out,
                              const Params& p) {
    std::vector<AbstractValue> types = device_put_types(in, p);
    for (size_t i = 0; i < out.size(); ++i) out[i].sharding = types[i].sharding;
  };
  put.localize = pass_on;

  Primitive& reshard = r.define("reshard", reshard_types, copy_kernel);
  reshard.output_aliases_input = true;
  reshard.impl = reshard_impl;
  reshard.jvp = reshard_jvp;
  reshard.transpose = reshard_transpose;
  reshard.batch = reshard_batch;
  reshard.sharding_rule = reshard_sharding;
  reshard.type_sharding_rule = [](std::span<const AbstractValue> in, std::span<AbstractValue> out,
                                  const Params& p) {
    out[0].sharding = reshard_types(in, p)[0].sharding;
  };
  reshard.localize = pass_on;
  reshard.hides_param = [](std::string_view, const ParamValue&) { return true; };
}

}  // namespace spmd
