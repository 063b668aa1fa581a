// Primitive family: sharding_constraint, JAX's with_sharding_constraint. The value is unchanged;
// the constraint says how it is laid out over devices: staged programs keep it for propagation and
// the partitioner, and with no trace the value is placed at once, as device_put places it.
#include "prims/sharding.h"

#include <spmd/error.h>
#include <spmd/placement.h>

#include "backends/cpu/copy.h"
#include "core/trace.h"
#include "prims/families.h"
#include "prims/primitive.h"
#include "prims/rule_util.h"
#include "sharding/param_traits.h"
#include "sharding/type_sharding.h"

#include <utility>
#include <vector>

namespace spmd {

namespace {

const Primitive& sharding_constraint_p() {
  static const Primitive& p = primitive("sharding_constraint");
  return p;
}

using ShardingPtr = std::shared_ptr<const Sharding>;

Params constraint_params(ShardingPtr sharding, std::set<int64_t> unconstrained_dims) {
  // spmd has no mesh context (jax.set_mesh), so the context mesh is always the empty one.
  return Params{{"context_mesh", object_param(Mesh())},
                {"layout", NoneParam{}},
                {"sharding", object_param(std::move(sharding))},
                {"unconstrained_dims", object_param(std::move(unconstrained_dims))}};
}

Array constrain_as(const Array& x, const Params& params) {
  return sharding_constraint(x, params.get_object<ShardingPtr>("sharding"),
                             params.get_object<std::set<int64_t>>("unconstrained_dims"));
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

// JAX's jvp: the tangent gets the same constraint.
JvpResult constraint_jvp(std::span<const Array> x, std::span<const Array> t, const Params& p) {
  return JvpResult{{constrain_as(x[0], p)}, {constrain_as(t[0], p)}};
}

// JAX's transpose: the constraint on the cotangent.
std::vector<Array> constraint_transpose(std::span<const Array> ct, std::span<const LinearInput>,
                                        const Params& p) {
  return {is_zero(ct[0]) ? Array() : constrain_as(ct[0], p)};
}

// A NamedSharding's spec with None inserted at the batch dim `d` and padded to `ndim`, as JAX's
// _pjit_batcher_for_sharding and _sharding_constraint_batcher lay it out. JAX writes
// UNCONSTRAINED at `d` (spmd's PartitionSpec has no such entry); unconstrained_dims records it.
ShardingPtr batched_sharding(const ShardingPtr& sharding, int d, int ndim) {
  const auto* named = dynamic_cast<const NamedSharding*>(sharding.get());
  if (!named) return sharding;
  std::vector<PartitionSpec::Entry> entries = named->spec().entries();
  entries.resize(size_t(ndim - 1));
  entries.insert(entries.begin() + d, std::nullopt);
  return std::make_shared<NamedSharding>(named->mesh(), PartitionSpec(std::move(entries)));
}

// JAX's _sharding_constraint_batcher without spmd_axis_name (spmd's vmap has none): the batch
// dim is unconstrained and the others keep their constraint.
BatchResult constraint_batch(std::span<const Array> args, std::span<const int> dims,
                             const Params& p, const BatchContext&) {
  const int d = dims[0];
  std::set<int64_t> unconstrained{d};
  for (int64_t u : p.get_object<std::set<int64_t>>("unconstrained_dims"))
    unconstrained.insert(u + (d <= u ? 1 : 0));
  ShardingPtr sharding = batched_sharding(p.get_object<ShardingPtr>("sharding"), d, args[0].ndim());
  return result_at(sharding_constraint(args[0], std::move(sharding), std::move(unconstrained)), d);
}

}  // namespace

Array sharding_constraint(const Array& x, ShardingPtr sharding,
                          std::set<int64_t> unconstrained_dims) {
  if (!innermost_trace({&x, 1})) {
    // JAX checks divisibility only when the value is placed (inside jit it may be uneven).
    sharding->check_shape(x.shape(), "with_sharding_constraint");
    return device_put(x, std::move(sharding));
  }
  return bind1(sharding_constraint_p(), {x},
               constraint_params(std::move(sharding), std::move(unconstrained_dims)));
}

namespace {

// The constraint fixes its operand's and result's split to the sharding's spec, on the
// sharding's devices. Unconstrained dims (vmap's batch dim) are fixed unsplit.
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
  return rule;
}

}  // namespace

void register_sharding_primitives(PrimitiveRegistry& r) {
  Primitive& p = r.define("sharding_constraint", identity_rule, copy_kernel);
  p.output_aliases_input = true;
  p.jvp = constraint_jvp;
  p.transpose = constraint_transpose;
  p.batch = constraint_batch;
  p.sharding_rule = constraint_sharding;
  // Once its operand has the constrained split, the constraint is the operand itself.
  p.localize = [](const Params&, std::span<const AbstractValue>, std::span<const AbstractValue>) {
    return LocalEquation{nullptr, {}};
  };
}

}  // namespace spmd
