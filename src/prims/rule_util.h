// Helpers for writing transformation rules (the rule types are in ir/primitive.h). Rules are
// written with spmd operations, so whatever they emit is recorded by the trace that is current
// when they run, and differentiates or batches again.
#pragma once

#include <spmd/array.h>
#include <spmd/sharding.h>

#include "ir/primitive.h"

#include <functional>
#include <optional>
#include <span>
#include <vector>

namespace spmd {

class PrimitiveRegistry;

// ---- helpers shared by rule files ---------------------------------------------------------------
// A concrete or staged zero of the given type, its sharding included (broadcast_in_dim of a 0.0
// literal, then pvary to the type's varying manual axes, as JAX's zeros_like_aval).
Array zeros_like_aval(const AbstractValue& aval);
// A placeholder of the given type whose value no computation reads (JAX's empty_like_aval: an
// `empty2` scalar broadcast to the shape). spmd fills it with zeros.
Array empty_like_aval(const AbstractValue& aval);
// Replaces a symbolic zero with zeros of `aval`; returns other tangents unchanged.
Array instantiate_zero(const Array& tangent, const AbstractValue& aval);
// JAX's add_any (adds two cotangent contributions; zeros are skipped). Defined with add_any in
// prims/elementwise.cpp.
Array add_cotangents(const Array& a, const Array& b);
// JAX's _const(x, v): a scalar of x's dtype that is never weakly typed.
Array const_of(const Array& x, double v);
// JAX's _one(x) / _zero(x): a scalar with x's dtype and weak type.
Array scalar_like(const Array& x, double v);
// JAX's _maybe_broadcast: x (0-d or with size-1 dims) broadcast to `target`.
Array maybe_broadcast(const Shape& target, const Array& x);

// What a tangent rule sees besides the tangent: the primal inputs, output and params.
struct Primal {
  std::span<const Array> x;
  const Array& ans;
  const Params& params;
};
// The contribution of one input's tangent `g` to the output tangent (a rule of JAX's
// defjvp/defjvp2); an invalid Array is a zero contribution, and so is an empty rule.
using TangentRule = std::function<Array(const Array& g, const Primal& p)>;
// JAX's standard_jvp for a single-output primitive: the primal, then every non-zero tangent's
// contribution in input order, then their sum with add_any.
JvpRule standard_jvp(const Primitive& p, std::vector<TangentRule> rules);
// The tangent rule of a one-operand primitive, from its tangent, operand and output.
using UnaryTangentRule = Array (*)(const Array& g, const Array& x, const Array& ans);
JvpRule unary_jvp(const Primitive& p, UnaryTangentRule rule);
// JAX's linear_jvp, the jvp of a primitive linear in all its inputs: the primitive on the
// primals, then on the tangents with zeros instantiated (all-zero tangents stay symbolic).
JvpResult linear_jvp(const Primitive& p, std::span<const Array> primals,
                     std::span<const Array> tangents, const Params& params);
// linear_jvp as the jvp rule of `p`.
JvpRule linear_jvp_rule(const Primitive& p);
// Registers a primitive linear in its inputs: linear_jvp as its jvp, `transpose` as its
// transpose rule.
void deflinear(Primitive& p, TransposeRule transpose);
void deflinear(PrimitiveRegistry& r, const char* name, TransposeRule transpose);
// Moves the batch dimension of x from `from` to `to` (kNotBatched broadcasts to axis_size).
Array move_batch_dim(const Array& x, int from, int to, int64_t axis_size);

// ---- dimension lists ----------------------------------------------------------------------------
// [begin, end).
std::vector<int64_t> range(int64_t begin, int64_t end);
// [0, n) without the entries of `removed` and `also_removed` (JAX's `remaining`).
std::vector<int64_t> remaining(int64_t n, const std::vector<int64_t>& removed,
                               const std::vector<int64_t>& also_removed = {});
// The permutation that sorts `v` (stable).
std::vector<int64_t> argsort(const std::vector<int64_t>& v);
std::vector<int64_t> concat(std::vector<int64_t> a, const std::vector<int64_t>& b);
// Dimension numbers after a batch dimension is inserted at `b`: dims at or after b shift by one.
std::vector<int64_t> bump(const std::vector<int64_t>& dims, int64_t b);
std::vector<int64_t> add_each(const std::vector<int64_t>& dims, int64_t k);
std::vector<int64_t> insert_at(std::vector<int64_t> v, int64_t pos, int64_t value);
std::vector<int64_t> prepend(int64_t value, const std::vector<int64_t>& v);

// lax.full(shape, 0, dtype): zeros that are not weakly typed.
Array strong_zeros(const Shape& shape, DType dtype);
// lax.broadcast_in_dim as JAX stages it: an identity broadcast (keeping x's sharding) is
// forwarded to its operand instead of being recorded. `sharding` is the result's, as JAX's
// out_sharding; none infers it from x's.
Array broadcast_or_forward(const Array& x, const Shape& shape, const std::vector<int64_t>& dims,
                           const std::optional<TypeSharding>& sharding = std::nullopt);
// lax.expand_dims as JAX stages it: size-1 dims inserted at `dims` (sorted) of the result.
Array expand_dims_or_forward(const Array& x, const std::vector<int64_t>& dims);
// A transpose rule for a primitive with one output and one input, which must be the linear one.
TransposeRule unary_transpose(Array (*rule)(const Array& ct, const AbstractValue& operand,
                                            const Params& params));

// A rule that binds `p` (its own primitive or another of its family), given as its first
// argument: binding(split, concatenate_transpose) is concatenate's transpose rule.
template <class Rule>
auto binding(const Primitive& p, Rule rule) {
  return [&p, rule](auto&&... args) { return rule(p, args...); };
}

// ---- sharding -----------------------------------------------------------------------------------
// The rules of ir/sharding_rule.h as a Primitive's sharding_rule.
ShardingRule elementwise_sharding(std::span<const AbstractValue> in,
                                  std::span<const AbstractValue> out, const Params& params);
ShardingRule replicated_sharding(std::span<const AbstractValue> in,
                                 std::span<const AbstractValue> out, const Params& params);

// ---- batching -----------------------------------------------------------------------------------
inline bool is_batched(int dim) {
  return dim != kNotBatched;
}
std::vector<Array> to_vector(std::span<const Array> xs);
// The size of the mapped axis, read off the first batched operand as JAX's rules do.
int64_t mapped_size(std::span<const Array> args, std::span<const int> dims);
BatchResult result_at(Array out, int dim);
BatchResult all_at(std::vector<Array> outs, int dim);
// JAX's batching.moveaxis: a transpose of an operand that has a batch dimension.
Array batch_moveaxis(const Array& x, int from, int to);
// JAX's batching.bdim_at_front: batched operands are transposed, others broadcast to `size`.
Array bdim_at_front(const Array& x, int dim, int64_t size);
// As move_batch_dim and bdim_at_front with JAX's mesh_axis=axis_data.explicit_mesh_axis: an
// unbatched value whose type has a sharding is broadcast to ctx.axis_size with the new dim split
// over ctx.explicit_mesh_axis (JAX's batching.broadcast).
Array move_batch_dim(const Array& x, int from, int to, const BatchContext& ctx);
Array bdim_at_front(const Array& x, int dim, const BatchContext& ctx);

// JAX's batching.spmd_names_insert_pvary: inside shard_map with check_vma, under vmaps with
// spmd_axis_name naming manual axes (core/axis_env.h, spmd_axis_names), each value cast with
// pvary to vary over those it does not vary over yet; otherwise the values as they are.
std::vector<Array> spmd_names_insert_pvary(std::vector<Array> xs);
Array spmd_names_insert_pvary(const Array& x);
// Those spmd_axis_names() that are manual axes typed by vma (shard_map with check_vma), in scope.
std::vector<std::string> varying_spmd_axis_names();

// JAX's pxla.batch_spec with vmap's spmd_axis_name: `spec` padded with None up to `dim` and the
// batch dim inserted there, split over ctx.spmd_axis_name (None when it is empty).
PartitionSpec batch_spec(const PartitionSpec& spec, int dim, const BatchContext& ctx);

// The vma rule of a primitive whose results are typed by the bodies it holds (call and control
// flow primitives): each output varies as the type `p`'s shape rule gives it, which is the type
// the body's trace gave that result; operands are not cast. JAX types pjit's, cond's, while's,
// scan's and the custom_jvp/custom_vjp calls' results so.
VmaRule vma_as_traced(const Primitive& p);
// Whether `spec` names one of vmap's spmd_axis_name axes (which JAX's batching rules refuse).
bool names_spmd_axis(const PartitionSpec& spec, const BatchContext& ctx);

}  // namespace spmd
