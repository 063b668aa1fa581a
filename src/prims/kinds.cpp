// Rules by kind: the batching rules JAX attaches with defvectorized, defbroadcasting,
// reducer_batcher and _cumred_batch_rule, written once for every primitive of the kind.
#include "prims/kinds.h"

#include <spmd/lax.h>

#include "prims/primitive.h"
#include "prims/rule_util.h"
#include "sharding/type_sharding.h"

#include <algorithm>
#include <stdexcept>

namespace spmd {
namespace {

using Ints = std::vector<int64_t>;

// JAX's defvectorized: one operand, mapped elementwise; the batch dimension stays put.
BatchRule vectorized(const Primitive* p) {
  return [p](std::span<const Array> args, std::span<const int> dims, const Params& params,
             const BatchContext&) { return all_at(spmd::bind(*p, args, params), dims[0]); };
}

// JAX's broadcast_batcher (defbroadcasting): when every non-scalar operand has the same shape
// and batch dimension the primitive applies as is; otherwise batch dims move to the front
// (unbatched operands get a size-1 leading dim) and lower-rank operands get trailing size-1
// dims, for the primitive's own broadcasting of size-1 dims. Aligned operands are cast to vary
// over vmap's spmd_axis_name first (spmd_names_insert_pvary), as JAX's are.
BatchResult broadcast_batcher(const Primitive& p, std::span<const Array> args,
                              std::span<const int> dims, const Params& params) {
  size_t first = 0;
  while (!is_batched(dims[first])) ++first;
  const Shape& shape = args[first].shape();
  int dim = dims[first];
  bool aligned = true;
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].ndim() > 0) aligned = aligned && args[i].shape() == shape && dims[i] == dim;
  std::vector<Array> xs = to_vector(args);
  if (aligned) xs = spmd_names_insert_pvary(std::move(xs));
  if (!aligned) {
    for (size_t i = 0; i < xs.size(); ++i)
      if (xs[i].ndim() > 0) xs[i] = move_batch_dim(xs[i], dims[i], 0, 1);
    int nd = 0;
    for (const Array& x : xs) nd = std::max(nd, x.ndim());
    for (size_t i = 0; i < xs.size(); ++i)
      if (is_batched(dims[i]) && xs[i].ndim() < nd)
        xs[i] = lax::expand_dims(xs[i], range(xs[i].ndim(), nd));
    dim = 0;
  }
  return all_at(spmd::bind(p, xs, params), dim);
}

BatchRule broadcasting(const Primitive* p) {
  return [p](std::span<const Array> args, std::span<const int> dims, const Params& params,
             const BatchContext&) { return broadcast_batcher(*p, args, dims, params); };
}

// JAX's reducer_batcher: reduced axes at or after the batch dimension shift by one; the batch
// dimension lands at its position among the kept dims, where a given out_sharding splits it
// over vmap's explicit mesh axes (get_sharding_for_vmap).
BatchRule reducer(const Primitive* p) {
  return [p](std::span<const Array> args, std::span<const int> dims, const Params& params,
             const BatchContext& ctx) {
    const int bdim = dims[0];
    const Ints axes = bump(params.get_ints("axes"), bdim);
    int out_dim = 0;
    for (int d = 0; d < bdim; ++d) out_dim += std::count(axes.begin(), axes.end(), d) ? 0 : 1;
    Params q = params;
    q.set("axes", axes);
    if (params.has("out_sharding"))
      q.set("out_sharding",
            batched_out_sharding(params, "out_sharding", out_dim, ctx.explicit_mesh_axis));
    return all_at(spmd::bind(*p, args, q), out_dim);
  };
}

// JAX's _cumred_batch_rule.
BatchRule cumulative(const Primitive* p) {
  return [p](std::span<const Array> args, std::span<const int> dims, const Params& params,
             const BatchContext&) {
    const int64_t axis = params.get_int("axis");
    Params q = params;
    q.set("axis", axis < dims[0] ? axis : axis + 1);
    return all_at(spmd::bind(*p, args, q), dims[0]);
  };
}

BatchRule batch_rule_of_kind(const Primitive& p) {
  switch (p.kind) {
    case PrimitiveKind::unary:
      return vectorized(&p);
    case PrimitiveKind::broadcasting:
      return broadcasting(&p);
    case PrimitiveKind::reducer:
      return reducer(&p);
    case PrimitiveKind::cumulative:
      return cumulative(&p);
    case PrimitiveKind::other:
      return {};
  }
  throw std::logic_error("unknown primitive kind");
}

// Cumulative ops: each element depends on every earlier one along the scanned dim.
ShardingRule cumulative_sharding(std::span<const AbstractValue> in, std::span<const AbstractValue>,
                                 const Params& params) {
  const int64_t axis = params.get_int("axis");
  const Shape& shape = in[0].shape;
  ShardingRule rule;
  ShardingRule::Tensor dims;
  for (int d = 0; d < shape.ndim(); ++d)
    dims.push_back({rule.add_factor(
        shape[d], d == axis ? FactorKind::need_replication : FactorKind::pass_through)});
  rule.operands.push_back(dims);
  rule.results.push_back(dims);
  rule.pad_all();
  return rule;
}

ShardingRuleFn sharding_rule_of_kind(const Primitive& p) {
  switch (p.kind) {
    case PrimitiveKind::unary:
    case PrimitiveKind::broadcasting:
      return [](std::span<const AbstractValue> in, std::span<const AbstractValue> out,
                const Params&) { return elementwise_sharding_rule(in, out); };
    case PrimitiveKind::reducer:
      return reducer_sharding;
    case PrimitiveKind::cumulative:
      return cumulative_sharding;
    case PrimitiveKind::other:
      return {};
  }
  throw std::logic_error("unknown primitive kind");
}

}  // namespace

// Reducers: the reduced dims are reduction factors without a combiner, so they need
// replication unless the family names the collective that completes a partial result.
ShardingRule reducer_sharding(std::span<const AbstractValue> in, std::span<const AbstractValue>,
                              const Params& params) {
  const Ints& axes = params.get_ints("axes");
  const Shape& shape = in[0].shape;
  ShardingRule rule;
  ShardingRule::Tensor operand, result;
  for (int d = 0; d < shape.ndim(); ++d) {
    const bool reduced = std::count(axes.begin(), axes.end(), d) > 0;
    const int f =
        rule.add_factor(shape[d], reduced ? FactorKind::reduction : FactorKind::pass_through);
    operand.push_back({f});
    if (!reduced) result.push_back({f});
  }
  rule.operands.push_back(std::move(operand));
  rule.results.push_back(std::move(result));
  rule.pad_all();
  return rule;
}

void complete_rules_from_kind(Primitive& p) {
  if (!p.batch) p.batch = batch_rule_of_kind(p);
  if (!p.sharding_rule) p.sharding_rule = sharding_rule_of_kind(p);
}

}  // namespace spmd
